#!/usr/bin/env bash
# A/B of GPU switches (kernels/env_switch.h lists them) on the GPU machine: one short
# rtgen-engine-bench run per variant, in turn, then tables of graph TPOT per model and batch, of
# the SM clock, and of each run's TTFT.
# Usage: scripts/device/env_ab.sh BUNDLE VARIANT...
#   VARIANT: label=ENV1=V1,ENV2=V2 (label= alone: the defaults), e.g.
#     scripts/device/env_ab.sh build/device base= off=RTGEN_GEMV_EVICT_FIRST_MB=0
#   BIN=NAME among the assignments runs BUNDLE/bin/NAME instead of rtgen-engine-bench (another
#   build of it, e.g. from an older commit, bundled beside it: old=BIN=rtgen-engine-bench-old).
#   A piece without "=" continues the value before it, so a value may hold commas:
#   two=RTGEN_DIAG_SKIP=qkv,o sets RTGEN_DIAG_SKIP to "qkv,o".
# Environment: MODELS (default the three shapes), BATCHES (default 1,64), REPEATS (default 5),
#   STEPS (decode steps per run, default 64; the sweep of engine_bench.sh runs 128),
#   ROUNDS (default 1: the variants are run in turn this many times), EAGER=1 (also time the
#   eager path: graph/eager cells), TIMEOUT (seconds per run, default 300), OUT (logs and JSON),
#   BENCH_ARGS (more arguments for every run, split at spaces, e.g. "--kernel-trace" with
#   BIN=rtgen-engine-bench-trace: each log then holds one step's kernel timeline).
set -uo pipefail
bundle="${1:?usage: env_ab.sh BUNDLE VARIANT...}"
shift
(( $# > 0 )) || { echo "env_ab: no VARIANT given (label=ENV=V,... or label=)" >&2; exit 2; }
for variant in "$@"; do
  [[ "${variant}" == *=* ]] || { echo "env_ab: VARIANT '${variant}' has no '='" >&2; exit 2; }
done
models="${MODELS:-smollm2-135m,llama3.2-1b,llama3-8b}"
batches="${BATCHES:-1,64}"
out="${OUT:-$(mktemp -d)}"
mkdir -p "${out}"
# shellcheck disable=SC1091
[[ -f "${bundle}/env.sh" ]] && source "${bundle}/env.sh"
eager_flag=(--no-eager)
[[ "${EAGER:-0}" == 1 ]] && eager_flag=()
bench_args=()
read -r -a bench_args <<< "${BENCH_ARGS:-}"
rc=0
labels=()
for round in $(seq 1 "${ROUNDS:-1}"); do
  for variant in "$@"; do
    label="${variant%%=*}"
    assignments="${variant#*=}"
    [[ "${round}" == 1 ]] && labels+=("${label}")
    envs=()
    bench="${bundle}/bin/rtgen-engine-bench"
    IFS=',' read -r -a pairs <<< "${assignments}"
    for pair in "${pairs[@]}"; do
      if [[ "${pair}" == BIN=* ]]; then
        bench="${bundle}/bin/${pair#BIN=}"
      elif [[ "${pair}" == *=* ]]; then
        envs+=("${pair}")
      elif [[ -n "${pair}" ]]; then
        (( ${#envs[@]} > 0 )) ||
          { echo "env_ab: '${pair}' in '${variant}' continues no assignment" >&2; exit 2; }
        envs[-1]+=",${pair}"
      fi
    done
    [[ -x "${bench}" ]] || { echo "env_ab: ${bench} is not an executable" >&2; exit 2; }
    echo "== round ${round}: ${label} (${envs[*]:-defaults}; $(basename "${bench}"))"
    start=$(date +%s)
    # No file of an earlier run in a reused OUT may stand in for a run that dies before writing.
    rm -f "${out}/${label}_${round}.json"
    env "${envs[@]}" timeout "${TIMEOUT:-300}" "${bench}" \
      --models "${models}" --batches "${batches}" --steps "${STEPS:-64}" \
      --repeats "${REPEATS:-5}" --built-repeats 0 \
      --ttft-prompts 128 --ttft-repeats 1 "${eager_flag[@]}" \
      --json "${out}/${label}_${round}.json" "${bench_args[@]}" \
      > "${out}/${label}_${round}.log" 2>&1
    status=$?
    rc=$(( rc | status ))
    echo "   exit ${status}, $(( $(date +%s) - start )) s"
    [[ "${status}" != 0 ]] && tail -5 "${out}/${label}_${round}.log"
  done
done
python3 - "${out}" "${ROUNDS:-1}" "${labels[@]}" <<'PY'
import json, os, sys
out, rounds, labels = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(label, r):
    path = os.path.join(out, f"{label}_{r}.json")
    return json.load(open(path)) if os.path.exists(path) else None
# rows[key][label][r]: round r's (graph, eager) TPOT; floors[key]: the floor of the first run
# that printed one (each run measures its own copy bandwidth; they differ by ~1 %); a round
# without a figure (its run failed) prints "-" in its place, so the rounds stay in their columns.
rows, floors, clocks, ttfts = {}, {}, {}, {}
for label in labels:
    for r in range(1, rounds + 1):
        d = load(label, r)
        if not d:
            continue
        for name, m in d["models"].items():
            for prompt, ms in m.get("ttft_ms", {}).items():
                ttfts.setdefault((name, prompt), {}).setdefault(label, {})[r] = ms
            for row in m.get("decode", []):
                key = (name, row["batch"])
                if floors.get(key) is None:
                    floors[key] = row.get("floor_ms")
                cell = (row.get("tpot_ms"), row.get("eager_tpot_ms"))
                rows.setdefault(key, {}).setdefault(label, {})[r] = cell
                if row.get("gpu_samples"):
                    gpu = (row["gpu_sm_mhz_median"], row["gpu_power_capped_fraction"])
                    clocks.setdefault(key, {}).setdefault(label, {})[r] = gpu
print("graph TPOT ms per round (eager in parentheses when timed;"
      " floor from the first run's copy bandwidth)")
print(f"{'model':<14} {'batch':>5} " + " ".join(f"{l:>16}" for l in labels) + "   floor")
def tpot(cell):
    if cell is None or cell[0] is None:
        return "-"
    g, e = cell
    return f"{g:.3f}" + (f" ({e:.3f})" if e is not None else "")
for key, cells in rows.items():
    name, batch = key
    text = []
    for l in labels:
        by_round = cells.get(l, {})
        cell = "/".join(tpot(by_round.get(r)) for r in range(1, rounds + 1))
        text.append(f"{cell:>16}")
    floor = floors.get(key)
    print(f"{name:<14} {batch:>5} " + " ".join(text) + "   " +
          (f"{floor:.3f}" if floor is not None else "-"))
def per_round(title, column, table, show):
    """A table of one figure per variant and round ("-": a round without it)."""
    print(title)
    print(f"{'model':<14} {column:>6} " + " ".join(f"{l:>16}" for l in labels))
    for (name, item), cells in table.items():
        text = []
        for l in labels:
            by_round = cells.get(l, {})
            text.append("/".join(show(by_round[r]) if r in by_round else "-"
                                 for r in range(1, rounds + 1)))
        print(f"{name:<14} {item:>6} " + " ".join(f"{t:>16}" for t in text))
if clocks:  # the engine bench's GPU telemetry (tools/gpu_telemetry.h)
    per_round("median SM clock MHz per round (share of samples power-capped)", "batch", clocks,
              lambda c: f"{c[0]:.0f} ({c[1]:.0%})")
# Each run's graph TTFT: a process that draws slow cuBLASLt launches (docs/perf/gpu_notes.md,
# sessions 75-76) prefills ~12 % slower too, so this table tells such runs apart.
if ttfts:
    per_round("graph TTFT ms per round, batch 1", "prompt", ttfts, lambda ms: f"{ms:.3f}")
PY
summary=$?  # a crash of the summary is a failure too
exit $(( rc | summary ))
