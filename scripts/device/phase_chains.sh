#!/usr/bin/env bash
# What each phase of a decode layer costs on its own, and what two phases in turn cost beyond
# that (issue 4: where the time goes), on the GPU machine. The step is timed:
#   - whole;
#   - as `base`: every layer phase skipped (RTGEN_DIAG_SKIP, kernels/diag_skip.h), so only the
#     step's own kernels run (embedding, LM head, sampler);
#   - with one phase left (`qkv` ...), and with two consecutive phases left (`attention+o` ...).
# The phases left run back to back with the others skipped, their results garbage: a chain of
# one kind of kernel, each with its hand-off to the next of its kind. A phase alone costs
# (TPOT with it alone - base) / layers; a pair's "beyond" is its cost less its two phases' costs
# alone; the layer's is the whole step's cost a layer less the five phases' costs alone. With
# attention skipped the o projection has no partitions to merge (kernels/diag_skip.h), so "o"
# alone is the plain GEMV and attention+o's beyond holds the merge's cost. Session 71
# (SmolLM2-135M b1, H100): the five alone added to 11.2 of the layer's 12.0 us, and the 0.8
# left was all attention -> o's: the merge (session 72).
# The runs go through env_ab.sh (one variant a label), as where_time_goes.sh's do.
# Usage: scripts/device/phase_chains.sh BUNDLE
# Environment: MODELS (default smollm2-135m), BATCHES (default 1), ROUNDS (default 2), and
#   STEPS, REPEATS, TIMEOUT, OUT as env_ab.sh. Exits non-zero when a run or the summary fails.
#   Other switches in the environment reach every run (a control: RTGEN_DECODE_MERGE_IN_O=0
#   phase_chains.sh BUNDLE); RTGEN_DIAG_SKIP is the script's own.
set -uo pipefail
bundle="${1:?usage: phase_chains.sh BUNDLE}"
out="${OUT:-$(mktemp -d)}"
phases=(qkv attention o gate_up down)
# Each variant's RTGEN_DIAG_SKIP lists every layer phase it does not leave running. The norms
# are never skipped: where they are launches of their own, base has them too, so they cancel
# out of every figure.
skips_but() {  # the phases not among "$@", comma separated
  local keep=" $* " list="" p
  for p in "${phases[@]}"; do
    [[ "${keep}" == *" ${p} "* ]] || list+="${list:+,}${p}"
  done
  echo "${list}"
}
variants=(whole= "base=RTGEN_DIAG_SKIP=$(skips_but)")
for p in "${phases[@]}"; do variants+=("${p}=RTGEN_DIAG_SKIP=$(skips_but "${p}")"); done
for i in "${!phases[@]}"; do
  a=${phases[i]} b=${phases[(i + 1) % ${#phases[@]}]}  # down is followed by the next qkv
  variants+=("${a}+${b}=RTGEN_DIAG_SKIP=$(skips_but "${a}" "${b}")")
done
OUT="${out}" MODELS="${MODELS:-smollm2-135m}" BATCHES="${BATCHES:-1}" ROUNDS="${ROUNDS:-2}" \
  "$(dirname "${BASH_SOURCE[0]}")/env_ab.sh" "${bundle}" "${variants[@]}"
rc=$?
python3 - "${out}" "${ROUNDS:-2}" "$(dirname "${BASH_SOURCE[0]}")" "${phases[@]}" <<'PY'
import sys
out, rounds, here, phases = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
sys.path.insert(0, here)
from bench_runs import median_tpots
pairs = [f"{a}+{phases[(i + 1) % len(phases)]}" for i, a in enumerate(phases)]
runs = {label: median_tpots(out, label, rounds) for label in ["whole", "base"] + phases + pairs}
def per_layer(label, key):
    """us a layer above base, or None when either run is missing."""
    t, b = runs[label][0].get(key), runs["base"][0].get(key)
    layers = runs["base"][1].get(key[0]) or runs[label][1].get(key[0])
    return None if t is None or b is None or not layers else (t - b) * 1e3 / layers
def tidy(v):
    """v rounded to the printed 0.01, without a "-0.00"."""
    return round(v, 2) + 0.0
cell = lambda v: f"{'-':>9}" if v is None else f"{tidy(v):>9.2f}"
keys = sorted(runs["base"][0])
print("\nalone: us a layer above base (each phase a chain of its own kind, hand-offs included)")
print(f"{'model':<14} {'batch':>5} {'base ms':>8} " + " ".join(f"{p:>9}" for p in phases) +
      f" {'sum':>9} {'whole':>9} {'beyond':>9}")
for key in keys:
    alone = [per_layer(p, key) for p in phases]
    total = None if None in alone else sum(alone)
    whole = per_layer("whole", key)
    beyond = None if total is None or whole is None else whole - total
    print(f"{key[0]:<14} {key[1]:>5} {runs['base'][0][key]:>8.4f} " +
          " ".join(cell(v) for v in alone) + f" {cell(total)} {cell(whole)} {cell(beyond)}")
print("\npairs in turn: us a layer above base, then (beyond their two phases alone)")
print(f"{'model':<14} {'batch':>5} " + " ".join(f"{p:>24}" for p in pairs))
for key in keys:
    cells = []
    for pair in pairs:
        a, b = pair.split("+")
        v, va, vb = per_layer(pair, key), per_layer(a, key), per_layer(b, key)
        cells.append(f"{'-':>24}" if None in (v, va, vb)
                     else f"{v:>14.2f} ({tidy(v - va - vb):+6.2f})")
    print(f"{key[0]:<14} {key[1]:>5} " + " ".join(cells))
PY
summary=$?  # a crash of the summary is a failure too
exit $(( rc | summary ))
