#!/usr/bin/env python3
"""Prints the README's markdown table from a JMH JSON result file (run with -prof gc)."""
import json, sys

res = {}
for r in json.load(open(sys.argv[1])):
    cls, m = r["benchmark"].split(".")[-2:]
    pm = r["primaryMetric"]
    alloc = r.get("secondaryMetrics", {}).get("gc.alloc.rate.norm", {}).get("score")
    res[(cls, m)] = (pm["score"], pm["scoreError"], alloc)

def fmt(x, err=None):
    if x is None: return "n/a"
    s = f"{x:,.0f}" if x >= 100 else f"{x:.1f}"
    return s + (f" ± {err:,.0f}" if err is not None and err >= 1 else (f" ± {err:.1f}" if err is not None else ""))

rows = [  # label, class, donkey method, ring method, target ratio
    ("Query params (6 params), vs wrap-params+wrap-keyword-params", "QueryParamsBench", "donkey", "ring", 8),
    ("Query params, vs ring.util.codec/form-decode only (ref.)", "QueryParamsBench", "donkey", "ringCodecOnly", None),
    ("JSON parse 5 KB, vs cheshire parse-stream", "JsonParseBench", "donkey", "cheshireParseStream", 2),
    ("JSON parse 5 KB, vs ring-json 0.4.0 read-json (slurp+parse-string)", "JsonParseBench", "donkey", "ringJson040", 2),
    ("JSON write 10 users, vs cheshire generate-string + getBytes", "JsonWriteBench", "donkey", "cheshire", 2),
]
print("| benchmark | donkey ns/op | donkey B/op | Ring ns/op | Ring B/op | ratio (Ring/donkey time) | target met? |")
print("|---|---:|---:|---:|---:|---:|---|")
for label, cls, d, r, target in rows:
    if (cls, d) not in res or (cls, r) not in res: continue
    dt, de, da = res[(cls, d)]; rt, re_, ra = res[(cls, r)]
    ratio = rt / dt
    met = "—" if target is None else (f"yes (≥ {target}x)" if ratio >= target else f"NO (< {target}x)")
    print(f"| {label} | {fmt(dt, de)} | {fmt(da)} | {fmt(rt, re_)} | {fmt(ra)} | {ratio:.1f}x | {met} |")
for m, label in [("literalHit", "literal hit"), ("paramHit", "param hit (/api/v1/users/:id/orders/:oid, last param route)"),
                 ("methodNotAllowed", "405 (DELETE on a POST-only path)"), ("notFound", "404 (no route)")]:
    if ("RouterBench", m) not in res: continue
    t, e, a = res[("RouterBench", m)]
    print(f"| Router, 50 routes: {label} | {fmt(t, e)} | {fmt(a)} | — | — | — | {'yes' if t < 150 else 'NO'} (< 150 ns) |")
