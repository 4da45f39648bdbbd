#!/usr/bin/env bash
# The device micro-benchmarks refuse bad flag values by name, exit 2, before any CUDA call (so on
# this machine, without a GPU): std::atoi read "abc" as 0 and "200x" as 200, an unknown --only
# timed nothing and exited 0, --models tiny was timed and an unknown name did not name --models.
#   device_tool_flags_test.sh GEMV_BENCH BOUNDARY_BENCH SM_STREAM_BENCH
set -uo pipefail
usage="usage: device_tool_flags_test.sh GEMV_BENCH BOUNDARY_BENCH SM_STREAM_BENCH"
gemv="${1:?${usage}}"
boundary="${2:?${usage}}"
stream="${3:?${usage}}"
failures=0
# expect WANT_TEXT COMMAND...: COMMAND exits 2 and its stderr contains WANT_TEXT.
expect() {
  local want_text="$1"
  shift
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [[ "${rc}" != 2 || "${err}" != *"${want_text}"* ]]; then
    echo "FAIL: $* -> exit ${rc}, stderr: ${err} (want exit 2 and '${want_text}')"
    failures=$((failures + 1))
  fi
}

for bad in abc -5 0 12x; do
  expect "--repeats must be an integer in [1, 1000] (got '${bad}')" "${gemv}" --repeats "${bad}"
  expect "--repeats must be an integer in [1, 1000] (got '${bad}')" "${boundary}" --repeats "${bad}"
  expect "--repeats must be an integer in [1, 1000] (got '${bad}')" "${stream}" --repeats "${bad}"
done
expect "--device must be an integer in [0, 1023] (got 'abc')" "${gemv}" --device abc
expect "--kernels must be an integer in [2, 100000] (got '200x')" "${boundary}" --kernels 200x
expect "--work-ns must be an integer in [0, 1000000] (got '-1')" "${boundary}" --work-ns -1
expect "--only must be stream-l2, stream-dram, matrix or latency (got 'stream_dram')" \
  "${stream}" --only stream_dram
expect "--models: 'tiny' is a test shape" "${gemv}" --models tiny
expect "--models: unknown model 'llama3-70b'" "${gemv}" --models smollm2-135m,llama3-70b

if (( failures > 0 )); then
  echo "device_tool_flags_test: ${failures} failure(s)"
  exit 1
fi
echo "device_tool_flags_test: every bad flag refused by name"
