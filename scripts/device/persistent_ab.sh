#!/usr/bin/env bash
# A/B of the persistent batch-1 decode kernel on the GPU machine: rtgen-engine-bench at batch 1
# with RTGEN_PERSISTENT_DECODE=1 (the persistent kernel) and =0 (the layered kernels), same call,
# graph and eager (env_ab.sh runs them and prints the table).
# Usage: scripts/device/persistent_ab.sh BUNDLE [MODELS] [MODES]
#   MODELS default smollm2-135m,llama3.2-1b,llama3-8b; MODES default "1 0".
# Writes $OUT/persistent<mode>_1.json and .log.
set -uo pipefail
bundle="${1:?usage: persistent_ab.sh BUNDLE [MODELS] [MODES]}"
variants=()
for mode in ${3:-1 0}; do variants+=("persistent${mode}=RTGEN_PERSISTENT_DECODE=${mode}"); done
MODELS="${2:-smollm2-135m,llama3.2-1b,llama3-8b}" BATCHES=1 REPEATS="${REPEATS:-3}" EAGER=1 \
  TIMEOUT="${TIMEOUT:-400}" \
  exec "$(dirname "${BASH_SOURCE[0]}")/env_ab.sh" "${bundle}" "${variants[@]}"
