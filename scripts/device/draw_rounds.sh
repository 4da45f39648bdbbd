#!/usr/bin/env bash
# The draw's bisection (session 77, docs/perf/gpu_notes.md): rtgen-engine-bench with
# --model-rounds in PROCS processes for each variant, each variant a label and the bench's extra
# arguments (e.g. s64="--spacer-mib 64"), then draw_rounds.py's round-by-round F/S patterns.
# Usage: scripts/device/draw_rounds.sh BUNDLE LABEL=ARGS...
# Environment: PROCS (2), ROUNDS (8), MODEL (smollm2-135m), BATCH (64), STEPS (16), OUT.
# Exit status: non-zero where a run failed (its process reads "failed").
set -uo pipefail
bundle="${1:?usage: draw_rounds.sh BUNDLE LABEL=ARGS...}"
shift
(( $# > 0 )) || { echo "draw_rounds: no LABEL=ARGS given" >&2; exit 2; }
out="${OUT:-$(mktemp -d)}"
mkdir -p "${out}"
# shellcheck disable=SC1091
[[ -f "${bundle}/env.sh" ]] && source "${bundle}/env.sh"
bin="${bundle}/bin/rtgen-engine-bench"
[[ -x "${bin}" ]] || { echo "draw_rounds: ${bin} missing" >&2; exit 2; }
rc=0
for variant in "$@"; do
  label="${variant%%=*}"
  [[ "${variant}" == *=* && -n "${label}" && "${label}" != *[!A-Za-z0-9-]* ]] ||
    { echo "draw_rounds: '${variant}' is not LABEL=ARGS (LABEL: letters, digits, -)" >&2; exit 2; }
  args="${variant#*=}"
  for p in $(seq 1 "${PROCS:-2}"); do
    json="${out}/${label}_${p}.json"
    rm -f "${json}"  # no earlier run's file may stand in for this one
    # shellcheck disable=SC2086  # ARGS are the bench's arguments, split on spaces
    "${bin}" --models "${MODEL:-smollm2-135m}" --batches "${BATCH:-64}" --steps "${STEPS:-16}" \
      --repeats 3 --built-repeats 0 --ttft-prompts 128 --ttft-repeats 3 --no-eager \
      --model-rounds "${ROUNDS:-8}" ${args} --json "${json}" > "${out}/${label}_${p}.log" 2>&1 ||
      { echo "draw_rounds: ${label} process ${p} failed (${out}/${label}_${p}.log)" >&2
        echo '{"failed": true}' > "${json}"; rc=1; }
  done
done
python3 "$(dirname "${BASH_SOURCE[0]}")/draw_rounds.py" "${out}" --batch "${BATCH:-64}" || rc=1
exit "${rc}"
