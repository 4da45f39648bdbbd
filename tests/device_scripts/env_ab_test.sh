#!/usr/bin/env bash
# scripts/device/env_ab.sh on this machine, against a stand-in rtgen-engine-bench that writes canned
# JSON: its table keeps each round in its column when a run fails ("-" in that place), a variant
# may be labelled like a column ("floor"), a failed run makes the script exit non-zero, and an
# earlier run's JSON in a reused OUT does not stand in for a run that failed; BENCH_ARGS reach
# every run, after the script's own arguments; each run's TTFT has its own table.
# shellcheck source=tests/device_scripts/test_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/test_setup.sh"
# The stand-in: writes one decode row (TPOT FAKE_TPOT; with FAKE_MHZ, GPU telemetry; with
# FAKE_TTFT, a TTFT at prompt 128) to --json; with FAKE_FAIL_ONCE=FILE the first call (FILE
# absent) fails without writing, as a crashed run does; with FAKE_LIST set to anything but "a,b"
# it fails too. It first echoes its arguments (into the run's log).
cat > "${work}/bundle/bin/rtgen-engine-bench" <<'BENCH'
#!/usr/bin/env bash
echo "args: $*"
json=""
while (( $# > 0 )); do
  [[ "$1" == --json ]] && { json="$2"; shift; }
  shift
done
[[ -n "${FAKE_LIST:-}" && "${FAKE_LIST}" != a,b ]] && exit 4  # a value with a comma, cut
if [[ -n "${FAKE_FAIL_ONCE:-}" && ! -e "${FAKE_FAIL_ONCE}" ]]; then
  touch "${FAKE_FAIL_ONCE}"
  exit 1
fi
ttft=""
[[ -n "${FAKE_TTFT:-}" ]] && ttft=", \"ttft_ms\": {\"128\": ${FAKE_TTFT}}"
gpu=""
[[ -n "${FAKE_MHZ:-}" ]] && gpu=", \"gpu_samples\": 9, \"gpu_sm_mhz_median\": ${FAKE_MHZ},
  \"gpu_power_capped_fraction\": 0.25"
printf '{"models": {"llama3-8b": {"decode": [{"batch": 64, "tpot_ms": %s, "floor_ms": 3.9,
  "tpot_pipelined_ms": null%s}]%s}}}\n' "${FAKE_TPOT}" "${gpu}" "${ttft}" > "${json}"
BENCH
chmod +x "${work}/bundle/bin/rtgen-engine-bench"

out=$(OUT="${work}/out" ROUNDS=2 "${root}/scripts/device/env_ab.sh" "${work}/bundle" \
        base=FAKE_TPOT=5.1 floor=FAKE_TPOT=5.2,FAKE_FAIL_ONCE="${work}/failed" 2>&1)
status=$?
echo "${out}"
[[ ${status} != 0 ]] || fail "a failed run, yet env_ab.sh exited 0"
row=$(grep -E '^llama3-8b +64 ' <<< "${out}")
[[ -n "${row}" ]] || fail "no table row for llama3-8b batch 64"
# base: both rounds; floor: round 1 failed, so "-" then round 2's figure, then the floor column.
[[ "${row}" =~ 5\.100/5\.100\ +-/5\.200\ +3\.900$ ]] ||
  fail "rounds out of their columns: '${row}' (want 5.100/5.100, -/5.200, floor 3.900)"
grep -q Traceback <<< "${out}" && fail "the summary crashed"

out=$(OUT="${work}/out2" ROUNDS=1 "${root}/scripts/device/env_ab.sh" "${work}/bundle" \
        base=FAKE_TPOT=5.1 2>&1)
status=$?
[[ ${status} == 0 ]] || fail "every run passed, yet env_ab.sh exited ${status}: ${out}"

# The same OUT again, the run failing: the first run's base_1.json must not stand in for it.
out=$(OUT="${work}/out2" ROUNDS=1 "${root}/scripts/device/env_ab.sh" "${work}/bundle" \
        base=FAKE_TPOT=5.3,FAKE_FAIL_ONCE="${work}/failed2" 2>&1)
