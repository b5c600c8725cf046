-- wrk script for bench/run.sh: sends DEPTH requests per write (HTTP/1.1 pipelining; the
-- script argument, default 16; 1 means no pipelining) and prints one machine-readable summary
-- line at the end, which run.sh parses:
--   RESULT requests=N duration_us=N rps=N p50_us=N p99_us=N max_us=N non2xx=N connect=N read=N write=N timeout=N
--
--   wrk -t1 -c256 -d10s -s bench/pipeline.lua http://127.0.0.1:8080/plaintext -- 16

local batch

function init(args)
  local depth = tonumber(args[1]) or 16
  local one = wrk.format("GET", wrk.path, { ["Accept"] = "*/*" })
  local parts = {}
  for i = 1, depth do parts[i] = one end
  batch = table.concat(parts)
end

function request()
  return batch
end

-- Latency: wrk's own percentiles (what `wrk --latency` prints), with one repair. After a run
-- wrk 4.1 folds a coordinated-omission correction into its histogram; entries it adds below
-- the recorded minimum are counted in the total but never visited by percentile(), which then
-- returns 0 for high percentiles. The fraction of the histogram percentile() can see is found
-- by bisection (the highest p it still answers for), and p is taken within that part, so a
-- run without hidden entries gets exactly wrk's figure and no run gets 0.
local function pct(latency, p)
  local v = tonumber(latency:percentile(p)) or 0
  if v > 0 then return v end
  local lo, hi = 0, p
  if (tonumber(latency:percentile(lo + 1e-9)) or 0) <= 0 then return -1 end
  for _ = 1, 50 do
    local mid = (lo + hi) / 2
    if (tonumber(latency:percentile(mid)) or 0) > 0 then lo = mid else hi = mid end
  end
  v = tonumber(latency:percentile(p * lo / 100)) or 0
  if v <= 0 then return -1 end
  return v
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d duration_us=%d rps=%.1f p50_us=%d p99_us=%d max_us=%d non2xx=%d connect=%d read=%d write=%d timeout=%d\n",
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    pct(latency, 50), pct(latency, 99), latency.max,
    e.status, e.connect, e.read, e.write, e.timeout))
end
