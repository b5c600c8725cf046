-- wrk script for bench/run.sh and bench/compare.sh: sends DEPTH requests per write (HTTP/1.1
-- pipelining; the first script argument, default 16; 1 means no pipelining) of the request
-- shape the second argument names, and prints one machine-readable summary line at the end,
-- which the scripts parse:
--   RESULT requests=N duration_us=N rps=N p50_us=N p99_us=N max_us=N non2xx=N connect=N read=N write=N timeout=N
--
--   wrk -t1 -c256 -d10s -s bench/pipeline.lua http://127.0.0.1:8080/plaintext -- 16 minimal
--
-- Shapes (the headers after the request line, in this order):
--   minimal      Host only: wrk's own default request
--   techempower  Host, Accept, Connection: the headers TechEmpower's wrk runs send; Accept is
--                the plaintext one, or the json one when the path contains "json"
--   browser      what a current desktop Chrome sends when it loads a page: User-Agent, the
--                Sec-CH-UA client hints, Sec-Fetch-*, Accept, Accept-Language, Accept-Encoding,
--                a Referer and a cookie of a few hundred bytes
--   gzip         Host and `Accept-Encoding: gzip` (bench/compression.sh)
--   (none)       Host and `Accept: */*`, the request of earlier versions of this script, which
--                latency.sh and protocols.sh still send

local batch

local TFB_ACCEPT_PLAINTEXT =
  "text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7"
local TFB_ACCEPT_JSON =
  "application/json,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7"

local CHROME = "142"
local COOKIE = table.concat({
  "_ga=GA1.1.1187342465.1761822036",
  "_ga_7XQ2PLM4RT=GS2.1.s1764231185$o14$g1$t1764231907$j60$l0$h0",
  "_gcl_au=1.1.904713262.1761822036",
  "cookie_consent=necessary%2Canalytics%2Cpreferences",
  "csrftoken=Wm3kQ9vTz1pR8sYfL2nXc7HbJ4aE6uGd",
  "session_id=s%3AeyJ1aWQiOiI0ODIxMDciLCJleHAiOjE3NjQ4MzU5MDd9.Zk2v9Q0cR7mT1wX8yB3nL6pJ4sH5dF0a",
  "theme=dark",
  "lang=en-GB",
  "recently_viewed=1042%2C877%2C1311%2C96",
}, "; ")

-- name/value pairs after Host, by shape; `test` is "json" or "plaintext"
local function headers_of(shape, test, host)
  if shape == "minimal" then
    return {}
  elseif shape == "gzip" then
    return { { "Accept-Encoding", "gzip" } }
  elseif shape == "techempower" then
    return {
      { "Accept", test == "json" and TFB_ACCEPT_JSON or TFB_ACCEPT_PLAINTEXT },
      { "Connection", "keep-alive" },
    }
  elseif shape == "browser" then
    return {
      { "Connection", "keep-alive" },
      { "Cache-Control", "max-age=0" },
      { "sec-ch-ua", '"Chromium";v="' .. CHROME .. '", "Google Chrome";v="' .. CHROME .. '", "Not_A Brand";v="99"' },
      { "sec-ch-ua-mobile", "?0" },
      { "sec-ch-ua-platform", '"Linux"' },
      { "Upgrade-Insecure-Requests", "1" },
      { "User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/"
                      .. CHROME .. ".0.0.0 Safari/537.36" },
      { "Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
                  .. "image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7" },
      { "Sec-Fetch-Site", "same-origin" },
      { "Sec-Fetch-Mode", "navigate" },
      { "Sec-Fetch-User", "?1" },
      { "Sec-Fetch-Dest", "document" },
      { "Referer", "http://" .. host .. "/" },
      { "Accept-Encoding", "gzip, deflate, br" },
      { "Accept-Language", "en-GB,en-US;q=0.9,en;q=0.8" },
      { "Cookie", COOKIE },
    }
  end
  error("pipeline.lua: unknown request shape '" .. tostring(shape) .. "'")
end

local function request_of(shape, path, host)
  if shape == nil or shape == "" then
    return wrk.format("GET", path, { ["Accept"] = "*/*" })
  end
  local test = path:find("json", 1, true) and "json" or "plaintext"
  local lines = { "GET " .. path .. " HTTP/1.1", "Host: " .. host }
  for _, h in ipairs(headers_of(shape, test, host)) do
    lines[#lines + 1] = h[1] .. ": " .. h[2]
  end
  return table.concat(lines, "\r\n") .. "\r\n\r\n"
end

function init(args)
  local depth = tonumber(args[1]) or 16
  local one = request_of(args[2], wrk.path, wrk.headers["Host"])
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
