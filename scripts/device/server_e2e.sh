#!/usr/bin/env bash
# The full server on the GPU (issue 4): joins the SmolLM2 file carried in parts, starts
# rtgen-server --backend cuda, streams a chat answer with rtgen-client, then measures end-to-end
# TPOT at one stream with rtgen-bench (prompt 128, 128 new tokens, greedy) for comparison with
# the engine benchmark's batch-1 TPOT. A greedy request with penalties, answered on the device,
# must give the same text with top-n logprobs asked for (also sampled on the device), and the
# text the same request gives on the CPU sampler (a server restarted with --max-penalty-tokens
# 0), each alone with the same prefix cached; it also runs beside a greedy stream. Then the A/B
# of pipelined steps: the server restarted
# with --async-scheduling=false and =true in turn, rtgen-bench at 1 and 16 streams each time
# (e2e_{sync,async}_{1,2}_c{1,16}.json; AB_ROUNDS rounds, default 2, 0 skips the A/B).
# Usage: scripts/device/server_e2e.sh BUNDLE PARTS_DIR   (PARTS_DIR holds smollm2.part* + sha256)
set -uo pipefail
bundle="${1:?usage: server_e2e.sh BUNDLE PARTS_DIR}"
parts="${2:?usage: server_e2e.sh BUNDLE PARTS_DIR}"
out="${OUT:-$(mktemp -d)}"
[[ "${AB_ROUNDS:-2}" =~ ^[0-9]+$ ]] || { echo "server_e2e: AB_ROUNDS must be a count" >&2; exit 2; }
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
# SmolLM2-135M-Instruct's greedy answer names Paris (the CPU backend's too: RealModelTest).
"${bundle}/bin/rtgen-client" generate --target "127.0.0.1:${port}" --chat \
  --prompt "What is the capital of France?" --temperature 0 --max-tokens 64 \
  >"${out}/chat.txt" 2>&1
chat_rc=$?
cat "${out}/chat.txt"
echo
if [[ ${chat_rc} -ne 0 ]] || ! grep -q "Paris" "${out}/chat.txt"; then
  echo "FAILED: the greedy chat answer (exit ${chat_rc}) does not name Paris"
  cat "${out}/server.log"
  exit 1
fi
echo "== rtgen-bench, one stream, prompt 128, 128 new tokens"
"${bundle}/bin/rtgen-bench" --target "127.0.0.1:${port}" --concurrency 1 --num-requests 20 \
  --warmup 3 --input-len 128 --output-len 128 --no-progress --output "${out}/e2e_bench.json" ||
  { echo "FAILED: rtgen-bench, one stream"; cat "${out}/server.log"; exit 1; }
if [[ -n "${metrics}" ]]; then
  echo "== metrics (graph replays vs eager)"
  curl -s "127.0.0.1:${metrics}/metrics" 2>/dev/null | grep -E '^rtgen_(graph_replays|eager_steps)_total' ||
    python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:${metrics}/metrics').read().decode())" |
    grep -E '^rtgen_(graph_replays|eager_steps)_total'
fi

echo "== a sampled request with a penalty and top-n logprobs beside a pipelined greedy stream"
"${bundle}/bin/rtgen-client" generate --target "127.0.0.1:${port}" --chat \
  --prompt "Tell me a short story about a dragon." --temperature 0 --max-tokens 96 \
  >"${out}/beside_greedy.txt" 2>&1 &
beside=$!
"${bundle}/bin/rtgen-client" generate --target "127.0.0.1:${port}" --chat \
  --prompt "List five fruits." --temperature 0.7 --seed 3 --repetition-penalty 1.3 \
  --logprobs 2 --max-tokens 48 >"${out}/penalty.txt" 2>&1
penalty_rc=$?
wait "${beside}"
beside_rc=$?
echo "penalty + logprobs request: exit ${penalty_rc}, $(wc -c <"${out}/penalty.txt") bytes;" \
  "greedy beside it: exit ${beside_rc}, $(wc -c <"${out}/beside_greedy.txt") bytes"
head -c 300 "${out}/penalty.txt"; echo
[[ ${penalty_rc} -eq 0 && ${beside_rc} -eq 0 ]] || { echo "FAILED"; cat "${out}/server.log"; exit 1; }

echo "== penalties on the device vs the same request on the host's CPU sampler"
# Equal logits need equal conditions (batch composition and cached prefix change their bits): each
# request alone on a freshly started server, after an unpenalized one that leaves the prompt's
# whole blocks cached. (Without the restart the chat prefix's cached blocks come from the first
# chat request above, a prefill of another length: the GEMV's warps per tile, so its sums' order,
# depend on the step's row count from 17 rows (gemv.cu GemvDefaultTuning), other bits, and the
# answers parted in session 42; with RTGEN_GEMV_SLICED_ROWS=16 they did not.)
kill -TERM "${server}" 2>/dev/null; wait "${server}" 2>/dev/null
start_server --metrics-port -1 ||
  { echo "server did not restart"; cat "${out}/server.log"; exit 1; }
ask=(generate --target "127.0.0.1:${port}" --chat --prompt "Name three animals and three colours."
  --temperature 0 --max-tokens 64)
