#!/usr/bin/env python3
"""The tables of bench/run.sh and bench/compare.sh, from the runs.tsv that bench/lib.sh's
measure_jvm writes (columns: RUNS_COLUMNS in bench/lib.sh; one row per JVM start and per
window of load). Both tables end with the CPUs' load over the measured windows when runs.tsv
has it (cpu_lines).

  warmup_tables.py run RUNS_TSV OUT_MD PEAK_FILE BASE
      (a) start-up, (b) warm-up, (c) steady state per request shape; every ratio is to the
      variant BASE (raw-vertx) of the same run. Writes BASE's steady json minimal median to
      PEAK_FILE (bench/latency.sh reads it).
  warmup_tables.py compare RUNS_TSV OUT_MD OLD NEW CONTROL
      one table: per figure the medians of OLD, NEW and CONTROL, NEW/OLD, the per-round
      NEW/OLD ratios and their median (with a 90% interval from resampling the rounds),
      OLD/CONTROL and NEW/CONTROL, and CONTROL's per-round figures over its own median; then
      the steady state's measured windows in pairs.

Windows in pairs (both tables): each measured window over the window of the same number in
the same round, test and shape; their median, with a 90% interval for it from resampling
whole rounds (round_interval).

Figures of one JVM (one round of one variant and test):
  start-up     seconds from the exec of java to the first 200 from /plaintext
  first K s    mean req/s of the first K one-second warm-up windows (K = 5 and 10, or fewer
               when there were fewer windows)
  steady       the median req/s of the measured windows in the minimal shape
  time to 90%  seconds from the first 200 to the end of the first window (warm-up windows,
               then the steady-seeking ones) at >= 0.9 x that JVM's own steady figure;
               infinite ("> N s", N the end of its last such window) when none got there
Medians over rounds; "> N s" when the median falls on an infinite one. A window whose wrk run
failed (errors -1) counts as a failed run, and its figures are left out.
"""
import csv
import math
import random
import statistics
import sys

INF = math.inf


def load(path):
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def jvms_of(rows):
    """(round, variant, test) -> the figures and errors of that JVM."""
    out = {}
    for r in rows:
        key = (int(r["round"]), r["variant"], r["test"])
        j = out.setdefault(key, dict(startup=None, failed=False, warmup=[], steady=[], note=None,
                                     load_before=None, measure={}, load_errors=0, load_failed=0,
                                     shape_errors={}, shape_failed={}))
        phase, err = r["phase"], int(r["errors"])
        if phase == "startup":
            if r["note"] == "start-failed":
                j["failed"] = True
            else:
                j["startup"] = float(r["seconds"])
            continue
        if phase in ("warmup", "steady"):
            if err >= 0:
                j[phase].append((float(r["rps"]), float(r["t_end"])))
                j["load_errors"] += err
            else:
                j["load_failed"] += 1
            if phase == "steady" and r["note"] not in ("", "-"):
                j["note"], j["load_before"] = r["note"], float(r["t_end"])
            continue
        shape = r["shape"]
        j["shape_errors"][shape] = j["shape_errors"].get(shape, 0) + max(0, err)
        j["shape_failed"][shape] = j["shape_failed"].get(shape, 0) + (1 if err < 0 else 0)
        if phase == "measure" and err >= 0:
            j["measure"].setdefault(shape, []).append((float(r["rps"]), float(r["p99_us"])))
    for j in out.values():
        j["measure"] = {shape: measured(ws) for shape, ws in j["measure"].items()}
        steady = j["measure"].get("minimal", {}).get("rps")
        j["t90"] = t90(j["warmup"] + j["steady"], steady)
    return out


def measured(windows):
    """A shape's figures from its measured windows [(rps, p99_us)]: the median req/s, and the
    median p99 of the windows that have one (-1 when none has)."""
    p99 = [p for _, p in windows if p > 0]
    return dict(rps=statistics.median(rps for rps, _ in windows),
                p99=statistics.median(p99) if p99 else -1.0)


def t90(windows, steady):
    """(seconds, bound): the end of the first window at >= 0.9 x steady, or (INF, the end of the
    last window); (None, None) without a steady figure."""
    if not steady or not windows:
        return (None, None)
    for rps, t_end in windows:
        if rps >= 0.9 * steady:
            return (t_end, None)
    return (INF, windows[-1][1])


def first(j, k):
    w = [rps for rps, _ in j["warmup"][:k]]
    return statistics.fmean(w) if w else None


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def windows_of(jvms):
    return max((len(j["warmup"]) for j in jvms.values()), default=0)


def spans(jvms):
    """The K of the 'first K s' columns: 5 and 10, or fewer when there were fewer windows."""
    w = windows_of(jvms)
    return sorted({min(5, w), min(10, w)} - {0})


