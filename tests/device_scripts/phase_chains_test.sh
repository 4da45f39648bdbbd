#!/usr/bin/env bash
# scripts/device/phase_chains.sh on this machine, against phase_cost_bench.py as the bundle's
# rtgen-engine-bench (TPOT a sum it knows: 40 us of step kernels, per layer qkv 2.0, attention
# 3.0, o 1.5, gate_up 2.5 and down 2.0 us for the phases left running, and 0.8 us more a layer
# when attention and o both run). The script must find each phase's 2.0 / 3.0 / ...
# alone, the layer's 0.8 beyond their sum, and the 0.8 on attention+o alone among the pairs;
# a run that fails makes it exit non-zero with "-" where that run's figures would be.
# shellcheck source=tests/device_scripts/test_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/test_setup.sh"
cp "$(dirname "${BASH_SOURCE[0]}")/phase_cost_bench.py" "${work}/bundle/bin/rtgen-engine-bench"
chmod +x "${work}/bundle/bin/rtgen-engine-bench"

out=$(OUT="${work}/out" ROUNDS=2 "${root}/scripts/device/phase_chains.sh" "${work}/bundle" 2>&1)
status=$?
echo "${out}"
[[ ${status} == 0 ]] || fail "every run wrote its figures, yet phase_chains.sh exited ${status}"
alone=$(grep -A2 '^alone:' <<< "${out}" | grep -E '^smollm2-135m +1 ')
# base 0.0400 ms; qkv .. down alone; their sum 11.0; the whole layer 11.8; 0.8 beyond.
[[ "${alone}" =~ 0\.0400\ +2\.00\ +3\.00\ +1\.50\ +2\.50\ +2\.00\ +11\.00\ +11\.80\ +0\.80$ ]] ||
  fail "alone row: '${alone}'"
pairs=$(grep -A2 '^pairs in turn:' <<< "${out}" | grep -E '^smollm2-135m +1 ')
# qkv+attention, attention+o, o+gate_up, gate_up+down, down+qkv
pair() { printf '%s\\ \\(\\ \\%s\\)' "${1//./\\.}" "${2//./\\.}"; }  # "5.00 ( +0.00)" as a regex
expected="$(pair 5.00 +0.00)\ +$(pair 5.30 +0.80)\ +$(pair 4.00 +0.00)\ +$(pair 4.50 +0.00)"
[[ "${pairs}" =~ ${expected}\ +$(pair 4.00 +0.00)$ ]] ||
  fail "pairs row: '${pairs}'"
grep -q "round 1: qkv (RTGEN_DIAG_SKIP=attention,o,gate_up,down;" <<< "${out}" ||
  fail "the qkv-alone run did not skip the other four phases"
grep -q "round 1: base (RTGEN_DIAG_SKIP=qkv,attention,o,gate_up,down;" <<< "${out}" ||
  fail "base did not skip every layer phase"

# The o-alone run fails in both rounds: non-zero exit, and "-" for o, the sum and the beyond.
out=$(OUT="${work}/out2" ROUNDS=2 FAKE_FAIL_SKIP="qkv,attention,gate_up,down" \
        "${root}/scripts/device/phase_chains.sh" "${work}/bundle" 2>&1)
status=$?
echo "${out}"
[[ ${status} != 0 ]] || fail "a failed run, yet phase_chains.sh exited 0"
alone=$(grep -A2 '^alone:' <<< "${out}" | grep -E '^smollm2-135m +1 ')
[[ "${alone}" =~ 3\.00\ +-\ +2\.50\ +2\.00\ +-\ +11\.80\ +-$ ]] || fail "alone row: '${alone}'"
pairs=$(grep -A2 '^pairs in turn:' <<< "${out}" | grep -E '^smollm2-135m +1 ')
[[ "${pairs}" =~ ^smollm2-135m\ +1\ +5\.00\ \(\ \+0\.00\)\ +-\ +-\ +4\.50 ]] ||
  fail "pairs row with o missing: '${pairs}'"

# A missing bundle binary is refused with its path.
out=$("${root}/scripts/device/phase_chains.sh" "${work}/none" 2>&1)
status=$?
[[ ${status} == 2 && "${out}" == *"none/bin/rtgen-engine-bench is not an executable"* ]] ||
  fail "a missing bench: exit ${status}, '${out}'"

(( failures == 0 )) && echo "phase_chains_test: all passed"
exit $(( failures > 0 ))
