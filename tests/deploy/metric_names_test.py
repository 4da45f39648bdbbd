#!/usr/bin/env python3
"""Checks that the dashboard, the alert/recording rules (and their unit tests), the HPA and the
prometheus-adapter rule use only the metrics of the ARCHITECTURE.md metric table.

- The table gives names, types and labels (`rtgen_graph_replays_total{bucket}`); a histogram
  exposes NAME_bucket/_sum/_count (never NAME itself), the others exactly NAME.
- Label matchers must use a label of that metric (or le for _bucket, or a scrape target label),
  and finish_reason values must be ones the table lists.
- Recording-rule names (rtgen:...) must be defined in the rule file before they are used.
- The dashboard uses every metric of the table, has a datasource variable used by every panel,
  and namespace/pod/instance variables; every $variable it uses is defined.
- server/ registers every name of the table (a string literal; the live /metrics check is
  separate).
The checker is also run on known-bad expressions, which it must reject.
`--print-used` prints the series names used, one per line (for a live-server check).
ARCHITECTURE.md is read from $RTGEN_ARCHITECTURE_MD, docs/ARCHITECTURE.md, ../shared/ (beside
the checkout) or /work/shared/.
"""
import glob
import json
import os
import re
import sys

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TARGET_LABELS = {"job", "instance", "namespace", "pod", "container", "endpoint", "service"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def architecture_path():
    candidates = [os.environ.get("RTGEN_ARCHITECTURE_MD"),
                  os.path.join(ROOT, "docs", "ARCHITECTURE.md"),
                  os.path.join(ROOT, "ARCHITECTURE.md"),
                  os.path.join(ROOT, "..", "shared", "ARCHITECTURE.md"),  # CI: shared/ beside
                  "/work/shared/ARCHITECTURE.md"]
    for path in candidates:
        if path and os.path.isfile(path):
            return path
    # A clone without the design beside it (or in RTGEN_ARCHITECTURE_MD) cannot run this check:
    # skipped (ctest SKIP_RETURN_CODE 77), saying why, not passed.
    print("SKIPPED: ARCHITECTURE.md not found (looked at " +
          ", ".join(p for p in candidates if p) + "); set RTGEN_ARCHITECTURE_MD", file=sys.stderr)
    sys.exit(77)


def architecture_metrics(path):
    """{series name: allowed labels} and the finish reasons, from the table under ## Metrics."""
    with open(path) as f:
        text = f.read()
    section = re.search(r"^## Metrics.*?$(.*?)(?=^## )", text, re.S | re.M)
    if not section:
        sys.exit(f"SETUP ERROR: {path} has no '## Metrics' section")
    series, kinds, reasons = {}, {}, set()
    for row in section.group(1).splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        names, kind, meaning = cells
        if kind not in ("histogram", "gauge", "counter"):
            sys.exit(f"SETUP ERROR: unknown metric type {kind!r} in {path}: {row}")
        for name, labels in re.findall(r"`(rtgen_\w+)(?:\{([\w,\s]*)\})?`", names):
            labels = {l.strip() for l in labels.split(",") if l.strip()}
            if name == "rtgen_requests_total":
                labels.add("finish_reason")
                reasons = {r.strip() for r in meaning.split(",")}
            kinds[name] = kind
            if kind == "histogram":
                for suffix in HISTOGRAM_SUFFIXES:
                    series[name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
            else:
                series[name] = labels
    if len(kinds) < 10 or not reasons:
        sys.exit(f"SETUP ERROR: parsed only {sorted(kinds)} from the table in {path}")
    return series, kinds, reasons


def strip_strings(expr):
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)


def check_expr(expr, where, series, reasons, recorded, errors, used):
    """Reports unknown names/labels in one PromQL expression; adds used names to `used`."""
    for name, matchers in re.findall(r'(?<![\w"./:-])(rtgen[\w:]*)\s*(?:\{([^}]*)\})?', expr):
        if ":" in name:
            if name not in recorded:
                errors.append(f"{where}: recording rule {name} is not defined")
            continue
        used.add(name)
        if name not in series:
            errors.append(f"{where}: {name} is not a series of the ARCHITECTURE.md table")
            continue
        for label, op, value in re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"',
                                           matchers or ""):
            if label not in series[name] | TARGET_LABELS:
                errors.append(f"{where}: {name} has no label {label}")
            if label == "finish_reason":
                for reason in value.split("|"):
                    if reason not in reasons:
                        errors.append(f"{where}: finish_reason {reason!r} is not one of "
                                      f"{sorted(reasons)}")
    code = strip_strings(expr)
    for clause in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", code):
        for label in re.findall(r"\w+", clause):
            known = set().union(*series.values()) | TARGET_LABELS
            if label not in known:
                errors.append(f"{where}: grouping label {label} belongs to no metric")


