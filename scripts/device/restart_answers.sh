#!/usr/bin/env bash
# Whether a restart changes the server's greedy answer (issue 4, session 8): starts
# rtgen-server --backend cuda N times on the SmolLM2 file, asks the same chat question greedily
# each time, and prints every answer and how many distinct answers there were. Exit status 0
# only when every run answered and all answers were the same.
# Usage: scripts/device/restart_answers.sh BUNDLE PARTS_DIR [N]   (default N = 3)
set -uo pipefail
bundle="${1:?usage: restart_answers.sh BUNDLE PARTS_DIR [N]}"
parts="${2:?usage: restart_answers.sh BUNDLE PARTS_DIR [N]}"
runs="${3:-3}"
out="${OUT:-$(mktemp -d)}"
mkdir -p "${out}"
# shellcheck disable=SC1091
source "${bundle}/env.sh"
model=$("$(dirname "$0")/join_model.sh" "${parts}") || exit 2
port=50661
server=""
trap '[[ -n "${server}" ]] && kill -TERM ${server} 2>/dev/null; wait 2>/dev/null' EXIT
for run in $(seq 1 "${runs}"); do
  "${bundle}/bin/rtgen-server" --model "${model}" --backend cuda --host 127.0.0.1 \
    --port "${port}" --metrics-port -1 --max-num-seqs 64 --max-model-len 2048 \
    >"${out}/restart_${run}.log" 2>&1 &
  server=$!
  up=0
  for _ in $(seq 1 120); do
    kill -0 "${server}" 2>/dev/null || break
    "${bundle}/bin/rtgen-client" health --target "127.0.0.1:${port}" >/dev/null 2>&1 && { up=1; break; }
    sleep 0.5
  done
  if [[ ${up} -ne 1 ]]; then
    echo "run ${run}: the server did not start"; cat "${out}/restart_${run}.log"; exit 1
  fi
  if ! "${bundle}/bin/rtgen-client" generate --target "127.0.0.1:${port}" --chat \
    --prompt "What is the capital of France?" --temperature 0 --max-tokens 32 \
    >"${out}/answer_${run}.txt" 2>"${out}/client_${run}.log" ||
    ! grep -qv '^\[finish=' "${out}/answer_${run}.txt"; then
    echo "run ${run}: no answer"; cat "${out}/client_${run}.log"; exit 1
  fi
  echo "run ${run}: $(tr '\n' ' ' <"${out}/answer_${run}.txt")"
  kill -TERM "${server}"; wait "${server}" 2>/dev/null
  server=""
done
# The answer's text only: rtgen-client's closing "[finish=... ttft=...]" line holds timings.
for run in $(seq 1 "${runs}"); do
  grep -v '^\[finish=' "${out}/answer_${run}.txt" | md5sum
done | sort -u > "${out}/distinct.txt"
distinct=$(wc -l <"${out}/distinct.txt")
echo "distinct answers: ${distinct} of ${runs} runs"
[[ ${distinct} -eq 1 ]]
