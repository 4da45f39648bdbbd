#!/usr/bin/env bash
# Builds rtgen and runs every test this machine can run. GPU tests (ctest label `gpu`) run only
# when a GPU is visible; otherwise they are reported as skipped. Extra args go to ctest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
build="$root/${RTGEN_BUILD_DIR:-build}"
python3 -c 'import grpc, grpc_tools' 2>/dev/null || python3 -m pip install --quiet grpcio grpcio-tools
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 600 "$@"
