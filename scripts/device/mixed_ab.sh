#!/usr/bin/env bash
# Mixed steps on the full server (issue 4, session 42): requests arriving at a fixed rate make
# the scheduler prefill new prompts beside running decodes. Starts rtgen-server --backend cuda on
# the SmolLM2 file with the defaults ("split": decode rows to decode attention, mixed steps
# replaying multi-sequence graphs), with RTGEN_MIXED_GRAPHS=0 ("eager_mixed": mixed steps eager)
# and with RTGEN_MIXED_DECODE=0 RTGEN_MIXED_GRAPHS=0 ("off": prefill attention alone, mixed
# steps eager, as before session 42), ROUNDS times in turn (default 2), and runs
# rtgen-bench --request-rate RATE against each (default 300 requests/s, at most 64 at once,
# prompt 128 +- 50 %, 64 new tokens +- 50 %); prints each run's latency table and its step
# counters. Exits non-zero when any rtgen-bench run fails (the others still run).
# Usage: scripts/device/mixed_ab.sh BUNDLE PARTS_DIR   (PARTS_DIR holds smollm2.part* + sha256)
set -uo pipefail
bundle="${1:?usage: mixed_ab.sh BUNDLE PARTS_DIR}"
parts="${2:?usage: mixed_ab.sh BUNDLE PARTS_DIR}"
out="${OUT:-$(mktemp -d)}"
rate="${RATE:-300}"
rounds="${ROUNDS:-2}"
[[ "${rounds}" =~ ^[0-9]+$ ]] || { echo "mixed_ab: ROUNDS must be a count" >&2; exit 2; }
mkdir -p "${out}"
# shellcheck disable=SC1091
source "${bundle}/env.sh"
model=$("$(dirname "$0")/join_model.sh" "${parts}") || exit 2
port=50661
metrics=9661
server=""
rc=0
trap '[[ -n "${server}" ]] && kill -TERM ${server} 2>/dev/null; wait 2>/dev/null' EXIT
run() {  # run LABEL ROUND [ENV=VALUE...]
  local label=$1 round=$2
  shift 2
  env "$@" "${bundle}/bin/rtgen-server" --model "${model}" --backend cuda --host 127.0.0.1 \
    --port "${port}" --metrics-port "${metrics}" --max-num-seqs 64 --max-model-len 2048 \
    >"${out}/server_${label}_${round}.log" 2>&1 &
  server=$!
  local up=0
  for _ in $(seq 1 120); do
    kill -0 "${server}" 2>/dev/null || break
    if "${bundle}/bin/rtgen-client" health --target "127.0.0.1:${port}" >/dev/null 2>&1; then
      up=1
      break
    fi
    sleep 0.5
  done
  if [[ ${up} -ne 1 ]]; then
    echo "== ${label}: the server did not start"; cat "${out}/server_${label}_${round}.log"; exit 1
  fi
  echo "-- ${label}, round ${round} ($*)"
  grep -h 'CUDA graphs' "${out}/server_${label}_${round}.log"
  rm -f "${out}/mixed_${label}_${round}.json"  # a reused OUT: no earlier run's figures
  "${bundle}/bin/rtgen-bench" --target "127.0.0.1:${port}" --request-rate "${rate}" \
    --concurrency 64 --num-requests 600 --warmup 10 --input-len 128 --input-len-range 0.5 \
    --output-len 64 --output-len-range 0.5 --seed 7 --no-progress \
    --output "${out}/mixed_${label}_${round}.json"
  local bench_rc=$?
  if (( bench_rc != 0 )); then
    echo "mixed_ab: rtgen-bench failed (exit ${bench_rc}) for ${label}, round ${round}" >&2
    rc=1
  fi
  local url="http://127.0.0.1:${metrics}/metrics"
  python3 -c "import urllib.request;print(urllib.request.urlopen('${url}').read().decode())" |
    grep -E '^rtgen_(graph_replays|eager_steps)_total' | grep -v ' 0$' | sort
  kill -TERM "${server}"; wait "${server}" 2>/dev/null; server=""
}
for round in $(seq 1 "${rounds}"); do
  run split "${round}"
  run eager_mixed "${round}" RTGEN_MIXED_GRAPHS=0
  run off "${round}" RTGEN_MIXED_DECODE=0 RTGEN_MIXED_GRAPHS=0
done
exit "${rc}"
