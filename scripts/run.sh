#!/usr/bin/env bash
# Serves the embedded default model (SmolLM2-135M-Instruct) on :50051, metrics on :9090.
# The CUDA backend is used when a GPU is visible that the build has device code for, else the
# CPU backend. Extra args go to rtgen-server (see `build/bin/rtgen-server --help`).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
cd "$root"
server="$root/${RTGEN_BUILD_DIR:-build}/bin/rtgen-server"
# A GPU with a build that has no CUDA backend (no nvcc when it was configured) serves on the
# CPU: said, not left to be found out from the throughput.
# (ldd's output is taken whole first: piped into grep -q under pipefail, ldd could die of
# SIGPIPE when grep found the library and quit, and the warning came on a CUDA build.)
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 &&
  ! grep -q libcudart <<<"$(ldd "$server" 2>/dev/null || true)"; then
  echo "[rtgen run] a GPU is visible but this build has no CUDA backend (no nvcc at" \
    "/usr/local/cuda when it was configured): serving on the CPU. Install the CUDA toolkit," \
    "remove ${RTGEN_BUILD_DIR:-build}/ and run again to serve on the GPU." >&2
fi
exec "$server" --model "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" --backend auto "$@"
