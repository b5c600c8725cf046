"""bench/protocols.sh's parsing and table, one subcommand each:

  h2load OUTFILE TEST [window]    one h2load run's output -> "rps=N errors=N"; TEST h2c, h2 or
                                 tls-json (HTTP/1.1 over TLS); with window, the run had a
                                 warm-up (--warm-up-time) and failed as a whole if h2load made a
                                 connection inside its measured window
  stime OUTFILE CLIENTS T0 T1    the s_time outputs OUTFILE.1..CLIENTS of one handshake run,
                                 T0 and T1 its start and end in ns -> "rps=N errors=N"; writes
                                 a summary to OUTFILE
  table RUNS_TSV TABLE_MD        the medians table, printed and written to TABLE_MD

errors is -1 when the run failed as a whole (no answer, h2load did not get the protocol it
asked for, or a connection was made in the measured window); the reason goes to stderr.
"""
import csv
import re
import statistics
import sys

# The least ratio to raw Vert.x each (test, variant) should reach (bench/RESULTS.md).
TARGETS = {("tls-json", "donkey-nb"): 0.95, ("handshake", "donkey-nb"): 0.95,
           ("h2c", "donkey-nb"): 0.90, ("h2", "donkey-nb"): 0.90,
           ("h2c", "donkey-sync"): 0.80, ("h2", "donkey-sync"): 0.80}


# The application protocol and transport each test must have got.
H2LOAD_PROTOCOLS = {"h2c": ("h2c", False), "h2": ("h2", True), "tls-json": ("http/1.1", True)}


def _us(text):
    """h2load's duration ("0us", "1.23ms", "2.5s") in microseconds."""
    m = re.match(r"([0-9.]+)(us|ms|s)$", text)
    return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]


def h2load(path, test, window=None):
    text = open(path).read()
    fin = re.search(r"^finished in [0-9.]+m?s, ([0-9.]+) req/s", text, re.M)
    req = re.search(r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                    r"(\d+) failed, (\d+) errored, (\d+) timeout", text, re.M)
    codes = re.search(r"^status codes: (\d+) 2xx", text, re.M)
    proto = re.search(r"^Application protocol: (\S+)", text, re.M)
    tls = re.search(r"^TLS Protocol: (\S+)", text, re.M)
    want_proto, want_tls = H2LOAD_PROTOCOLS[test]
    why = None
    if not (fin and req and codes and proto) or int(req.group(3)) == 0:
        why = "no result, or no request done"
    elif proto.group(1) != want_proto or bool(tls) != want_tls:
        why = "got %s%s, not %s%s" % (proto.group(1), " over " + tls.group(1) if tls else "",
                                      want_proto, " over TLS" if want_tls else "")
    elif window:
        # After --warm-up-time h2load times only the connections it makes from then on: any
        # "time for connect" is a connection (a handshake) inside the measured window.
        conn = re.search(r"^time for connect:\s+(\S+)\s+(\S+)", text, re.M)
        if not conn:
            why = "no 'time for connect' line"
        elif _us(conn.group(2)) > 0:
            why = ("a connection was made inside the measured window (time for connect up to "
                   "%s): the warm-up did not cover the handshakes" % conn.group(2))
    if why:
        sys.stderr.write("%s: %s\n" % (path, why))
        return "rps=0 errors=-1"
    done, ok = int(req.group(3)), int(codes.group(1))
    errors = int(req.group(5)) + int(req.group(6)) + int(req.group(7)) + (done - ok)
    return "rps=%s errors=%d" % (fin.group(1), errors)


def stime(path, clients, t0, t1):
    conns, errors, lines = 0, 0, []
    for i in range(1, int(clients) + 1):
        text = open("%s.%d" % (path, i)).read()
        m = re.search(r"^(\d+) connections in \d+ real seconds, (\d+) bytes read per connection",
                      text, re.M)
        if m and int(m.group(2)) > 0:
            conns += int(m.group(1))
        else:
            errors += 1
        lines.append("client %d: %s" % (i, m.group(0) if m else " | ".join(text.split("\n"))[:300]))
    secs = (int(t1) - int(t0)) / 1e9
    lines.append("%d connections in %.3f s" % (conns, secs))
    open(path, "w").write("\n".join(lines) + "\n")
    return "rps=%.1f errors=%d" % (conns / secs, errors if conns else -1)