status=$?
[[ ${status} != 0 ]] || fail "a failed run in a reused OUT, yet env_ab.sh exited 0"
grep -E '^llama3-8b +64 ' <<< "${out}" | grep -q '5\.100' &&
  fail "an earlier run's JSON stood in for a failed run: ${out}"
# A value with commas reaches the bench whole (FAKE_LIST=a,b), and a piece that continues no
# assignment is refused by name.
out=$(OUT="${work}/out3" ROUNDS=1 "${root}/scripts/device/env_ab.sh" "${work}/bundle" \
        list=FAKE_TPOT=5.4,FAKE_LIST=a,b 2>&1)
status=$?
[[ ${status} == 0 ]] || fail "FAKE_LIST=a,b did not reach the bench whole: ${out}"
grep -E '^llama3-8b +64 ' <<< "${out}" | grep -q '5\.400' || fail "no 5.400 for list: ${out}"
out=$(OUT="${work}/out4" "${root}/scripts/device/env_ab.sh" "${work}/bundle" bad=b,FAKE_TPOT=1 2>&1)
status=$?
[[ ${status} == 2 && "${out}" == *"'b' in 'bad=b,FAKE_TPOT=1' continues no assignment"* ]] ||
  fail "a piece continuing nothing: exit ${status}, '${out}'"
# BENCH_ARGS: split at spaces, passed to every run after the script's own arguments; unset, none.
out=$(OUT="${work}/out5" ROUNDS=2 BENCH_ARGS="--kernel-trace  --seed 7" \
        "${root}/scripts/device/env_ab.sh" "${work}/bundle" one=FAKE_TPOT=5.5 2>&1)
status=$?
[[ ${status} == 0 ]] || fail "BENCH_ARGS run exited ${status}: ${out}"
for r in 1 2; do
  grep -q -- "--json [^ ]*/one_${r}\\.json --kernel-trace --seed 7\$" "${work}/out5/one_${r}.log" ||
    fail "round ${r} lacks BENCH_ARGS at its end: $(cat "${work}/out5/one_${r}.log")"
done
OUT="${work}/out6" "${root}/scripts/device/env_ab.sh" "${work}/bundle" one=FAKE_TPOT=5.5 \
  > /dev/null 2>&1
grep -q -- '--json [^ ]*/one_1\.json$' "${work}/out6/one_1.log" ||
  fail "without BENCH_ARGS the run got more: $(cat "${work}/out6/one_1.log")"
# TTFT and SM clock per round: their own tables where the runs report them (a failed round "-"),
# no TTFT table otherwise.
out=$(OUT="${work}/out7" ROUNDS=2 "${root}/scripts/device/env_ab.sh" "${work}/bundle" \
        fast=FAKE_TPOT=5.1,FAKE_TTFT=1.13,FAKE_MHZ=1980 \
        slow=FAKE_TPOT=5.2,FAKE_TTFT=1.27,FAKE_MHZ=1755,FAKE_FAIL_ONCE="${work}/f7" 2>&1)
row=$(grep -A2 '^graph TTFT ms per round' <<< "${out}" | grep -E '^llama3-8b +128 ')
[[ "${row}" =~ 1\.130/1\.130\ +-/1\.270$ ]] ||
  fail "TTFT rounds out of their columns: '${row}' (want 1.130/1.130, -/1.270): ${out}"
row=$(grep -A2 '^median SM clock' <<< "${out}" | grep -E '^llama3-8b +64 ')
[[ "${row}" =~ 1980\ \(25%\)/1980\ \(25%\)\ +-/1755\ \(25%\)$ ]] ||
  fail "clock rounds out of their columns: '${row}'"
grep -q '^graph TTFT' <<< "$(OUT="${work}/out8" "${root}/scripts/device/env_ab.sh" \
  "${work}/bundle" one=FAKE_TPOT=5.5 2>&1)" && fail "a TTFT table without any TTFT"
(( failures == 0 )) && echo "env_ab_test: passed"
exit $(( failures > 0 ))
