#!/usr/bin/env python3
"""Samples a server JVM's CPU time while bench/latency.sh measures it, so that a run whose
requests queued can be told apart: the JIT compiling on the server's one core, a collection,
the loop itself busy, or the core taken away from the JVM altogether (nothing in the JVM ran).

Usage: cpu_sampler.py PID OUT [PERIOD_S]

Every PERIOD_S (0.1) seconds until PID exits or the sampler is killed, appends one line to OUT:
    wall_time total loop jit vm
wall_time in seconds since the epoch; the others are the process's and some of its threads'
CPU times (user + system) in clock ticks (100 per second on Linux), as cumulative counters from
/proc. loop: threads named vert.x-eventloop*; jit: the C1/C2 compiler threads; vm: the VM
Thread, where the serial collector's pauses (the collector the bench's one-CPU JVMs get) and
the other safepoint operations run, and any GC worker threads. A thread is named once, when first seen, so
a sample costs a handful of small reads (run it on the load generator's CPU, not the server's).
"""
import os
import sys
import time


def group(name):
    if name.startswith("vert.x-eventloo"):
        return "loop"
    if name.startswith(("C1 CompilerThre", "C2 CompilerThre")):
        return "jit"
    if name == "VM Thread" or name.startswith(("GC Thread", "G1 ")):
        return "vm"
    return None


def ticks(path):
    """utime + stime of a /proc stat file, or None when it is gone."""
    try:
        with open(path) as f:
            s = f.read()
    except OSError:
        return None
    fields = s[s.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def main():
    pid, out = sys.argv[1], sys.argv[2]
    period = float(sys.argv[3]) if len(sys.argv) > 3 else 0.1
    groups = {}  # tid -> group or None
    with open(out, "w") as f:
        while True:
            t = time.time()
            total = ticks(f"/proc/{pid}/stat")
            if total is None:
                return
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                return
            sums = {"loop": 0, "jit": 0, "vm": 0}
            for tid in tids:
                if tid not in groups:
                    try:
                        with open(f"/proc/{pid}/task/{tid}/comm") as c:
                            groups[tid] = group(c.read().rstrip("\n"))
                    except OSError:
                        groups[tid] = None
                g = groups[tid]
                if g is not None:
                    v = ticks(f"/proc/{pid}/task/{tid}/stat")
                    if v is not None:
                        sums[g] += v
            f.write(f"{t:.3f} {total} {sums['loop']} {sums['jit']} {sums['vm']}\n")
            f.flush()
            time.sleep(max(0.0, period - (time.time() - t)))


if __name__ == "__main__":
    main()
