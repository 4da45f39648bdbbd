#!/usr/bin/env python3
"""Backends built anew in one process, round by round: which draw fast, which slow.

Reads the JSON files draw_rounds.sh leaves in OUT (LABEL_P.json, one process each, written by
rtgen-engine-bench --model-rounds N: the model under "NAME", then "NAME#2", ...). Every round's
graph TPOT at the batch is split in two at the widest jump between the sorted TPOTs of all
files, when that jump is at least 3 % of the lower side: F below it, S above, "-" for a round
with no figure. Without such a jump every round is F. A run that failed reads "failed". One
line a process (its label, its rounds' TPOTs and TTFTs, its pattern), then how many processes of
each label drew each pattern.
Usage: draw_rounds.py OUT_DIR [--batch 64] [--prompt 128]    (session 77, gpu_notes.md)
"""
import collections
import glob
import json
import os
import sys

from trace_draw import split_point  # the widest jump of 3 % or more, as trace_draw.py splits


def rounds(path, batch, prompt):
    """[(tpot_ms or None, ttft_ms or None)] in round order, or None for a failed run."""
    try:
        models = json.load(open(path))["models"]
    except (OSError, ValueError, KeyError):
        return None

    def order(key):
        return int(key.split("#")[1]) if "#" in key else 1

    out = []
    for key in sorted(models, key=order):
        m = models[key]
        tpot = next((r["tpot_ms"] for r in m.get("decode", []) if r["batch"] == batch), None)
        out.append((tpot, m.get("ttft_ms", {}).get(str(prompt))))
    return out


def main(argv):
    out_dir = argv[1]
    batch = int(argv[argv.index("--batch") + 1]) if "--batch" in argv else 64
    prompt = int(argv[argv.index("--prompt") + 1]) if "--prompt" in argv else 128
    runs = {}
    for path in sorted(glob.glob(os.path.join(out_dir, "*.json"))):
        runs[os.path.basename(path)[:-5]] = rounds(path, batch, prompt)
    tpots = [t for r in runs.values() if r for t, _ in r if t is not None]
    cut = split_point(tpots, None)
    print(f"batch {batch}: " + (f"slow above {cut:.3f} ms" if cut else "no jump of 3 %: all F"))
    patterns = collections.defaultdict(collections.Counter)
    for name, r in runs.items():
        label = name.rsplit("_", 1)[0]
        if r is None:
            print(f"{name:16s} failed (no figures)")
            patterns[label]["failed"] += 1
            continue
        marks = " ".join("-" if t is None else ("S" if cut and t > cut else "F") for t, _ in r)
        cells = " | ".join("-" if t is None else f"{t:.3f}" + (f" ttft {f:.3f}" if f else "")
                           for t, f in r)
        print(f"{name:16s} {marks:20s} {cells}")
        patterns[label][marks] += 1
    print("patterns by label:")
    for label, counts in patterns.items():
        print(f"  {label}: " + ", ".join(f"{p} x{n}" for p, n in counts.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
