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
# alone; the layer's is the whole step's cost a layer less the five phases' costs alone. Session
# 71 (SmolLM2-135M b1, H100): the five alone added to 11.2 of the layer's 12.0 us, and the 0.8
# left was all attention -> o's.
# Usage: scripts/device/phase_chains.sh BUNDLE
# Environment: MODELS (default smollm2-135m), BATCHES (default 1), ROUNDS (default 2), STEPS
#   (decode steps a run, default 64), REPEATS (default 5), TIMEOUT (seconds a run, default 300),
#   OUT (logs and JSON). Exits non-zero when a run or the summary fails. Other switches in the
#   environment reach every run (a control: RTGEN_DECODE_MERGE_IN_O=0 phase_chains.sh BUNDLE);
#   RTGEN_DIAG_SKIP is the script's own.
set -uo pipefail
bundle="${1:?usage: phase_chains.sh BUNDLE}"
out="${OUT:-$(mktemp -d)}"
mkdir -p "${out}"
# shellcheck disable=SC1091
[[ -f "${bundle}/env.sh" ]] && source "${bundle}/env.sh"
bench="${bundle}/bin/rtgen-engine-bench"
[[ -x "${bench}" ]] || { echo "phase_chains: ${bench} is not an executable" >&2; exit 2; }
phases=(qkv attention o gate_up down)
# label -> the layer phases left running (space separated; "all" for the whole step)
labels=(whole base)
declare -A left=([whole]=all [base]="")
for p in "${phases[@]}"; do labels+=("${p}"); left[${p}]="${p}"; done
for i in "${!phases[@]}"; do
  a=${phases[i]} b=${phases[(i + 1) % ${#phases[@]}]}  # down is followed by the next qkv
  labels+=("${a}+${b}")
  left[${a}+${b}]="${a} ${b}"
done
# RTGEN_DIAG_SKIP for a label: every layer phase not left. The norms are never skipped: where
# they are launches of their own, base has them too, so they cancel out of every figure.
skips_of() {
  local keep=" ${left[$1]} " list="" p
  [[ "${left[$1]}" == all ]] && { echo ""; return; }
  for p in "${phases[@]}"; do
    [[ "${keep}" == *" ${p} "* ]] || list+="${list:+,}${p}"
  done
  echo "${list}"
}
rc=0
for round in $(seq 1 "${ROUNDS:-2}"); do
  for label in "${labels[@]}"; do
    json="${out}/${label}_${round}.json"
    rm -f "${json}"  # no earlier run's file may stand in for a run that dies before writing
    RTGEN_DIAG_SKIP="$(skips_of "${label}")" timeout "${TIMEOUT:-300}" "${bench}" \
      --models "${MODELS:-smollm2-135m}" --batches "${BATCHES:-1}" --steps "${STEPS:-64}" \
      --repeats "${REPEATS:-5}" --built-repeats 0 --ttft-prompts 128 --ttft-repeats 1 \
      --no-eager --json "${json}" > "${out}/${label}_${round}.log" 2>&1
    status=$?
    echo "== round ${round}: ${label} (RTGEN_DIAG_SKIP='$(skips_of "${label}")'): exit ${status}"
    (( status != 0 )) && tail -5 "${out}/${label}_${round}.log"
    rc=$(( rc | status ))
  done
done
python3 - "${out}" "${ROUNDS:-2}" "${phases[@]}" <<'PY'
import json, os, statistics, sys
out, rounds, phases = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
pairs = [f"{a}+{phases[(i + 1) % len(phases)]}" for i, a in enumerate(phases)]
def load(label):
    """(model, batch) -> median TPOT ms over the rounds that wrote one; model -> layers."""
    tpots, layers = {}, {}
    for r in range(1, rounds + 1):
        path = os.path.join(out, f"{label}_{r}.json")
        if not os.path.exists(path):
            continue
        for name, m in json.load(open(path))["models"].items():
            layers[name] = m["config"]["layers"]
            for row in m.get("decode", []):
                tpots.setdefault((name, row["batch"]), []).append(row["tpot_ms"])
    return {k: statistics.median(v) for k, v in tpots.items()}, layers
runs = {label: load(label) for label in ["whole", "base"] + phases + pairs}
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
