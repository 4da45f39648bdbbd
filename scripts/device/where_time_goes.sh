#!/usr/bin/env bash
# Where the decode step's time goes inside the CUDA graph (issue 4), on the GPU machine: the
# step timed whole, then without each part in turn (RTGEN_DIAG_SKIP, kernels/diag_skip.h; the
# results are garbage then), through env_ab.sh. A part's cost is the whole step's TPOT minus the
# TPOT without it: per layer for the layer parts, per step for the LM head; kernel boundaries
# included, so the parts need not add up to the step.
# Usage: scripts/device/where_time_goes.sh BUNDLE
# Environment: MODELS, BATCHES (default 1), ROUNDS (default 2), OUT, as env_ab.sh.
set -uo pipefail
bundle="${1:?usage: where_time_goes.sh BUNDLE}"
out="${OUT:-$(mktemp -d)}"
parts=(attn_norm qkv attention o ffn_norm gate_up down lm_head)
variants=(whole=)
for part in "${parts[@]}"; do variants+=("${part}=RTGEN_DIAG_SKIP=${part}"); done
OUT="${out}" BATCHES="${BATCHES:-1}" ROUNDS="${ROUNDS:-2}" \
  "$(dirname "${BASH_SOURCE[0]}")/env_ab.sh" "${bundle}" "${variants[@]}"
rc=$?
python3 - "${out}" "${ROUNDS:-2}" "$(dirname "${BASH_SOURCE[0]}")" "${parts[@]}" <<'PY'
import sys
out, rounds, here, parts = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
sys.path.insert(0, here)
from bench_runs import median_tpots
whole, layers = median_tpots(out, "whole", rounds)
skipped = {p: median_tpots(out, p, rounds)[0] for p in parts}
print("\ncost of each part inside the graph, us (median of the rounds; layer parts per layer)")
print(f"{'model':<14} {'batch':>5} {'step ms':>8} " + " ".join(f"{p:>9}" for p in parts))
for (name, batch), step in whole.items():
    cells = []
    for p in parts:
        skip = skipped[p].get((name, batch))
        if skip is None:
            cells.append(f"{'-':>9}")
            continue
        saved_us = (step - skip) * 1e3
        per = saved_us if p == "lm_head" else saved_us / layers[name]
        cells.append(f"{per:>9.1f}")
    print(f"{name:<14} {batch:>5} {step:>8.3f} " + " ".join(cells))
PY
summary=$?  # a crash of the summary is a failure too
exit $(( rc | summary ))