def rule_exprs(errors):
    """[(where, expr)] from the rules, their unit tests, the HPA and the adapter rule; and the
    recorded names."""
    out = []
    rules_path = os.path.join(ROOT, "deploy", "prometheus", "rtgen-rules.yaml")
    with open(rules_path) as f:
        rules = yaml.safe_load(f)
    recorded = set()
    for group in rules["groups"]:
        for rule in group["rules"]:
            name = rule.get("record") or rule.get("alert")
            out.append((f"rtgen-rules.yaml {name}", rule["expr"]))
            if "record" in rule:
                if not rule["record"].startswith("rtgen:"):
                    errors.append(f"rtgen-rules.yaml: recording rule {name} is not rtgen:...")
                recorded.add(rule["record"])
    with open(os.path.join(ROOT, "deploy", "prometheus", "rtgen-rules.test.yaml")) as f:
        tests = yaml.safe_load(f)
    for group in tests["tests"]:
        for s in group.get("input_series", []):
            out.append(("rtgen-rules.test.yaml input", s["series"]))
        for t in group.get("promql_expr_test", []):
            out.append(("rtgen-rules.test.yaml promql", t["expr"]))
    with open(os.path.join(ROOT, "deploy", "k8s", "base", "hpa.yaml")) as f:
        hpa = yaml.safe_load(f)
    for metric in hpa["spec"]["metrics"]:
        if metric["type"] == "Pods":
            out.append(("hpa.yaml", metric["pods"]["metric"]["name"]))
    with open(os.path.join(ROOT, "deploy", "k8s", "base", "prometheus-adapter-rules.yaml")) as f:
        adapter = yaml.safe_load(f)
    for rule in adapter["rules"]["custom"]:
        out.append(("prometheus-adapter-rules.yaml", rule["seriesQuery"]))
        out.append(("prometheus-adapter-rules.yaml as", rule["name"]["as"]))
    return out, recorded


def dashboard_exprs(errors):
    path = os.path.join(ROOT, "deploy", "grafana", "rtgen-dashboard.json")
    with open(path) as f:
        dash = json.load(f)
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    for name in ("namespace", "pod", "instance"):
        if name not in variables:
            errors.append(f"dashboard: no ${name} variable")
    if variables.get("datasource", {}).get("type") != "datasource" or \
            variables["datasource"].get("query") != "prometheus":
        errors.append("dashboard: no Prometheus datasource variable named datasource")
    out, ids, cells = [], set(), set()
    for v in variables.values():
        if v["type"] == "query":
            query = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            out.append((f"dashboard variable {v['name']}", query))
    for panel in dash["panels"]:
        where = f"dashboard panel {panel.get('title')!r}"
        if panel["id"] in ids:
            errors.append(f"{where}: duplicate id {panel['id']}")
        ids.add(panel["id"])
        g = panel["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells or x >= 24:
                    errors.append(f"{where}: gridPos overlaps another panel or the edge")
                    break
                cells.add((x, y))
        sources = [panel.get("datasource")] + [t.get("datasource") for t in panel["targets"]]
        if any((s or {}).get("uid") != "${datasource}" for s in sources):
            errors.append(f"{where}: a datasource is not ${{datasource}}")
        if not panel["targets"]:
            errors.append(f"{where}: no queries")
        for t in panel["targets"]:
            out.append((where, t["expr"]))
    for where, expr in out:
        for var in re.findall(r"\$\{?(\w+)", expr):
            if not var.startswith("__") and var not in variables:
                errors.append(f"{where}: ${var} is not a dashboard variable")
    return out


def server_registered_names():
    text = ""
    for path in glob.glob(os.path.join(ROOT, "server", "*.cc")):
        with open(path) as f:
            text += f.read()
    return set(re.findall(r'"(rtgen_\w+)"', text))


def self_test(series, reasons):
    bad = ['rate(rtgen_requests_totals[5m])', 'rtgen_time_to_first_token_seconds > 1',
           'rate(rtgen_requests_total_bucket[5m])', 'rtgen_requests_total{finish_reason="oops"}',
           'rtgen_kv_cache_usage_ratio{bucket="1"}', 'sum by (gpu) (rtgen_requests_waiting)',
           'rtgen:undefined:rate5m']
    good = ['histogram_quantile(0.9, sum by (le) (rate(rtgen_batch_size_bucket[1m])))',
            'rtgen_requests_total{finish_reason=~"error|rejected", pod="p"}',
            'sum(rtgen_requests_waiting{job="rtgen", pod="rtgen-0"}) + on() vector(0)']
    failures = []
    for expr in bad:
        errors = []
        check_expr(expr, "self-test", series, reasons, set(), errors, set())
        if not errors:
            failures.append(f"the checker accepted {expr}")
    for expr in good:
        errors = []
        check_expr(expr, "self-test", series, reasons, set(), errors, set())
        failures += [f"the checker rejected {expr}: {e}" for e in errors]
    return failures


def main():
    path = architecture_path()
    series, kinds, reasons = architecture_metrics(path)
    errors = []
    rules, recorded = rule_exprs(errors)
    dashboard = dashboard_exprs(errors)
    used_rules, used_dashboard = set(), set()
    for where, expr in rules:
        check_expr(expr, where, series, reasons, recorded, errors, used_rules)
    for where, expr in dashboard:
        check_expr(expr, where, series, reasons, recorded, errors, used_dashboard)
    if "--print-used" in sys.argv:
        print("\n".join(sorted(used_rules | used_dashboard)))
        return 0
    dashboard_metrics = {re.sub(r"_(bucket|sum|count)$", "", n) if kinds.get(
        re.sub(r"_(bucket|sum|count)$", "", n)) == "histogram" else n for n in used_dashboard}
    for name in sorted(set(kinds) - dashboard_metrics):
        errors.append(f"dashboard: does not show {name}")
    registered = server_registered_names()
    for name in sorted(set(kinds) - registered):
        errors.append(f"server/: registers no metric named {name} (ARCHITECTURE.md lists it)")
    errors += self_test(series, reasons)
    print(f"{path}: {len(kinds)} metrics, finish reasons {sorted(reasons)}")
    print(f"rules/HPA/adapter use {len(used_rules)} series, dashboard {len(used_dashboard)}, "
          f"recording rules {sorted(recorded)}")
    for e in errors:
        print("FAIL: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
