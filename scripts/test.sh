#!/usr/bin/env bash
# Builds rtgen and runs every test this machine can run. GPU tests (ctest label `gpu`) run only
# when a GPU is visible; otherwise they are reported as skipped. Extra args go to ctest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
build="$root/${RTGEN_BUILD_DIR:-build}"
# shellcheck source=scripts/lib/deps.sh
source "$root/scripts/lib/deps.sh"
# The Python packages go to the interpreter the tests were configured with (CMakeCache).
python=$(sed -n 's/^_\{0,1\}Python3_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt" | head -1)
rtgen_pip_install_missing "${python:-python3}"
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 600 "$@"
