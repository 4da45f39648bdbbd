#!/usr/bin/env bash
# scripts/device/engine_bench.sh on this machine, against a stand-in rtgen-engine-bench and a
# stand-in PyTorch peer: each model keeps its own run's copy bandwidth in the merged JSON (its
# floors' divisor; the first run's stood for both), a peer that prints FAIL for a shape makes the
# script exit non-zero, and a run that dies before writing its JSON (the rtgen runs' or the
# peer's) is not replaced by the file an earlier run left in the same OUT.
# shellcheck source=tests/device_scripts/test_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/test_setup.sh"
# The stand-in: one decode row a model named by --models, at copy bandwidth 4208 GB/s for the
# small models' run and 4233 for the 8B run; with FAKE_DIE=1 it exits 1 without writing.
cat > "${work}/bundle/bin/rtgen-engine-bench" <<'BENCH'
#!/usr/bin/env bash
json="" models=""
while (( $# > 0 )); do
  [[ "$1" == --json ]] && { json="$2"; shift; }
  [[ "$1" == --models ]] && { models="$2"; shift; }
  shift
done
[[ "${FAKE_DIE:-0}" == 1 ]] && exit 1
bw=4208
[[ "${models}" == llama3-8b ]] && bw=4233
printf '{"device": {"name": "stand-in"}, "copy_bandwidth_gbs": %s, "settings": {},
  "models": {"%s": {"decode": [{"batch": 1, "tpot_ms": 1.0, "floor_ms": 0.5}]}}}\n' \
  "${bw}" "${models}" > "${json}"
BENCH
chmod +x "${work}/bundle/bin/rtgen-engine-bench"
printf 'print("FAIL llama3-8b 64 compiled RuntimeError()")\n' \
  > "${work}/bundle/torch_decode_peer.py"

run() { OUT="${work}/out" MODELS_SMALL=smollm2-135m "${root}/scripts/device/engine_bench.sh" \
          "${work}/bundle" "$@" 2>&1; }

out=$(run rtgen)
status=$?
echo "${out}"
[[ ${status} == 0 ]] || fail "both runs wrote their JSON, yet engine_bench.sh exited ${status}"
bws=$(python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))["models"]
print(m["smollm2-135m"]["copy_bandwidth_gbs"], m["llama3-8b"]["copy_bandwidth_gbs"])' \
      "${work}/out/engine_bench.json")
[[ "${bws}" == "4208 4233" ]] || fail "each model's copy bandwidth: '${bws}' (want 4208 4233)"
grep -q "smollm2-135m 4208.0, llama3-8b 4233.0" <<< "${out}" ||
  fail "the table does not print each model's copy bandwidth"

out=$(FAKE_DIE=1 run rtgen)
status=$?
[[ ${status} != 0 ]] || fail "both runs died, yet engine_bench.sh exited 0"
[[ ! -e "${work}/out/engine_bench.json" ]] || fail "an earlier run's JSON stood in for a dead run"

# A stale peer file from an earlier run in the same OUT: its figure must not reach the table.
printf '{"smollm2-135m/bs1/graph": {"tpot_ms": 9.876}}\n' > "${work}/out/peer_fast.json"
out=$(run peer)
status=$?
grep -q "9.876" <<< "${out}" && fail "an earlier run's peer figure reached the table"
[[ ${status} != 0 ]] || fail "the peer printed FAIL, yet engine_bench.sh exited 0: ${out}"
grep -q "the peer failed" <<< "${out}" || fail "the peer's failure was not reported"
grep -q Traceback <<< "${out}" && fail "the summary crashed"

# A misspelt mode ran neither part and printed the table of files already in OUT, exit 0.
out=$(run rtgn)
status=$?
[[ ${status} == 2 ]] || fail "mode 'rtgn': exit ${status} (want 2): ${out}"
grep -q "unknown mode 'rtgn'" <<< "${out}" || fail "mode 'rtgn' is not named: ${out}"
(( failures == 0 )) && echo "engine_bench_test: passed"
exit $(( failures > 0 ))
