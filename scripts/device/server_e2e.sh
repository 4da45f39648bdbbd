#!/usr/bin/env bash
# The full server on the GPU (issue 4): joins the SmolLM2 file carried in parts, starts
# rtgen-server --backend cuda, streams a chat answer with rtgen-client, then measures end-to-end
# TPOT at one stream with rtgen-bench (prompt 128, 128 new tokens, greedy) for comparison with
# the engine benchmark's batch-1 TPOT.
# Usage: scripts/device/server_e2e.sh BUNDLE PARTS_DIR   (PARTS_DIR holds smollm2.part* + sha256)
set -uo pipefail
bundle="${1:?usage: server_e2e.sh BUNDLE PARTS_DIR}"
parts="${2:?usage: server_e2e.sh BUNDLE PARTS_DIR}"
out="${OUT:-$(mktemp -d)}"
mkdir -p "${out}"
# shellcheck disable=SC1091
source "${bundle}/env.sh"
model=$("$(dirname "$0")/join_model.sh" "${parts}") || exit 2
port=50651
metrics=9651
start_server() {  # extra flags in "$@"
  "${bundle}/bin/rtgen-server" --model "${model}" --backend cuda --host 127.0.0.1 --port "${port}" \
    --max-num-seqs 64 --max-model-len 2048 "$@" >"${out}/server.log" 2>&1 &
  server=$!
  for _ in $(seq 1 120); do
    kill -0 "${server}" 2>/dev/null || return 1
    "${bundle}/bin/rtgen-client" health --target "127.0.0.1:${port}" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}
trap 'kill -TERM ${server} 2>/dev/null; wait ${server} 2>/dev/null' EXIT
if ! start_server --metrics-port "${metrics}"; then
  echo "== server did not start with metrics on :${metrics}:"; cat "${out}/server.log"
  echo "== retrying with the metrics exposer off"
  metrics=""
  start_server --metrics-port -1 || { cat "${out}/server.log"; exit 1; }
fi
echo "== server start-up"
cat "${out}/server.log"
echo "== rtgen-client generate --chat (greedy)"
"${bundle}/bin/rtgen-client" generate --target "127.0.0.1:${port}" --chat \
  --prompt "What is the capital of France?" --temperature 0 --max-tokens 64
echo
echo "== rtgen-bench, one stream, prompt 128, 128 new tokens"
"${bundle}/bin/rtgen-bench" --target "127.0.0.1:${port}" --concurrency 1 --num-requests 20 \
  --warmup 3 --input-len 128 --output-len 128 --no-progress --output "${out}/e2e_bench.json"
[[ -n "${metrics}" ]] || exit 0
echo "== metrics (graph replays vs eager)"
curl -s "127.0.0.1:${metrics}/metrics" 2>/dev/null | grep -E '^rtgen_(graph_replays|eager_steps)_total' ||
  python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:${metrics}/metrics').read().decode())" |
  grep -E '^rtgen_(graph_replays|eager_steps)_total'
