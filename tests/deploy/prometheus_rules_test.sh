#!/usr/bin/env bash
# Checks deploy/prometheus/rtgen-rules.yaml with promtool: syntax (check rules), the unit tests
# in rtgen-rules.test.yaml (test rules), that every alert has a test where it fires and one
# where it does not, and that breaking each alert's threshold makes the unit tests fail.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir="$root/deploy/prometheus"
command -v promtool >/dev/null || {
  echo "SETUP ERROR: promtool not found; install the Debian package 'prometheus'" \
    "(scripts/setup.sh does: RTGEN_APT_TEST_PACKAGES)" >&2
  exit 1
}

promtool check rules "$dir/rtgen-rules.yaml"
(cd "$dir" && promtool test rules rtgen-rules.test.yaml)

"${PYTHON:-python3}" - "$dir/rtgen-rules.yaml" "$dir/rtgen-rules.test.yaml" <<'PY'
import sys, yaml
rules = yaml.safe_load(open(sys.argv[1]))
tests = yaml.safe_load(open(sys.argv[2]))
alerts = [r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r]
fires, silent = set(), set()
for group in tests["tests"]:
    for t in group.get("alert_rule_test", []):
        (fires if t.get("exp_alerts") else silent).add(t["alertname"])
missing = [f"{a}: no test where it fires" for a in alerts if a not in fires]
missing += [f"{a}: no test where it does not fire" for a in alerts if a not in silent]
missing += [f"{a}: tested but not defined" for a in (fires | silent) - set(alerts)]
for m in missing:
    print("FAIL: " + m)
# An alert on a recorded p99 must sit on a bucket bound of the server's default latency
# buckets (server/metrics.cc): inside a bucket histogram_quantile interpolates linearly, and
# TTFTs all at 1.1 s read as a p99 of 2.49 s against a 2 s threshold with buckets 1 and 2.5.
import re, os
metrics_cc = open(os.path.join(os.path.dirname(sys.argv[1]), "../../server/metrics.cc")).read()
body = re.search(r"DefaultLatencyBuckets\(\) \{.*?return \{(.*?)\};", metrics_cc, re.S).group(1)
buckets = {float(x) for x in re.findall(r"[0-9.]+", body)}
for g in rules["groups"]:
    for r in g["rules"]:
        m = re.search(r"p99_5m > ([0-9.]+)$", str(r.get("expr", "")).strip())
        if "alert" in r and m and float(m.group(1)) not in buckets:
            print(f"FAIL: {r['alert']}: threshold {m.group(1)} s is not a default bucket bound")
            missing.append(r["alert"])
if len(alerts) < 5:
    print(f"FAIL: expected at least 5 alerts, found {alerts}")
    missing.append("count")
sys.exit(1 if missing else 0)
PY

# Each mutation moves one threshold; the unit tests must notice.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$dir/rtgen-rules.test.yaml" "$tmp/"
mutations=(
  's/p99_5m > 0.1$/p99_5m > 1/'
  's/p99_5m > 2$/p99_5m > 1000/'
  's/deriv(rtgen_requests_waiting\[10m\]) > 0/deriv(rtgen_requests_waiting[10m]) < 0/'
  's/rtgen_kv_cache_usage_ratio > 0.95/rtgen_kv_cache_usage_ratio > 0.9/'
  's/rate5m > 0.01$/rate5m > 0.001/'
  's/rejected_ratio:rate5m > 0.05$/rejected_ratio:rate5m > 0.5/'
  's/rejected_ratio:rate5m > 0.05$/rejected_ratio:rate5m > 0.01/'
  's/deadline_ratio:rate5m > 0.05$/deadline_ratio:rate5m > 0.5/'
  's/deadline_ratio:rate5m > 0.05$/deadline_ratio:rate5m > 0.005/'
  's/finish_reason="error"/finish_reason=~"error|rejected"/'
  's/for: 5m/for: 1m/'
  's/up{job=~"rtgen|.\*\/rtgen"} == 0/up{job=~"rtgen|.*\/rtgen"} == 2/'
  's/up{job=~"rtgen|.\*\/rtgen"}/up{job="rtgen"}/'
  '/alert: RtgenTargetDown/,/for:/s/for: 10m/for: 1m/'
  's/absent(up{job=~"rtgen|.\*\/rtgen"} == 1)/absent(up{job=~"rtgen|.*\/rtgen"})/'
  '/alert: RtgenNoTargetUp/,/for:/s/for: 10m/for: 1m/'
)
failures=0
for mutation in "${mutations[@]}"; do
  sed -e "$mutation" "$dir/rtgen-rules.yaml" >"$tmp/rtgen-rules.yaml"
  if cmp -s "$dir/rtgen-rules.yaml" "$tmp/rtgen-rules.yaml"; then
    echo "FAIL: mutation '$mutation' changed nothing (update this test)"
    failures=$((failures + 1))
  elif (cd "$tmp" && promtool test rules rtgen-rules.test.yaml >/dev/null 2>&1); then
    echo "FAIL: the unit tests pass with the rules mutated by '$mutation'"
    failures=$((failures + 1))
  fi
done
[ "$failures" -eq 0 ] || exit 1
echo "PASS (${#mutations[@]} mutations caught)"
