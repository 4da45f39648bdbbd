#!/usr/bin/env bash
# Engine benchmark of issue 4 on the GPU machine: rtgen-engine-bench at every model shape, then
# the PyTorch peer (eager, one CUDA graph, torch.compile) in the same call, and a ratio table.
# Usage (the bundle made by ../shared/tools/device-bundle.sh, with torch_decode_peer.py copied in):
#   scripts/device/engine_bench.sh BUNDLE [all|rtgen|peer|table]      (default all)
# Writes $OUT/engine_bench.json (rtgen), $OUT/peer_fast.json (peer), logs beside them; `table`
# only prints the ratio table from files already in $OUT. Environment: REPEATS (default 5),
# REPEATS_8B (default 3), BATCHES (default 1,8,32,64,128,256), MODELS_SMALL, MODELS_8B.
set -uo pipefail

bundle="${1:?usage: engine_bench.sh BUNDLE [all|rtgen|peer|table]}"
what="${2:-all}"
case "${what}" in
  all | rtgen | peer | table) ;;
  *) echo "engine_bench: unknown mode '${what}' (all, rtgen, peer or table)" >&2; exit 2 ;;
esac
out="${OUT:-$(mktemp -d)}"
export OUT="${out}"
mkdir -p "${out}"
# shellcheck disable=SC1091
[[ -f "${bundle}/env.sh" ]] && source "${bundle}/env.sh"
bin="${bundle}/bin/rtgen-engine-bench"
batches="${BATCHES:-1,8,32,64,128,256}"
rc=0

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader 2>&1 || true

if [[ "${what}" == all || "${what}" == rtgen ]]; then
  [[ -x "${bin}" ]] || { echo "engine_bench: ${bin} missing (bundle rtgen-engine-bench)" >&2; exit 2; }
  ldd "${bin}" | grep "not found" && { echo "engine_bench: missing libraries" >&2; exit 2; }
  start=$(date +%s)
  # No file of an earlier run in a reused OUT may stand in for a run that dies before writing.
  rm -f "${out}/engine_bench_small.json" "${out}/engine_bench_8b.json" "${out}/engine_bench.json"
  echo "== rtgen-engine-bench: ${MODELS_SMALL:-smollm2-135m,llama3.2-1b}"
  "${bin}" --models "${MODELS_SMALL:-smollm2-135m,llama3.2-1b}" --batches "${batches}" \
    --repeats "${REPEATS:-5}" --json "${out}/engine_bench_small.json" 2>&1 | tee "${out}/engine_bench_small.log"
  rc=$(( rc | PIPESTATUS[0] ))
  echo "== rtgen-engine-bench: ${MODELS_8B:-llama3-8b}"
  "${bin}" --models "${MODELS_8B:-llama3-8b}" --batches "${batches}" \
    --built-repeats "${REPEATS_8B:-3}" \
    --repeats "${REPEATS_8B:-3}" --json "${out}/engine_bench_8b.json" 2>&1 | tee "${out}/engine_bench_8b.log"
  rc=$(( rc | PIPESTATUS[0] ))
  # One file: the device of the first run, models of both, each run's settings, and each
  # model's own run's copy bandwidth (its floors' divisor; the top-level figure is the first
  # run's).
  python3 - "${out}" <<'PY'
import json, os, sys
out = sys.argv[1]
merged = None
for part in ("engine_bench_small.json", "engine_bench_8b.json"):
    path = os.path.join(out, part)
    if not os.path.exists(path):
        continue
    d = json.load(open(path))
    if merged is None:
        merged = {k: v for k, v in d.items() if k != "settings"}
        merged["settings"], merged["copy_bandwidth_gbs_per_run"] = {}, []
    for name, m in d["models"].items():
        merged["models"][name] = dict(m, copy_bandwidth_gbs=d["copy_bandwidth_gbs"])
        merged["settings"][name] = d["settings"]
    merged["copy_bandwidth_gbs_per_run"].append(d["copy_bandwidth_gbs"])
if not merged:
    sys.exit("engine_bench: no run wrote its JSON")
json.dump(merged, open(os.path.join(out, "engine_bench.json"), "w"), indent=1)
print("wrote", os.path.join(out, "engine_bench.json"))
PY
  rc=$(( rc | $? ))
  echo "rtgen part: $(( $(date +%s) - start )) s"
