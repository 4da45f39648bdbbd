#!/usr/bin/env bash
# A/B of the persistent batch-1 decode kernel on the GPU machine: rtgen-engine-bench at batch 1
# with RTGEN_PERSISTENT_DECODE=1 (the persistent kernel) and =0 (the layered kernels), same call.
# Usage: scripts/device/persistent_ab.sh BUNDLE [MODELS] [MODES]
#   MODELS default smollm2-135m,llama3.2-1b,llama3-8b; MODES default "1 0".
# Writes $OUT/persistent_<mode>.json and .log; prints the TPOT table.
set -uo pipefail
bundle="${1:?usage: persistent_ab.sh BUNDLE [MODELS] [MODES]}"
models="${2:-smollm2-135m,llama3.2-1b,llama3-8b}"
modes="${3:-1 0}"
out="${OUT:-$(mktemp -d)}"
mkdir -p "${out}"
# shellcheck disable=SC1091
[[ -f "${bundle}/env.sh" ]] && source "${bundle}/env.sh"
rc=0
for mode in ${modes}; do
  echo "== RTGEN_PERSISTENT_DECODE=${mode}"
  RTGEN_PERSISTENT_DECODE="${mode}" timeout 400 "${bundle}/bin/rtgen-engine-bench" \
    --models "${models}" --batches 1 --steps 64 --repeats "${REPEATS:-3}" --built-repeats 0 \
    --ttft-prompts 128 --ttft-repeats 1 --json "${out}/persistent_${mode}.json" \
    > "${out}/persistent_${mode}.log" 2>&1
  rc=$(( rc | $? ))
  grep -E "tpot|batch 1|copy bandwidth" "${out}/persistent_${mode}.log" | head -20
done
python3 - "${out}" ${modes} <<'PY'
import json, os, sys
out, modes = sys.argv[1], sys.argv[2:]
runs = {m: json.load(open(os.path.join(out, f"persistent_{m}.json")))
        for m in modes if os.path.exists(os.path.join(out, f"persistent_{m}.json"))}
print(f"{'model':<14} " + " ".join(f"{'mode ' + m + ' graph/eager':>26}" for m in runs) + "   floor")
names = next(iter(runs.values()))["models"].keys() if runs else []
for name in names:
    cells, floor = [], None
    for m, d in runs.items():
        row = next((r for r in d["models"].get(name, {}).get("decode", []) if r["batch"] == 1), {})
        floor = row.get("floor_ms", floor)
        cells.append(f"{row.get('tpot_ms', float('nan')):>12.3f} / {row.get('eager_tpot_ms', float('nan')):>8.3f}   ")
    print(f"{name:<14} " + " ".join(cells) + f" {floor:.3f}")
PY
exit "${rc}"
