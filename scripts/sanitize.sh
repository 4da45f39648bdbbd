#!/usr/bin/env bash
# Builds the CPU test binaries under a sanitizer and runs them with ctest.
#   scripts/sanitize.sh asan [ctest args]   AddressSanitizer + UBSan, every CPU test (build-asan)
#   scripts/sanitize.sh tsan [ctest args]   ThreadSanitizer, the engine and server tests (build-tsan)
# Environment: RTGEN_SANITIZE_JOBS (build jobs, default 2); RTGEN_ASAN_AREAS and
# RTGEN_TSAN_AREAS (space-separated test areas, e.g. "engine") build and run fewer test
# binaries when CI time is short.
# Only our code is instrumented; the Debian third-party libraries are not. Under TSan,
# tests/sanitizers/tsan_absl_mutex.cc makes absl::Mutex visible and tests/sanitizers/tsan.supp
# silences reports inside gRPC/abseil/protobuf only.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=${1:-}
shift || true
jobs=${RTGEN_SANITIZE_JOBS:-2}

case "$mode" in
  asan)
    build="$root/build-asan"
    sanitize="address,undefined"
    cpu_areas="model tokenizer sampling cpu engine golden server reliability bench client"
    areas=${RTGEN_ASAN_AREAS:-$cpu_areas kernels_host tools}
    # The Python client and rtgen-bench end-to-end tests start these binaries (built under ASan
    # too). The reliability test's RSS-stability check is left to the normal build: ASan's
    # quarantine of freed memory grows RSS by design, and LeakSanitizer checks leaks here.
    extra_targets=(rtgen-server rtgen-client rtgen-bench)
    exclude="RandomCancelsLeakNoRequestsBlocksOrMemory"
    # detect_leaks: leaks fail the run; strict_string_checks catches bad C-string reads.
    export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:abort_on_error=0:${ASAN_OPTIONS:-}"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
    # Leaks inside uninstrumented third-party libraries (gRPC's static state) are not ours.
    # The path quoted: the sanitizers' option parser splits values at spaces and colons.
    export LSAN_OPTIONS="suppressions='$root/tests/sanitizers/lsan.supp':${LSAN_OPTIONS:-}"
    ;;
  tsan)
    build="$root/build-tsan"
    sanitize="thread"
    areas=${RTGEN_TSAN_AREAS:-engine server}
    extra_targets=()
    # The Python client test starts a separate rtgen-server; server_tests cover it in-process.
    exclude="python_example_client"
    tsan_supp="suppressions='$root/tests/sanitizers/tsan.supp'"  # quoted: see LSAN_OPTIONS
    export TSAN_OPTIONS="$tsan_supp:halt_on_error=1:second_deadlock_stack=1:${TSAN_OPTIONS:-}"
    ;;
  *)
    echo "usage: $0 asan|tsan [ctest args]" >&2
    exit 2
    ;;
esac

RTGEN_SKIP_BUILD=1 "$root/scripts/setup.sh"  # packages and the model, when missing
# shellcheck source=scripts/lib/deps.sh
source "$root/scripts/lib/deps.sh"
# The tests' Python (a venv where python3 is externally managed), as test.sh configures build/;
# its packages only where a Python test runs (the client tests import grpc), so a run of other
# areas needs no network.
mkdir -p "$build"
python=$(rtgen_test_python "$build")
case " $areas " in
  *" server "*|*" bench "*|*" client "*) rtgen_pip_install_missing "$python" ;;
esac

# Each test area (tests/<area>/) is one binary <area>_tests whose tests carry the label <area>.
targets=()
for area in $areas; do targets+=("${area}_tests"); done
case " $areas " in *" server "*|*" bench "*) targets+=("${extra_targets[@]}") ;; esac
labels="^($(echo "$areas" | tr ' ' '|'))$"

start=$(date +%s)
cmake -S "$root" -B "$build" -G Ninja -DRTGEN_CUDA=OFF -DRTGEN_SANITIZE="$sanitize" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE="$python" >/dev/null
cmake --build "$build" --target "${targets[@]}" -j"$jobs"
built=$(date +%s)

cd "$build"
set +e
echo "sanitize.sh: not run under $mode: $exclude"
ctest --output-on-failure --timeout 900 -j"$jobs" -L "$labels" -E "$exclude" "$@"
rc=$?
set -e
end=$(date +%s)
echo "sanitize.sh $mode ($sanitize): labels $labels; build $((built - start)) s, tests $((end - built)) s, exit $rc"
exit $rc
