#!/usr/bin/env bash
# Runs the CUDA backend's GPU tests on a machine with a GPU and prints a summary.
# Usage (from the repository root, binaries built on the build machine and carried along):
#   scripts/device/gpu_checks.sh [DIR]        (default: build/device)
# DIR is either a bundle made by ../shared/tools/device-bundle.sh (DIR/env.sh, DIR/bin/gpu_tests:
# the GPU machine lacks the Debian libraries) or a build directory (DIR/bin/gpu_tests).
# Environment: GTEST_FILTER to run a subset; OUT (optional) receives the logs and XML report.
# Exit status: that of gpu_tests (0 all passed, 77 no device, anything else a failure).
set -uo pipefail

build_dir="${1:-build/device}"
bin="${build_dir}/bin/gpu_tests"
if [[ -f "${build_dir}/env.sh" ]]; then
  # shellcheck disable=SC1091
  source "${build_dir}/env.sh"
fi
out="${OUT:-$(mktemp -d)}"
mkdir -p "${out}"

if [[ ! -x "${bin}" ]]; then
  echo "gpu_checks: ${bin} not found or not executable (build target gpu_tests first)" >&2
  exit 2
fi

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader 2>&1 || true
echo "== missing shared libraries (should be none)"
ldd "${bin}" | grep "not found" || echo "none"

echo "== gpu_tests"
start=$(date +%s)
"${bin}" --gtest_color=no --gtest_output="xml:${out}/gpu_tests.xml" 2>&1 | tee "${out}/gpu_tests.log"
rc=${PIPESTATUS[0]}
end=$(date +%s)

echo "== summary"
echo "exit status: ${rc} ($( [[ ${rc} -eq 0 ]] && echo passed || ([[ ${rc} -eq 77 ]] && echo skipped || echo FAILED) )), $((end - start)) s"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]" "${out}/gpu_tests.log" | sort | uniq -c | head -50
# Every measured error line (rel L2 and the like) of failing checks, for tolerance tuning.
grep -E "Which is|rel|Expected|seed|\.cc:[0-9]+: Failure" "${out}/gpu_tests.log" | head -80
echo "logs: ${out}/gpu_tests.log ${out}/gpu_tests.xml"
exit "${rc}"
