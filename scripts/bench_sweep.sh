#!/usr/bin/env bash
# Starts rtgen-server, runs an rtgen-bench concurrency sweep against it, and writes the sweep's
# JSON, CSV, table and latency/throughput plot. Stops the server afterwards.
#
#   scripts/bench_sweep.sh [--backend cpu|cuda] [--build DIR] [--server BIN] [--out PREFIX]
#                          [--levels 1,2,4,...]
#                          [--input-len N] [--output-len N] [--requests-per-level K]
#                          [--max-num-seqs N] [--threads N]
#
# Defaults: CPU backend, build/, docs/bench/<backend>_sweep.{json,csv,txt,png}, levels
# 1,2,4,8,16,32,64, input 64 tokens, output 32 tokens, 4 x concurrency requests per level.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
backend=cpu
build="$root/build"
server=""
out=""
levels=1,2,4,8,16,32,64
input_len=64
output_len=32
per_level=4
max_num_seqs=64
threads=0
while [ $# -gt 0 ]; do
  case "$1" in
    --backend) backend="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --server) server="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --levels) levels="$2"; shift 2 ;;
    --input-len) input_len="$2"; shift 2 ;;
    --output-len) output_len="$2"; shift 2 ;;
    --requests-per-level) per_level="$2"; shift 2 ;;
    --max-num-seqs) max_num_seqs="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    *) echo "bench_sweep.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out="$root/docs/bench/${backend}_sweep"
[ -n "$server" ] || server="$build/bin/rtgen-server"
bench="$build/bin/rtgen-bench"
for bin in "$server" "$bench"; do
  [ -x "$bin" ] || { echo "bench_sweep.sh: $bin is missing (build it first)" >&2; exit 1; }
done
command -v gnuplot >/dev/null || echo "bench_sweep.sh: gnuplot not found; no plot" >&2
mkdir -p "$(dirname "$out")"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$server" --model="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" --backend="$backend" \
  --host=127.0.0.1 --port="$port" --metrics-port=-1 --max-num-seqs="$max_num_seqs" \
  --max-model-len=512 --threads="$threads" --log-level=warn &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true' EXIT

plot=()
command -v gnuplot >/dev/null && plot=(--plot "$out.png")
"$bench" --target "127.0.0.1:$port" --wait-ready 120 --sweep-concurrency "$levels" \
  --requests-per-level "$per_level" --warmup 2 --input-len "$input_len" \
  --output-len "$output_len" --output "$out.json" --csv "$out.csv" "${plot[@]}" \
  | tee "$out.txt"
echo "bench_sweep.sh: wrote $out.{json,csv,txt${plot:+,png}}" >&2
