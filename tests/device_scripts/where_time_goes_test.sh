#!/usr/bin/env bash
# scripts/device/where_time_goes.sh on this machine, against phase_cost_bench.py as the bundle's
# rtgen-engine-bench: leaving one part out of the whole step must save that part's own cost a
# layer (qkv 2.0, gate_up 2.5, down 2.0 us), attention and o each their own plus the 0.8 they
# cost together (3.8, 2.3), and nothing for the parts the stand-in does not price (the norms,
# the LM head); a run that fails leaves "-" in its place and a non-zero exit.
# shellcheck source=tests/device_scripts/test_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/test_setup.sh"
cp "$(dirname "${BASH_SOURCE[0]}")/phase_cost_bench.py" "${work}/bundle/bin/rtgen-engine-bench"
chmod +x "${work}/bundle/bin/rtgen-engine-bench"

out=$(OUT="${work}/out" MODELS=smollm2-135m "${root}/scripts/device/where_time_goes.sh" \
        "${work}/bundle" 2>&1)
status=$?
echo "${out}"
[[ ${status} == 0 ]] || fail "every run wrote its figures, yet where_time_goes.sh exited ${status}"
row=$(grep -A2 '^cost of each part' <<< "${out}" | grep -E '^smollm2-135m +1 ')
# step 0.394 ms (40 us + 30 x 11.8); attn_norm qkv attention o ffn_norm gate_up down lm_head
[[ "${row}" =~ 0\.394\ +0\.0\ +2\.0\ +3\.8\ +2\.3\ +0\.0\ +2\.5\ +2\.0\ +0\.0$ ]] ||
  fail "cost row: '${row}'"

# The run without down fails in both rounds: "-" for down, a non-zero exit.
out=$(OUT="${work}/out2" MODELS=smollm2-135m FAKE_FAIL_SKIP=down \
        "${root}/scripts/device/where_time_goes.sh" "${work}/bundle" 2>&1)
status=$?
echo "${out}"
[[ ${status} != 0 ]] || fail "a failed run, yet where_time_goes.sh exited 0"
row=$(grep -A2 '^cost of each part' <<< "${out}" | grep -E '^smollm2-135m +1 ')
[[ "${row}" =~ 2\.5\ +-\ +0\.0$ ]] || fail "cost row with down missing: '${row}'"
(( failures == 0 )) && echo "where_time_goes_test: passed"
exit $(( failures > 0 ))
