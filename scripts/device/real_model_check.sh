#!/usr/bin/env bash
# The real SmolLM2 file on the GPU: joins the parts carried over several calls, then runs
# gpu_tests' RealModelTest (CUDA vs CPU logits on the file's weights) once per environment
# setting given, e.g. "" "RTGEN_QKV_ROPE_GEMV=0" "RTGEN_PDL=0" (A/B of the GPU switches).
# Usage: scripts/device/real_model_check.sh BUNDLE PARTS_DIR [ENV_SETTING...]
set -uo pipefail
bundle="${1:?usage: real_model_check.sh BUNDLE PARTS_DIR [ENV_SETTING...]}"
parts="${2:?usage: real_model_check.sh BUNDLE PARTS_DIR [ENV_SETTING...]}"
shift 2
# shellcheck disable=SC1091
source "${bundle}/env.sh"
model=$("$(dirname "$0")/join_model.sh" "${parts}") || exit 2
[[ $# -gt 0 ]] || set -- ""
rc=0
for setting in "$@"; do
  echo "== RealModelTest with '${setting}'"
  # shellcheck disable=SC2086  # split on purpose: a setting may be empty or hold several A=B
  env ${setting} RTGEN_REAL_MODEL="${model}" "${bundle}/bin/gpu_tests" --gtest_color=no \
    --gtest_filter='RealModelTest.*' 2>&1 | grep -E "step|median|continuation|argmaxes|OK|FAILED|Failure|Expected|Which is"
  rc=$(( rc | PIPESTATUS[0] ))
done
exit "${rc}"
