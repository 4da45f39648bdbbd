#!/usr/bin/env bash
# Serves the embedded default model (SmolLM2-135M-Instruct) on :50051, metrics on :9090.
# The CUDA backend is used when a GPU is visible, else the CPU backend. Extra args go to
# rtgen-server (see `build/bin/rtgen-server --help`).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
cd "$root"
exec "$root/${RTGEN_BUILD_DIR:-build}/bin/rtgen-server" \
  --model "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" --backend auto "$@"
