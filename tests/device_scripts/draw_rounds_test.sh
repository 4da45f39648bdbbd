#!/usr/bin/env bash
# scripts/device/draw_rounds.sh on this machine, against a stand-in rtgen-engine-bench that writes
# one JSON key a model round ("smollm2-135m", "smollm2-135m#2", ...) with the TPOTs FAKE_TPOTS
# lists: rounds are marked F and S at the widest jump of 3 % or more, in round order; a variant's
# arguments reach the bench; rounds all alike are all F; a failed run reads "failed" and makes
# the script exit non-zero.
# shellcheck source=tests/device_scripts/test_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/test_setup.sh"
cat > "${work}/bundle/bin/rtgen-engine-bench" <<'BENCH'
#!/usr/bin/env bash
echo "args: $*"
json=""
rounds=1
while (( $# > 0 )); do
  [[ "$1" == --json ]] && { json="$2"; shift; }
  [[ "$1" == --model-rounds ]] && { rounds="$2"; shift; }
  shift
done
[[ -n "${FAKE_FAIL:-}" ]] && exit 3
IFS=, read -r -a tpots <<< "${FAKE_TPOTS}"
{
  printf '{"models": {'
  for (( r = 1; r <= rounds; ++r )); do
    key=smollm2-135m; (( r > 1 )) && key="smollm2-135m#${r}"; (( r > 1 )) && printf ', '
    printf '"%s": {"decode": [{"batch": 64, "tpot_ms": %s}], "ttft_ms": {"128": 1.1}}' \
      "${key}" "${tpots[r - 1]}"
  done
  printf '}}\n'
} > "${json}"
BENCH
chmod +x "${work}/bundle/bin/rtgen-engine-bench"

out=$(OUT="${work}/o1" PROCS=2 ROUNDS=4 FAKE_TPOTS=0.870,0.940,0.941,0.868 \
        "${root}/scripts/device/draw_rounds.sh" "${work}/bundle" base= s64="--spacer-mib 64" 2>&1)
status=$?
echo "${out}"
[[ ${status} == 0 ]] || fail "every run passed, yet draw_rounds.sh exited ${status}"
grep -qE '^s64_2 +F S S F +0\.870 ttft 1\.100 \| 0\.940' <<< "${out}" ||
  fail "no 'F S S F' line for s64 process 2 with its TPOTs"
grep -q '^  base: F S S F x2$' <<< "${out}" || fail "base's two processes not counted as F S S F"
grep -q -- '--model-rounds 4 --spacer-mib 64 --json' "${work}/o1/s64_1.log" ||
  fail "the variant's arguments did not reach the bench: $(cat "${work}/o1/s64_1.log")"
grep -q -- '--spacer-mib' "${work}/o1/base_1.log" && fail "base got another variant's arguments"

out=$(OUT="${work}/o2" PROCS=1 ROUNDS=2 FAKE_TPOTS=0.870,0.880 \
        "${root}/scripts/device/draw_rounds.sh" "${work}/bundle" base= 2>&1)
grep -q 'no jump of 3 %: all F' <<< "${out}" || fail "rounds 1 % apart were split: ${out}"
grep -qE '^base_1 +F F ' <<< "${out}" || fail "rounds alike not both F: ${out}"

out=$(OUT="${work}/o3" PROCS=1 ROUNDS=2 FAKE_TPOTS=0.870,0.940 FAKE_FAIL=1 \
        "${root}/scripts/device/draw_rounds.sh" "${work}/bundle" base= 2>&1)
status=$?
[[ ${status} != 0 ]] || fail "a failed run, yet draw_rounds.sh exited 0"
grep -qE '^base_1 +failed' <<< "${out}" || fail "the failed run is not said: ${out}"

out=$("${root}/scripts/device/draw_rounds.sh" "${work}/bundle" "bad label=x" 2>&1)
[[ $? == 2 ]] || fail "a bad LABEL=ARGS was not refused with 2: ${out}"
exit $(( failures > 0 ))
