#!/usr/bin/env bash
# Builds rtgen and runs every test this machine can run. GPU tests (ctest label `gpu`) run only
# when a GPU is visible; otherwise they are reported as skipped. Extra args go to ctest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
build="$root/${RTGEN_BUILD_DIR:-build}"
# shellcheck source=scripts/lib/deps.sh
source "$root/scripts/lib/deps.sh"
# The Python packages go to the interpreter the tests were configured with (CMakeCache); a build
# configured before with an externally managed one is given the virtual environment instead.
python=$(sed -n 's/^_\{0,1\}Python3_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt" | head -1)
if [ -z "$python" ] || rtgen_externally_managed "$python"; then
  python=$(rtgen_test_python "$build")
  cmake -S "$root" -B "$build" -DPython3_EXECUTABLE="$python" >/dev/null
fi
rtgen_pip_install_missing "$python"
cd "$build"
status=0
junit="$build/Testing/last-junit.xml"
rm -f "$junit"
# A filter that selects no test is an error, not a pass.
ctest --output-on-failure --no-tests=error -j"$(nproc)" --timeout 600 --output-junit "$junit" \
  "$@" || status=$?
# ctest prints no output of a skipped test: say why each did not run (the GPU tests: no CUDA
# device, gpu_test_main.cc, or not built, tests/CMakeLists.txt; a missing tool; NVML; ...).
if [ -f "$junit" ]; then
  "$python" "$root/scripts/lib/skip_reasons.py" "$junit" || true
fi
exit "$status"
