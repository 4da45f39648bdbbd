#!/usr/bin/env bash
# scripts/device/join_model.sh: parts whose join matches the checksum give the joined file's
# path; a missing directory, no parts, no checksum file, a file that holds no SHA-256 sum or a
# mismatch exit 2 (a missing directory passed: both sums read empty, and empty equals empty).
# shellcheck source=tests/device_scripts/test_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/test_setup.sh"
tool="${root}/scripts/device/join_model.sh"
expect_refused() {  # DIR WHAT MESSAGE: exit 2 and stderr naming the cause
  local out status
  out=$("${tool}" "$1" 2>&1)
  status=$?
  [[ ${status} == 2 && "${out}" == *"$3"* ]] ||
    fail "$2: exit ${status}, '${out}' (want 2 and '$3')"
}

expect_refused "${work}/absent" "a missing directory" "no ${work}/absent/sha256"
mkdir -p "${work}/p"
printf 'first half ' > "${work}/p/smollm2.part1"
printf 'second half' > "${work}/p/smollm2.part2"
expect_refused "${work}/p" "no sha256 file" "no ${work}/p/sha256"
echo "not a sum" > "${work}/p/sha256"
expect_refused "${work}/p" "a sha256 file without a sum" "holds no SHA-256 sum"
sum=$(printf 'first half second half' | sha256sum | awk '{print $1}')
echo "${sum}  x" > "${work}/p/sha256"
out=$("${tool}" "${work}/p")
status=$?
[[ ${status} == 0 && "${out}" == "${work}/p/SmolLM2-135M-Instruct.Q4_1.gguf" ]] ||
  fail "matching parts: exit ${status}, '${out}'"
[[ "$(cat "${work}/p/SmolLM2-135M-Instruct.Q4_1.gguf")" == "first half second half" ]] ||
  fail "the parts were not joined in order"
printf 'changed' > "${work}/p/smollm2.part2"
expect_refused "${work}/p" "a checksum mismatch" "checksum mismatch"
mkdir -p "${work}/empty"
echo "${sum}  x" > "${work}/empty/sha256"
expect_refused "${work}/empty" "no parts" "no ${work}/empty/smollm2.part*"
(( failures == 0 )) && echo "join_model_test: passed"
exit $(( failures > 0 ))