def paired_by_round(rows, a, b, test, shape):
    """The ratios a / b of measured windows that ran beside each other, by round: the same
    round, test, shape and window number (with ALTERNATE=1 the JVMs of a round take turns
    window by window, so a pair shares the machine's state of that minute). Failed windows are
    left out."""
    w = {}
    for r in rows:
        if r["phase"] != "measure" or r["test"] != test or r["shape"] != shape or int(r["errors"]) < 0:
            continue
        w[r["round"], r["window"], r["variant"]] = float(r["rps"])
    by_round = {}
    for k in w:
        if k[2] == b and (k[0], k[1], a) in w and w[k] > 0:
            by_round.setdefault(k[0], []).append(w[k[0], k[1], a] / w[k])
    return by_round


def round_interval(by_round, level=0.90, resamples=2000, seed=1):
    """A `level` interval for the median of the paired ratios, from resampling whole rounds
    with replacement (a round's windows share its JVMs, so they are not independent draws):
    (low, high), or None with fewer than two rounds. Seeded, so a table is reproducible."""
    groups = [rs for rs in by_round.values() if rs]
    if len(groups) < 2:
        return None
    rng = random.Random(seed)
    medians = sorted(statistics.median([x for g in rng.choices(groups, k=len(groups)) for x in g])
                     for _ in range(resamples))
    tail = (1 - level) / 2
    return medians[int(tail * (resamples - 1))], medians[int(math.ceil((1 - tail) * (resamples - 1)))]


def fmt_median(by_round):
    """The median of every round's ratios together, then round_interval's interval for it in
    brackets when there is one."""
    ratios = [x for rs in by_round.values() for x in rs]
    ci = round_interval(by_round)
    return f"{statistics.median(ratios):.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def fmt_paired(by_round):
    ratios = [x for rs in by_round.values() for x in rs]
    if not ratios:
        return "n/a"
    return f"{fmt_median(by_round)} ({min(ratios):.2f}..{max(ratios):.2f}, {len(ratios)} pairs)"


def fmt_rps(x):
    return "n/a" if x is None else f"{x:,.0f}"


def fmt_s(x, digits=2, bound=None):
    if x is None:
        return "n/a"
    if x == INF:
        return f"> {bound:.1f} s" if bound is not None else "> all windows"
    return f"{x:.{digits}f} s"


def fmt_ratio(a, b):
    if a is None or b is None or b == 0 or a == INF or b == INF:
        return "n/a"
    return f"{a / b:.2f}"


def fmt_lat(us):
    if us is None or us < 0:
        return "n/a"
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} us"


def t90_median(js):
    """The median time to 90% over JVMs, and the smallest bound among the infinite ones."""
    vals = [j["t90"][0] for j in js if j["t90"][0] is not None]
    bounds = [j["t90"][1] for j in js if j["t90"][0] == INF]
    return (statistics.median(vals) if vals else None), (min(bounds) if bounds else None)


def errors_text(errors, failed_runs, failed_starts=0):
    text = str(errors)
    extra = []
    if failed_runs:
        extra.append(f"wrk failed: {failed_runs} runs")
    if failed_starts:
        extra.append(f"failed starts: {failed_starts}")
    return text + (f" ({', '.join(extra)})" if extra else "")


def ordered(rows, column):
    seen = []
    for r in rows:
        if r[column] not in seen:
            seen.append(r[column])
    return seen