fi

if [[ "${what}" == all || "${what}" == peer ]]; then
  start=$(date +%s)
  echo "== torch peer"
  if [[ -f "${bundle}/torch_decode_peer.py" ]]; then
    rm -f "${out}/peer_fast.json"  # no earlier run's figures in the table if this one dies
    PYTHONUNBUFFERED=1 python3 "${bundle}/torch_decode_peer.py" 2>&1 | tee "${out}/peer.log" | grep -v Warning
    rc=$(( rc | PIPESTATUS[0] ))
    # The peer prints FAIL for a shape it could not run and carries on with exit 0.
    if grep -q "^FAIL " "${out}/peer.log"; then
      echo "engine_bench: the peer failed on some shapes (FAIL lines in peer.log)" >&2
      rc=$(( rc | 8 ))
    fi
  else
    echo "engine_bench: ${bundle}/torch_decode_peer.py missing (cp ../shared/peers/torch_decode_peer.py ${bundle}/)" >&2
    rc=$(( rc | 2 ))
  fi
  echo "peer part: $(( $(date +%s) - start )) s"
fi

echo "== rtgen vs peer (TPOT ms; rtgen = graph steps one after the other, rt_pipe = pipelined;"
echo "   ratio = peer TPOT / rtgen graph TPOT, > 1: rtgen faster)"
python3 - "${out}" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(name):
    p = os.path.join(out, name)
    return json.load(open(p)) if os.path.exists(p) else {}
rt, peer = load("engine_bench.json"), load("peer_fast.json")
models = rt.get("models", {})
hdr = f"{'model':<14} {'bs':>3} {'rtgen':>8} {'rt_pipe':>8} {'rt_eager':>8} {'floor':>7} {'%floor':>6} | " \
      f"{'pt_eager':>8} {'pt_graph':>8} {'pt_comp':>8} | {'x_eager':>7} {'x_graph':>7} {'x_comp':>7}"
print(hdr)
def f(v, w=8, p=3):
    return f"{v:>{w}.{p}f}" if isinstance(v, (int, float)) else f"{'-':>{w}}"
for name in ("smollm2-135m", "llama3.2-1b", "llama3-8b"):
    for bs in (1, 64):
        row = next((r for r in models.get(name, {}).get("decode", []) if r["batch"] == bs), {})
        g = row.get("tpot_ms")
        pt = {m: peer.get(f"{name}/bs{bs}/{m}", {}).get("tpot_ms") for m in ("eager", "graph", "compiled")}
        ratio = {m: (pt[m] / g if g and pt[m] else None) for m in pt}
        print(f"{name:<14} {bs:>3} {f(g)} {f(row.get('tpot_pipelined_ms'))} {f(row.get('eager_tpot_ms'))} {f(row.get('floor_ms'), 7)} "
              f"{f(100 * row['floor_fraction'] if 'floor_fraction' in row else None, 6, 1)} | "
              f"{f(pt['eager'])} {f(pt['graph'])} {f(pt['compiled'])} | "
              f"{f(ratio['eager'], 7, 2)} {f(ratio['graph'], 7, 2)} {f(ratio['compiled'], 7, 2)}")
for name, m in models.items():
    if "ttft_ms" in m:
        print(f"{name:<14} TTFT bs1: " + ", ".join(f"prompt {p}: {v:.2f} ms" for p, v in m["ttft_ms"].items()))
    su = m.get("startup", {}).get("graph")
    if su:
        print(f"{name:<14} start-up: backend {su['create_backend_s']:.2f} s, graph capture "
              f"{su['graph_capture_s']:.2f} s, {su['graph_capture_bytes'] / 2**20:.1f} MiB, "
              f"{len(su['graph_buckets'])} buckets, {su.get('graph_count', '?')} graphs")
if rt:
    per_model = ", ".join(f"{n} {m['copy_bandwidth_gbs']:.1f}" for n, m in models.items()
                          if "copy_bandwidth_gbs" in m)
    print(f"copy bandwidth (GB/s, each model's run: its floors' divisor): {per_model}; "
          f"device: {rt.get('device', {}).get('name')}")
PY
echo "files: ${out}/engine_bench.json ${out}/peer_fast.json (logs beside them); exit ${rc}"
exit "${rc}"
