#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang into build-fuzz and runs each for
# SECONDS (default 60), starting from the seed corpus in tests/fuzz/corpus/<name>/.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
# New interesting inputs go to build-fuzz/corpus/<target>/ (never into the repo); crashes,
# leaks, timeouts and out-of-memory inputs go to build-fuzz/artifacts/. Prints executions and
# findings per target and exits 1 when any target found something.
# Environment: RTGEN_FUZZ_JOBS (build jobs, default 2).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-60}
shift || true
build="$root/build-fuzz"
all_targets=(gguf_fuzzer safetensors_fuzzer tokenizer_fuzzer request_validation_fuzzer)
[ $# -gt 0 ] && targets=("$@") || targets=("${all_targets[@]}")

RTGEN_SKIP_BUILD=1 "$root/scripts/setup.sh"  # packages and the model, when missing
# shellcheck source=scripts/lib/deps.sh
source "$root/scripts/lib/deps.sh"
# libFuzzer and the sanitizers' runtimes (Debian 12's names; elsewhere clang++ is checked next)
rtgen_apt_install_missing clang libclang-rt-14-dev || rtgen_log "could not install clang"
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install clang)" >&2; exit 1; }

start=$(date +%s)
cmake -S "$root" -B "$build" -G Ninja -DRTGEN_CUDA=OFF -DRTGEN_FUZZ=ON \
  -DRTGEN_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$build" --target "${targets[@]}" -j"${RTGEN_FUZZ_JOBS:-2}"
echo "fuzz.sh: build $(( $(date +%s) - start )) s"

export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
mkdir -p "$build/artifacts"
summary=()
failed=0
for target in "${targets[@]}"; do
  seeds="$root/tests/fuzz/corpus/${target%_fuzzer}"
  [ "$target" = request_validation_fuzzer ] && seeds="$root/tests/fuzz/corpus/request"
  work="$build/corpus/$target"
  log="$build/artifacts/$target.log"
  mkdir -p "$work"
  before=$(find "$build/artifacts" -maxdepth 1 -name "$target-*" | wc -l)
  set +e
  "$build/bin/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/$target-" \
    "$work" "$seeds" >"$log" 2>&1
  rc=$?
  set -e
  after=$(find "$build/artifacts" -maxdepth 1 -name "$target-*" | wc -l)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
  # No "cov:" line when the fuzzer failed before its first report: not a reason to stop here.
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1 | cut -d' ' -f2 || true)
  corpus=$(find "$work" -type f | wc -l)
  findings=$((after - before))
  if [ $rc -ne 0 ]; then
    failed=1
    echo "=== $target: exit $rc; log $log" >&2
    tail -n 60 "$log" >&2
  fi
  summary+=("$(printf '%-27s %10s execs %7s/s  cov %6s  corpus %5s  findings %s  exit %s' \
    "$target" "${runs:-?}" "${rate:-?}" "${cov:-?}" "$corpus" "$findings" "$rc")")
done
echo "fuzz.sh: ${seconds} s per target"
printf '%s\n' "${summary[@]}"
exit $failed