# ------------------------------------------------------------------------------------ run
def run_tables(rows, base):
    jvms = jvms_of(rows)
    variants, tests = ordered(rows, "variant"), ordered(rows, "test")
    shapes = ordered([r for r in rows if r["phase"] == "measure"], "shape")
    by = {}
    for (_, v, t), j in jvms.items():
        by.setdefault((v, t), []).append(j)
    out = []

    # (a) start-up
    starts = {v: [j["startup"] for t in tests for j in by.get((v, t), []) if j["startup"] is not None]
              for v in variants}
    base_start = median(starts.get(base, []))
    out += ["### Start-up: exec of java to the first 200 from /plaintext", "",
            "Every start of the run (rounds x tests); vs raw-vertx is the ratio of the medians"
            " (above 1: slower).", "",
            "| variant | median | min..max | starts | vs raw-vertx |", "| --- | ---: | ---: | ---: | ---: |"]
    for v in variants:
        s = starts[v]
        failed = sum(1 for t in tests for j in by.get((v, t), []) if j["failed"])
        n = f"{len(s)}" + (f" ({failed} failed)" if failed else "")
        out.append(f"| {v} | {fmt_s(median(s))} | "
                   f"{(f'{min(s):.2f}..{max(s):.2f} s' if s else 'n/a')} | {n} | {fmt_ratio(median(s), base_start)} |")

    # (b) warm-up
    ks = spans(jvms)
    head = "| variant | test |" + "".join(f" first {k} s req/s | vs raw-vertx |" for k in ks) \
        + " time to 90% | vs raw-vertx | errors |"
    out += ["", "### Warm-up: a fresh JVM per (variant, test), one-second windows from the first 200", "",
            "Medians over rounds; vs raw-vertx is the ratio of the medians (above 1: more req/s, or"
            " more seconds to 90% of the steady state); errors: warm-up and steady-seeking windows.", "",
            head, "| --- | --- |" + " ---: | ---: |" * len(ks) + " ---: | ---: | ---: |"]
    for t in tests:
        bj = by.get((base, t), [])
        for v in variants:
            js = by.get((v, t), [])
            cells = []
            for k in ks:
                m, bm = median(first(j, k) for j in js), median(first(j, k) for j in bj)
                cells += [fmt_rps(m), fmt_ratio(m, bm)]
            m, bound = t90_median(js)
            bm, _ = t90_median(bj)
            errs = errors_text(sum(j["load_errors"] for j in js), sum(j["load_failed"] for j in js),
                               sum(1 for j in js if j["failed"]))
            out.append(f"| {v} | {t} | " + " | ".join(cells)
                       + f" | {fmt_s(m, 1, bound)} | {fmt_ratio(m, bm)} | {errs} |")

    # (c) steady state
    out += ["", "### Steady state: measured after the steady-seeking windows, per request shape", "",
            "Medians over rounds; windows in pairs: each measured window over raw-vertx's window of the same"
            " number in the same round (median, in brackets a 90% interval from resampling whole rounds, min..max,"
            " pairs; with ALTERNATE=1 the two ran beside each other);"
            " errors: the shape's settle and measured runs; steady reached: rounds whose"
            " steady-seeking windows agreed (the others stopped at STEADY_MAX), and the median time from"
            " the first 200 to the end of that phase.", "",
            "| variant | test | shape | req/s (median) | min..max | p99 | errors | vs raw-vertx | windows in pairs"
            " vs raw-vertx | steady reached |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    def rps_of(v, t, s):
        return [j["measure"][s]["rps"] for j in by.get((v, t), []) if s in j["measure"]]

    for t in tests:
        for s in shapes:
            base_median = median(rps_of(base, t, s))
            for v in variants:
                js, rps = by.get((v, t), []), rps_of(v, t, s)
                p99 = [j["measure"][s]["p99"] for j in js if s in j["measure"] and j["measure"][s]["p99"] > 0]
                errs = errors_text(sum(j["shape_errors"].get(s, 0) for j in js),
                                   sum(j["shape_failed"].get(s, 0) for j in js),
                                   sum(1 for j in js if j["failed"]))
                agreed = sum(1 for j in js if j["note"] == "agreed")
                before = median(j["load_before"] for j in js)
                reached = f"{agreed}/{len(js)} agreed" + (f", after {before:.0f} s" if before is not None else "")
                spread = f"{min(rps):,.0f}..{max(rps):,.0f}" if rps else "n/a"
                out.append(f"| {v} | {t} | {s} | {fmt_rps(median(rps))} | {spread} | {fmt_lat(median(p99))} | "
                           f"{errs} | {fmt_ratio(median(rps), base_median)} | "
                           f"{fmt_paired(paired_by_round(rows, v, base, t, s)) if v != base else '-'} | {reached} |")
    out += cpu_lines(rows, variants, tests)
    peak = median(rps_of(base, "json", "minimal"))
    return "\n".join(out), peak


def cpu_lines(rows, variants, tests):
    """The CPUs' load over the measured windows, per variant and test, from runs.tsv's
    server_cpu, load_cpu and steal columns; [] for a runs.tsv without them. A window whose load
    generator was busy near 100% measured wrk as much as the server."""
    def num(r, k):
        try:
            return float(r.get(k) or -1)
        except ValueError:
            return -1.0
    measured = [r for r in rows if r["phase"] == "measure" and num(r, "load_cpu") >= 0
                and int(r["errors"]) >= 0]
    if not measured:
        return []
    out = ["", "CPU over the measured windows (runs.tsv's server_cpu, load_cpu, steal; median, max):"
               " server's CPU / load generator's CPU / steal; windows with the load generator at >= 95%.", "",
           "| test | variant | server CPU | load generator CPU | steal | load generator >= 95% |",
           "| --- | --- | ---: | ---: | ---: | ---: |"]
    for t in tests:
        for v in variants:
            ws = [r for r in measured if r["variant"] == v and r["test"] == t]
            if not ws:
                continue
            cells = []
            for k, digits in (("server_cpu", 0), ("load_cpu", 0), ("steal", 1)):
                xs = [num(r, k) for r in ws if num(r, k) >= 0]
                cells.append(f"{statistics.median(xs):.{digits}f}%, {max(xs):.{digits}f}%" if xs else "n/a")
            hot = sum(1 for r in ws if num(r, "load_cpu") >= 95)
            out.append(f"| {t} | {v} | " + " | ".join(cells) + f" | {hot}/{len(ws)} |")
    return out


# -------------------------------------------------------------------------------- compare
def compare_table(rows, old, new, control):
    jvms = jvms_of(rows)
    tests = ordered(rows, "test")
    shapes = ordered([r for r in rows if r["phase"] == "measure"], "shape")
    rounds = sorted({k[0] for k in jvms})
    ks = spans(jvms)
    figures = [("start-up", lambda j: j["startup"], "s2")]
    figures += [(f"first {k} s req/s", (lambda k: lambda j: first(j, k))(k), "rps") for k in ks]
    figures += [("time to 90%", lambda j: j["t90"][0], "s1")]
    figures += [(f"steady {s} req/s", (lambda s: lambda j: j["measure"].get(s, {}).get("rps"))(s), "rps")
                for s in shapes]

    def fmt(x, kind, bound=None):
        return fmt_rps(x) if kind == "rps" else fmt_s(x, int(kind[1]), bound)

    def med(label, t, get):
        vals = [get(jvms[r, label, t]) for r in rounds if (r, label, t) in jvms]
        vals = [x for x in vals if x is not None]
        if not vals:
            return None, None
        bounds = [jvms[r, label, t]["t90"][1] for r in rounds
                  if (r, label, t) in jvms and jvms[r, label, t]["t90"][0] == INF]
        return statistics.median(vals), (min(bounds) if bounds else None)

    out = [f"| figure | test | {control} | {old} | {new} | {new} / {old} | per round | "
           f"{old} / {control} | {new} / {control} | {control} per round / its median |",
           "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |"]
    for t in tests:
        for name, get, kind in figures:
            (c, cb), (o, ob), (n, nb) = med(control, t, get), med(old, t, get), med(new, t, get)
            per, paired_rounds = [], {}
            for r in rounds:
                a = get(jvms[r, new, t]) if (r, new, t) in jvms else None
                b = get(jvms[r, old, t]) if (r, old, t) in jvms else None
                per.append(fmt_ratio(a, b))
                if a is not None and b and a != INF and b != INF:
                    paired_rounds[r] = [a / b]
            if paired_rounds:
                per.insert(0, f"median {fmt_median(paired_rounds)}:")
            ctl = []
            for r in rounds:
                x = get(jvms[r, control, t]) if (r, control, t) in jvms else None
                ctl.append(fmt_ratio(x, c))
            out.append(f"| {name} | {t} | {fmt(c, kind, cb)} | {fmt(o, kind, ob)} | {fmt(n, kind, nb)} | "
                       f"{fmt_ratio(n, o)} | {' '.join(per)} | {fmt_ratio(o, c)} | {fmt_ratio(n, c)} | "
                       f"{' '.join(ctl)} |")
    notes = []
    for label in (control, old, new):
        js = [j for (_, v, _), j in jvms.items() if v == label]
        errs = sum(j["load_errors"] + sum(j["shape_errors"].values()) for j in js)
        failed_runs = sum(j["load_failed"] + sum(j["shape_failed"].values()) for j in js)
        agreed = sum(1 for j in js if j["note"] == "agreed")
        notes.append(f"{label}: errors {errors_text(errs, failed_runs, sum(1 for j in js if j['failed']))}, "
                     f"steady agreement reached in {agreed}/{len(js)} JVMs")
    pairs = ["", "Measured windows in pairs: each window over the window of the same number in the same round"
                 " (the JVMs of a round alive together, their windows alternating); median [90% interval from"
                 " resampling whole rounds] (min..max, pairs).",
             "", f"| test | shape | {old} / {control} | {new} / {control} | {new} / {old} |",
             "| --- | --- | ---: | ---: | ---: |"]
    for t in tests:
        for s in shapes:
            pairs.append(f"| {t} | {s} | {fmt_paired(paired_by_round(rows, old, control, t, s))} | "
                         f"{fmt_paired(paired_by_round(rows, new, control, t, s))} | "
                         f"{fmt_paired(paired_by_round(rows, new, old, t, s))} |")
    return "\n".join(out + [""] + notes + pairs + cpu_lines(rows, [control, old, new], tests))


def main():
    mode = sys.argv[1]
    rows = load(sys.argv[2])
    if mode == "run":
        out_md, peak_file, base = sys.argv[3:6]
        text, peak = run_tables(rows, base)
        print(text)
        with open(out_md, "w") as f:
            f.write(text + "\n")
        if peak:
            with open(peak_file, "w") as f:
                f.write(f"{peak:.0f}\n")
    elif mode == "compare":
        out_md, old, new, control = sys.argv[3:7]
        text = compare_table(rows, old, new, control)
        print(text)
        with open(out_md, "w") as f:
            f.write(text + "\n")
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
