#!/usr/bin/env bash
# The CPU-side tools refuse bad flag values before any model loads, naming the flag, with a
# non-zero exit: rtgen-cpu-bench (exit 2), rtgen-prefix-cache-bench and rtgen-synth-model (exit 1).
#   bench_flags_test.sh CPU_BENCH PREFIX_CACHE_BENCH SYNTH_MODEL
set -uo pipefail
usage="usage: bench_flags_test.sh CPU_BENCH PREFIX_CACHE_BENCH SYNTH_MODEL"
cpu_bench="${1:?${usage}}"
prefix_bench="${2:?${usage}}"
synth_model="${3:?${usage}}"
# A model path that does not exist: a flag let through would fail later, on the load, instead.
missing=/no/such/rtgen/model.gguf

failures=0
# expect WANT_RC WANT_TEXT COMMAND...: COMMAND exits WANT_RC and its stderr contains WANT_TEXT.
expect() {
  local want_rc="$1" want_text="$2"
  shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [[ "${rc}" != "${want_rc}" || "${err}" != *"${want_text}"* ]]; then
    echo "FAIL: $* -> exit ${rc}, stderr: ${err} (want exit ${want_rc} and '${want_text}')"
    failures=$((failures + 1))
  fi
}

for bad in abc 12x -1 4097; do
  expect 2 "--threads must be an integer in [0, 4096] (got '${bad}')" \
    "${cpu_bench}" --model "${missing}" --threads "${bad}"
done
for flag in --prompt-tokens --decode-tokens; do
  for bad in 0 -5 12x 2000000000; do
    expect 2 "${flag} must be an integer in [1, 1048576] (got '${bad}')" \
      "${cpu_bench}" --model "${missing}" "${flag}" "${bad}"
  done
done
expect 2 "--runs must be an integer in [1, 1000] (got '-5')" \
  "${cpu_bench}" --model "${missing}" --runs -5
# Each refusal names its flag (they printed the usage line alone).
expect 2 "--dtype must be native, bf16 or f32 (got 'fp16')" \
  "${cpu_bench}" --model "${missing}" --dtype fp16
expect 2 "--model needs a value" "${cpu_bench}" --model
expect 2 "unknown flag '--thread'" "${cpu_bench}" --model "${missing}" --thread 2
# A good value passes the flags and reaches the load, which names the file.
expect 1 "loading ${missing}" "${cpu_bench}" --model "${missing}" --threads 2 --runs 1

for flag in rounds warm max_tokens; do
  expect 1 "--${flag} must be at least 1 (got 0)" "${prefix_bench}" --model="${missing}" \
    "--${flag}=0"
done
expect 1 "--threads must be at least 0 (got -1)" "${prefix_bench}" --model="${missing}" \
  --threads=-1
expect 1 "${missing}" "${prefix_bench}" --model="${missing}" --warm=1 --rounds=1

# A value without its flag was ignored ("q8_0" for "--dtype q8_0" wrote an f32 file); the
# vocabulary given twice (--vocab and the tokenizer's) kept the tokenizer's silently.
out_file=$(mktemp -u)
expect 1 "unexpected argument 'q8_0'" "${synth_model}" --out "${out_file}" --shape tiny q8_0
expect 1 "--vocab and --tokenizer-from" "${synth_model}" --out "${out_file}" --vocab 1000 \
  --tokenizer-from "${missing}"
[[ ! -e "${out_file}" ]] || { echo "FAIL: a refused command wrote ${out_file}"; rm -f "${out_file}";
                              failures=$((failures + 1)); }

if (( failures > 0 )); then
  echo "bench_flags_test: ${failures} failure(s)"
  exit 1
fi
echo "bench_flags_test: every bad flag refused by name"
