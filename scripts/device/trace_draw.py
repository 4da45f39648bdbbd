#!/usr/bin/env python3
"""Kernel timelines of many processes, set side by side: fast runs against slow ones.

Reads the logs of env_ab.sh runs of the kernel-trace bench (BIN=rtgen-engine-bench-trace,
BENCH_ARGS=--kernel-trace: each log holds one decode step's timeline of rtgen's own kernels,
whose gaps hold what the trace does not see, cuBLASLt's GEMMs among them). Runs are split in two
by their graph TTFT at a prompt length (default 128): at --split-ms, or else at the widest jump
between sorted TTFTs when it is at least 3 % of the lower side. For each boundary of the step
(the kernel before > the kernel), it prints the median over each group's runs of the mean gap
and the mean run time over the step's launches there (us), and slow minus fast.
Usage: trace_draw.py OUT_DIR [--prompt 128] [--split-ms X]    (sessions 75-76, gpu_notes.md)
"""
import glob
import os
import re
import statistics
import sys

ROW = re.compile(r"^ +\d+ (\w+) +\d+ +[-0-9.]+ +[-0-9.]+ +[-0-9.]+ +[-0-9.]+ +([-0-9.]+) +"
                 r"([-0-9.]+) +[-0-9.]+\s*$")
TPOT = re.compile(r"graph bs +(\d+): tpot ([0-9.]+) ms")


def parse(path, prompt):
    """(ttft_ms, {batch: tpot_ms}, {boundary: [(gap_us, run_us), ...]}) or None."""
    text = open(path).read()
    ttft = re.search(rf"graph ttft prompt {prompt}: ([0-9.]+) ms", text)
    if not ttft:
        return None
    boundaries, previous = {}, "start"
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            name = m.group(1)
            boundaries.setdefault(f"{previous} > {name}", []).append(
                (float(m.group(2)), float(m.group(3))))
            previous = name
    tpots = {int(b): float(t) for b, t in TPOT.findall(text)}
    return float(ttft.group(1)), tpots, boundaries


def split_point(ttfts, given):
    if given is not None:
        return given
    ordered = sorted(ttfts)
    jumps = [(b - a, (a + b) / 2, a) for a, b in zip(ordered, ordered[1:])]
    if not jumps:
        return None
    jump, middle, low = max(jumps)
    return middle if jump >= 0.03 * low else None


def group_medians(members, key):
    """(gap, run): the median over the runs of each one's mean over its launches at `key`, us;
    None where no run of the group has that boundary."""
    rows = [run[2][key] for run in members if key in run[2]]
    if not rows:
        return None, None
    return tuple(statistics.median(statistics.mean(x[i] for x in row) for row in rows)
                 for i in (0, 1))


def cell(value):
    return f"{value:9.2f}" if value is not None else f"{'-':>9}"


def difference(fast, slow):
    return f"{slow - fast:+7.2f}" if fast is not None and slow is not None else f"{'-':>7}"


def main(argv):
    if not argv or argv[0].startswith("-"):
        sys.exit("usage: trace_draw.py OUT_DIR [--prompt 128] [--split-ms X]")
    out, prompt, given = argv[0], 128, None
    rest = argv[1:]
    while rest:
        flag, value = rest[0], rest[1] if len(rest) > 1 else None
        if flag not in ("--prompt", "--split-ms") or value is None:
            sys.exit(f"trace_draw: unknown or incomplete flag '{flag}'")
        if flag == "--prompt":
            prompt = int(value)
        else:
            given = float(value)
        rest = rest[2:]
    runs = {}
    for path in sorted(glob.glob(os.path.join(out, "*.log"))):
        parsed = parse(path, prompt)
        if parsed and parsed[2]:
            runs[os.path.basename(path)[:-4]] = parsed
    if not runs:
        sys.exit(f"trace_draw: no kernel-trace log with a TTFT at prompt {prompt} in {out}")
    cut = split_point([r[0] for r in runs.values()], given)
    groups = {"fast": [], "slow": []}
    for name, run in runs.items():
        groups["slow" if cut is not None and run[0] > cut else "fast"].append(run)
    for label, members in groups.items():
        if members:
            ttfts = [r[0] for r in members]
            tpots = [t for r in members for t in r[1].values()]
            shown = label if cut is not None else "all"
            print(f"{shown}: {len(members)} runs, TTFT {min(ttfts):.3f}-{max(ttfts):.3f} ms, "
                  f"TPOT {min(tpots):.3f}-{max(tpots):.3f} ms")
    if cut is None:
        print("one group: no jump of 3 % between the runs' TTFTs (--split-ms sets one)")
    print(f"{'boundary (before > kernel)':<34} {'n':>3} {'gap fast':>9} {'gap slow':>9} "
          f"{'delta':>7} {'run fast':>9} {'run slow':>9} {'delta':>7}")
    first = next(iter(runs.values()))[2]
    for key, launches in first.items():
        fast, slow = (group_medians(groups[label], key) for label in ("fast", "slow"))
        print(f"{key:<34} {len(launches):>3} {cell(fast[0])} {cell(slow[0])} "
              f"{difference(fast[0], slow[0])} {cell(fast[1])} {cell(slow[1])} "
              f"{difference(fast[1], slow[1])}")

if __name__ == "__main__":
    main(sys.argv[1:])
