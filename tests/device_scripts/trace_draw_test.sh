#!/usr/bin/env bash
# scripts/device/trace_draw.py on canned kernel-trace logs: runs split at the widest TTFT jump
# (or at --split-ms), each boundary's median gap and run per group and slow minus fast; one group
# when the TTFTs lie close; no log with a trace, or a bad flag, exits non-zero by name.
# shellcheck source=tests/device_scripts/test_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/test_setup.sh"
tool="${root}/scripts/device/trace_draw.py"
# row INDEX KERNEL GAP RUN: a timeline row in the trace build's columns (# kernel blocks start
# wait0 wait1 end gap run blk_run; the times this tool does not read are stand-ins).
row() {
  printf '%4d %-18s %6d %s %8.2f %8.2f %8.2f\n' "$1" "$2" 64 "1.00 1.00 1.00 1.00" "$3" "$4" 1
}
# log NAME TTFT TPOT GEMM_GAP: one step of two layers (row_inv_rms, then rope_kv_store after a
# gap of GEMM_GAP us).
log() {
  mkdir -p "${work}/runs"
  {
    echo "kernel timeline of one decode step, smollm2-135m batch 64 (us):"
    row 0 embedding 0.00 1.00
    row 1 row_inv_rms 1.70 2.00
    row 2 rope_kv_store "$4" 1.50
    row 3 row_inv_rms 1.70 2.00
    row 4 rope_kv_store "$4" 1.50
    echo "  graph bs  64: tpot $3 ms (inputs built in the loop -, pipelined $3), floor 0.185 ms"
    echo "  graph ttft prompt 128: $2 ms"
  } > "${work}/runs/$1.log"
}
log f1 1.130 0.903 1.70
log f2 1.150 0.910 1.80
log s1 1.260 0.967 2.20
log s2 1.280 0.990 2.30
echo "no trace here" > "${work}/runs/other.log"

out=$(python3 "${tool}" "${work}/runs" 2>&1)
status=$?
echo "${out}"
[[ ${status} == 0 ]] || fail "exit ${status} on good logs"
grep -q '^fast: 2 runs, TTFT 1.130-1.150 ms, TPOT 0.903-0.910 ms$' <<< "${out}" ||
  fail "the fast group is not f1, f2"
grep -q '^slow: 2 runs, TTFT 1.260-1.280 ms, TPOT 0.967-0.990 ms$' <<< "${out}" ||
  fail "the slow group is not s1, s2"
# rope_kv_store's gap: fast median of 1.70, 1.80 = 1.75, slow of 2.20, 2.30 = 2.25, +0.50.
grep -Eq '^row_inv_rms > rope_kv_store +2 +1\.75 +2\.25 +\+0\.50 +1\.50 +1\.50 +\+0\.00$' \
  <<< "${out}" || fail "rope_kv_store's boundary row is wrong"
grep -Eq '^rope_kv_store > row_inv_rms +1 +1\.70 +1\.70 +\+0\.00 ' <<< "${out}" ||
  fail "the second layer's row_inv_rms boundary is wrong"

# --split-ms puts s1 with the fast runs.
out=$(python3 "${tool}" "${work}/runs" --split-ms 1.27 2>&1)
grep -q '^fast: 3 runs' <<< "${out}" || fail "--split-ms 1.27 did not give 3 fast runs: ${out}"

# TTFTs within 3 %: one group, said.
rm "${work}/runs/s1.log" "${work}/runs/s2.log"
log s3 1.160 0.930 1.90
out=$(python3 "${tool}" "${work}/runs" 2>&1)
grep -q '^all: 3 runs' <<< "${out}" && grep -q '^one group' <<< "${out}" ||
  fail "close TTFTs were split: ${out}"

# Nothing to read, or a bad flag: non-zero, by name.
mkdir -p "${work}/empty"
out=$(python3 "${tool}" "${work}/empty" 2>&1)
[[ $? != 0 && "${out}" == *"no kernel-trace log with a TTFT at prompt 128"* ]] ||
  fail "an empty folder: '${out}'"
out=$(python3 "${tool}" "${work}/runs" --split 1 2>&1)
[[ $? != 0 && "${out}" == *"unknown or incomplete flag '--split'"* ]] ||
  fail "a bad flag: '${out}'"
(( failures == 0 )) && echo "trace_draw_test: passed"
exit $(( failures > 0 ))