def table(runs_tsv, out):
    rows = list(csv.DictReader(open(runs_tsv), delimiter="\t"))
    order, tests = [], []
    for r in rows:
        if r["variant"] not in order:
            order.append(r["variant"])
        if r["test"] not in tests:
            tests.append(r["test"])
    # raw-vertx-km (TLS tests): raw Vert.x with its key manager built once, beside the plain
    # raw-vertx the ratios, rounds and targets refer to
    km = any(r["variant"] == "raw-vertx-km" for r in rows)
    lines = ["| test | variant | req/s (median) | min..max | errors | load avg | vs raw Vert.x |"
             + (" vs raw-vertx-km |" if km else "") + " round by round | target |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |" + (" ---: |" if km else "")
             + " --- | --- |"]
    for t in tests:
        stats = {}
        for v in order:
            rs = [r for r in rows if r["variant"] == v and r["test"] == t]
            if not rs:
                continue
            ok = [r for r in rs if int(r["errors"]) >= 0]
            rps = [float(r["rps"]) for r in ok]
            loads = [float(r["loadavg"]) for r in rs if r["loadavg"] != "-"]
            errs = sum(max(0, int(r["errors"])) + max(0, int(r["warmup_errors"])) for r in rs)
            failed = len(rs) - len(ok)
            stats[v] = dict(rps=statistics.median(rps) if rps else 0.0,
                            spread=(min(rps), max(rps)) if rps else (0.0, 0.0),
                            load=(min(loads), max(loads)) if loads else None,
                            failed=failed,
                            errors=str(errs) + (" (%d runs failed)" % failed if failed else ""))
        base = stats.get("raw-vertx", {}).get("rps", 0)
        base_km = stats.get("raw-vertx-km", {}).get("rps", 0)
        # each round's ratio to raw Vert.x of the same round: on a shared machine the load
        # moves between rounds more than within one
        raw_by_round = {r["round"]: float(r["rps"]) for r in rows
                        if r["variant"] == "raw-vertx" and r["test"] == t and int(r["errors"]) >= 0}
        for v, s in stats.items():
            ratio = s["rps"] / base if base else None
            goal = TARGETS.get((t, v))
            # a run that answered nothing is a miss whatever the other rounds' median says
            verdict = "" if goal is None else ">= %.2f: %s" % (
                goal, "missed (runs failed)" if s["failed"] else
                "met" if ratio is not None and ratio >= goal else "missed")
            load = "n/a" if s["load"] is None else "%.2f..%.2f" % s["load"]
            rounds = [] if v == "raw-vertx" else [
                "%.2f" % (float(r["rps"]) / raw_by_round[r["round"]])
                if int(r["errors"]) >= 0 and raw_by_round.get(r["round"]) else "-"
                for r in rows if r["variant"] == v and r["test"] == t]
            km_col = ""
            if km:
                km_col = " %s |" % ("n/a" if not base_km else "%.2f" % (s["rps"] / base_km))
            lines.append("| %s | %s | %s | %s..%s | %s | %s | %s |%s %s | %s |" % (
                t, v, "{:,.0f}".format(s["rps"]), "{:,.0f}".format(s["spread"][0]),
                "{:,.0f}".format(s["spread"][1]), s["errors"], load,
                "n/a" if ratio is None else "%.2f" % ratio, km_col, " ".join(rounds), verdict))
    text = "\n".join(lines)
    print(text)
    open(out, "w").write(text + "\n")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "h2load":
        print(h2load(*args))
    elif cmd == "stime":
        print(stime(*args))
    elif cmd == "table":
        table(*args)
    else:
        sys.exit("unknown subcommand " + cmd)