pen=(--repetition-penalty 1.3 --presence-penalty 0.5 --frequency-penalty 0.3)
"${bundle}/bin/rtgen-client" "${ask[@]}" >"${out}/penalty_none.txt" 2>/dev/null
"${bundle}/bin/rtgen-client" "${ask[@]}" "${pen[@]}" >"${out}/penalty_device.txt" \
  2>"${out}/penalty_device.err"
device_rc=$?
# Top-n logprobs (the text does not show them) leave the greedy answer as it is.
"${bundle}/bin/rtgen-client" "${ask[@]}" "${pen[@]}" --logprobs 5 >"${out}/penalty_top.txt" \
  2>"${out}/penalty_top.err"
top_rc=$?
echo "device: exit ${device_rc} $(cat "${out}/penalty_device.err")"
echo "device, top 5 logprobs: exit ${top_rc} $(cat "${out}/penalty_top.err")"
head -c 300 "${out}/penalty_device.txt"; echo
if [[ ${device_rc} -ne 0 || ${top_rc} -ne 0 ]] ||
  ! cmp -s "${out}/penalty_device.txt" "${out}/penalty_top.txt"; then
  echo "FAILED: asking for top-n logprobs changed the device's answer"
  diff "${out}/penalty_device.txt" "${out}/penalty_top.txt" | head -20
  exit 1
fi
echo "== the penalized request again, chained beside a greedy stream (batched: its text may differ)"
"${bundle}/bin/rtgen-client" generate --target "127.0.0.1:${port}" --chat \
  --prompt "Tell me a short story about a knight." --temperature 0 --max-tokens 96 \
  >"${out}/beside_device.txt" 2>&1 &
beside=$!
"${bundle}/bin/rtgen-client" "${ask[@]}" "${pen[@]}" >"${out}/penalty_batched.txt" \
  2>"${out}/penalty_batched.err"
batched_rc=$?
wait "${beside}"
beside_rc=$?
echo "penalized: exit ${batched_rc} $(cat "${out}/penalty_batched.err"); greedy beside it:" \
  "exit ${beside_rc}"
[[ ${batched_rc} -eq 0 && ${beside_rc} -eq 0 ]] || { echo "FAILED"; cat "${out}/server.log"; exit 1; }

echo "== the same penalized request on the CPU sampler (server restarted, --max-penalty-tokens 0)"
kill -TERM "${server}" 2>/dev/null; wait "${server}" 2>/dev/null
start_server --metrics-port -1 --max-penalty-tokens 0 ||
  { echo "server did not start (--max-penalty-tokens 0)"; cat "${out}/server.log"; exit 1; }
"${bundle}/bin/rtgen-client" "${ask[@]}" >/dev/null 2>&1  # the same prefix cached
"${bundle}/bin/rtgen-client" "${ask[@]}" "${pen[@]}" >"${out}/penalty_host.txt" \
  2>"${out}/penalty_host.err"
host_rc=$?
echo "host:   exit ${host_rc} $(cat "${out}/penalty_host.err")"
if [[ ${host_rc} -ne 0 ]] || ! cmp -s "${out}/penalty_device.txt" "${out}/penalty_host.txt"; then
  echo "FAILED: the device-penalized answer differs from the host's"
  diff "${out}/penalty_device.txt" "${out}/penalty_host.txt" | head -20
  exit 1
fi
cmp -s "${out}/penalty_device.txt" "${out}/penalty_none.txt" &&
  echo "device == host; the penalties did not change this answer" ||
  echo "device == host; the penalties changed the answer (it differs from the unpenalized one)"

echo "== A/B: async scheduling off / on (server restarted for each), 1 and 16 streams"
ab_failed=0  # rtgen-bench runs that failed: the script exits 1 at the end if any did
for round in $(seq 1 "${AB_ROUNDS:-2}"); do
  for mode in false true; do
    kill -TERM "${server}" 2>/dev/null; wait "${server}" 2>/dev/null
    name=$([[ ${mode} == true ]] && echo async || echo sync)
    start_server --metrics-port -1 --async-scheduling="${mode}" ||
      { echo "server did not start (async-scheduling=${mode})"; cat "${out}/server.log"; exit 1; }
    for c in 1 16; do
      "${bundle}/bin/rtgen-bench" --target "127.0.0.1:${port}" --concurrency "${c}" \
        --num-requests $((c == 1 ? 20 : 64)) --warmup 3 --input-len 128 --output-len 128 \
        --no-progress --output "${out}/e2e_${name}_${round}_c${c}.json" \
        > "${out}/e2e_${name}_${round}_c${c}.log" 2>&1 ||
        { echo "rtgen-bench failed (${name}, concurrency ${c}):"
          tail -5 "${out}/e2e_${name}_${round}_c${c}.log"
          ab_failed=$((ab_failed + 1)); continue; }
      python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); t=d["tpot_ms"]
print(f"{sys.argv[2]:5s} c={sys.argv[3]:>2s} TPOT p50 {t['"'"'p50'"'"']:.3f} mean {t['"'"'mean'"'"']:.3f} ms, {d['"'"'output_tokens_per_s'"'"']:.0f} tokens/s")' \
        "${out}/e2e_${name}_${round}_c${c}.json" "${name}" "${c}" || true
    done
  done
done
if (( ab_failed > 0 )); then
  echo "server_e2e: ${ab_failed} rtgen-bench run(s) of the A/B failed"
  exit 1
fi
