#!/usr/bin/env bash
# Per-kernel time of one decode step (issue 4: "where the time goes"), with Nsight Compute on the
# GPU machine, clocks left alone. Profiles rtgen-engine-bench at one model and batch size, then
# sums kernel durations by (name, grid) over what was profiled. The bench captures every default
# graph bucket up to BATCH, and each capture's eager warm-up step is profiled too (the first
# 4000 launches in all); a batch's decode kernels are the rows whose grid carries that batch.
# Run with RTGEN_MATMUL_TUNE=0 so cuBLASLt's start-up tuning does not use up the launch budget.
# Usage: scripts/device/profile_decode.sh BUNDLE [MODEL] [BATCH]    (default smollm2-135m 1)
set -uo pipefail
bundle="${1:?usage: profile_decode.sh BUNDLE [MODEL] [BATCH]}"
model="${2:-smollm2-135m}"
batch="${3:-1}"
steps=4
out="${OUT:-$(mktemp -d)}"
mkdir -p "${out}"
# shellcheck disable=SC1091
source "${bundle}/env.sh"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[[ -n "${ncu}" ]] || { echo "profile_decode: ncu not found" >&2; exit 2; }
csv="${out}/ncu_${model}_b${batch}.csv"
"${ncu}" --clock-control none --csv --metrics gpu__time_duration.sum --launch-count 4000 \
  "${bundle}/bin/rtgen-engine-bench" --models "${model}" --batches "${batch}" --steps "${steps}" \
  --repeats 1 --built-repeats 0 --ttft-repeats 1 --ttft-prompts 16 --prompt 128 --no-eager \
  >"${csv}" 2>"${out}/ncu_${model}_b${batch}.log"
ncu_rc=$?
if (( ncu_rc != 0 )); then
  # A partial profile would be summed as if whole: say so, show the log's end, and stop.
  echo "profile_decode: ncu or the benchmark failed (exit ${ncu_rc})" >&2
  tail -20 "${out}/ncu_${model}_b${batch}.log" >&2
  exit 1
fi
python3 - "${csv}" "${steps}" <<'PY'
import csv, sys, collections
path, steps = sys.argv[1], int(sys.argv[2])
rows = [r for r in csv.reader(open(path)) if len(r) > 10]
head = rows[0]; rows = rows[1:]
name_i = head.index("Kernel Name"); val_i = head.index("Metric Value"); grid_i = head.index("Grid Size")
# Decode kernels run with a one-row grid pattern repeated every step; group by (name, grid).
agg = collections.defaultdict(lambda: [0, 0.0])
for r in rows:
    try: v = float(r[val_i].replace(",", ""))
    except ValueError: continue
    unit = r[head.index("Metric Unit")] if "Metric Unit" in head else "nsecond"
    v *= {"nsecond": 1, "usecond": 1e3, "msecond": 1e6}.get(unit, 1)  # to ns
    k = (r[name_i].split("(")[0][:60], r[grid_i]); agg[k][0] += 1; agg[k][1] += v
total = sum(v for _, v in agg.values())
print(f"{'kernel':60s} {'grid':>16s} {'launches':>8s} {'total us':>10s} {'mean us':>8s}")
for (n, g), (c, v) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:30]:
    print(f"{n:60s} {g:>16s} {c:8d} {v/1e3:10.1f} {v/c/1e3:8.2f}")
print(f"all kernels: {len(rows)} launches, {total/1e6:.2f} ms")
PY
