#!/usr/bin/env bash
# cuBLASLt choices judged inside the decode step instead of alone. The wide search
# (RTGEN_MATMUL_TUNE=wide, shipped tables off) times each tuned shape's candidates alone, L2
# flushed, and ranks its finalists (up to 32 per shape) into a file (RTGEN_MATMUL_TUNE_RANKED,
# kernels/matmul.cc); then each shape of BATCH rows runs its candidates of the ranks in RANKS, one
# at a time, from a one-line tune cache (every other shape keeps its shipped choice), through
# env_ab.sh against the shipped choices (both sides with RTGEN_MATMUL_TUNE=wide), and checks that
# every run took its line.
# Usage: scripts/device/matmul_in_step.sh BUNDLE [rank|step|all]       (default all)
#   rank: the search only (writes $OUT/ranked.tsv); step: the in-step runs from $RANKED.
# Environment: MODEL (default llama3-8b), BATCH (default 64), RANKS (default 0,1,2,3), SHAPES
#   (n:k:accumulate triples to keep, e.g. 4096:4096:1,6144:4096:0; default every shape of BATCH
#   rows), RANKED (the ranked file for `step`, default $OUT/ranked.tsv), ROUNDS (default 2),
#   STEPS (default 128), REPEATS (default 5), TIMEOUT (seconds per run: 400 for the search,
#   env_ab.sh's 300 for the others), OUT.
set -uo pipefail
bundle="${1:?usage: matmul_in_step.sh BUNDLE [rank|step|all]}"
what="${2:-all}"
case "${what}" in
  rank | step | all) ;;
  *) echo "matmul_in_step: unknown mode '${what}' (rank, step or all)" >&2; exit 2 ;;
esac
out="${OUT:-$(mktemp -d)}"
mkdir -p "${out}"
model="${MODEL:-llama3-8b}"
batch="${BATCH:-64}"
ranked="${RANKED:-${out}/ranked.tsv}"
script_dir="$(cd "$(dirname "$0")" && pwd)"
# shellcheck disable=SC1091
[[ -f "${bundle}/env.sh" ]] && source "${bundle}/env.sh"
rc=0

if [[ "${what}" == rank || "${what}" == all ]]; then
  rm -f "${out}/ranked.tsv"
  start=$(date +%s)
  echo "== the wide search, every candidate ranked: ${model}, buckets up to ${batch}"
  RTGEN_MATMUL_TUNE=wide RTGEN_MATMUL_SHIPPED=0 RTGEN_MATMUL_TUNE_RANKED="${out}/ranked.tsv" \
    timeout "${TIMEOUT:-400}" "${bundle}/bin/rtgen-engine-bench" --models "${model}" \
    --batches "${batch}" --steps 8 --repeats 1 --built-repeats 0 --ttft-prompts 128 \
    --ttft-repeats 1 --no-eager --json "${out}/rank_run.json" > "${out}/rank_run.log" 2>&1
  status=$?
  rc=$(( rc | status ))
  lines=$(wc -l 2>/dev/null < "${out}/ranked.tsv")
  echo "   exit ${status}, $(( $(date +%s) - start )) s, ${lines:-no} ranked lines"
  [[ "${status}" != 0 ]] && tail -5 "${out}/rank_run.log"
fi

if [[ "${what}" == step || "${what}" == all ]]; then
  [[ -s "${ranked}" ]] || { echo "matmul_in_step: no ranked file ${ranked}" >&2; exit 2; }
  rm -rf "${out}/caches"  # a reused OUT: no earlier run's files are checked again
  mkdir -p "${out}/caches"
  # One cache file per (shape, rank): label nN_kK_aA_fF_rR (fields 4-7: n, k, f32, accumulate).
  variants=(base=RTGEN_MATMUL_TUNE=wide)
  while IFS=$'\t' read -r _tag _mode m n k f32 acc _algo note; do
    [[ "${m}" == "${batch}" ]] || continue
    rank="$(sed -n 's/.*; rank \([0-9]*\) of.*/\1/p' <<< "${note}")"
    [[ ",${RANKS:-0,1,2,3}," == *",${rank},"* ]] || continue
    [[ -z "${SHAPES:-}" || ",${SHAPES}," == *",${n}:${k}:${acc},"* ]] || continue
    label="n${n}_k${k}_a${acc}_f${f32}_r${rank}"
    grep -P "^[^\t]*\t[^\t]*\t${m}\t${n}\t${k}\t${f32}\t${acc}\t.*; rank ${rank} of" "${ranked}" \
      > "${out}/caches/${label}.tsv"
    if [[ -e "${out}/caches/${label}.want" || $(wc -l < "${out}/caches/${label}.tsv") != 1 ]]; then
      echo "matmul_in_step: ${ranked} holds ${label} more than once (runs appended to it?)" >&2
      exit 2
    fi
    cp "${out}/caches/${label}.tsv" "${out}/caches/${label}.want"
    variants+=("${label}=RTGEN_MATMUL_TUNE=wide,RTGEN_MATMUL_TUNE_CACHE=${out}/caches/${label}.tsv")
  done < <(grep -v '^#' "${ranked}")
  if (( ${#variants[@]} == 1 )); then
    echo "matmul_in_step: no line of ${ranked} has ${batch} rows, a rank in ${RANKS:-0,1,2,3}" \
      "and a shape in ${SHAPES:-any}" >&2
    exit 2
  fi
  echo "== in the step: ${#variants[@]} variants (base: the shipped choices)"
  for v in "${variants[@]:1}"; do
    echo "   ${v%%=*}: $(cut -f9 "${out}/caches/${v%%=*}.tsv")"
  done
  MODELS="${model}" BATCHES="${batch}" STEPS="${STEPS:-128}" ROUNDS="${ROUNDS:-2}" \
    OUT="${out}/ab" "${script_dir}/env_ab.sh" "${bundle}" "${variants[@]}"
  rc=$(( rc | $? ))
  # The line under test must have run: still in its file as written, and no run of it said
  # cuBLASLt rejected a tune-cache entry (kernels/matmul.cc says so on stderr; the shipped choice
  # that then runs is not written over the line).
  for want in "${out}"/caches/*.want; do
    label="$(basename "${want%.want}")"
    if ! grep -qxF -f "${want}" "${want%.want}.tsv"; then
      echo "matmul_in_step: ${label}'s line was replaced" >&2
      rc=1
    elif grep -qs "the tune cache's entry .* was rejected by cuBLASLt" \
         "${out}/ab/${label}"_*.log; then
      echo "matmul_in_step: ${label}'s line was rejected by cuBLASLt" >&2
      rc=1
    else
      echo "   ${label}: ran from its cache line"
    fi
  done
fi
exit "${rc}"
