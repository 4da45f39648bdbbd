#!/usr/bin/env python3
"""Runs the real rtgen-server, puts a little load on it, scrapes /metrics, checks the exposition
with `promtool check metrics`, and fails if any metric that the Grafana dashboard or the
Prometheus rules use is not exported (tests/deploy/metric_names_test.py --print-used)."""

import os
import re
import subprocess
import sys
import urllib.request

import grpc

import ops_harness as h

# Only the CUDA backend replays graphs; with no captured bucket the family has no series.
CUDA_ONLY = {"rtgen_graph_replays_total"}


def used_metric_names():
    script = os.path.join(h.SOURCE_DIR, "tests", "deploy", "metric_names_test.py")
    out = subprocess.run([sys.executable, script, "--print-used"], check=True,
                         capture_output=True, text=True).stdout
    return sorted({line.strip() for line in out.splitlines() if line.strip()})


def exported_names(exposition):
    names = set()
    for line in exposition.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)
        if match:
            names.add(match.group(0))
    return names


def main():
    args, pb2, pb2_grpc, f = h.begin_test()
    used = used_metric_names()
    f.check(len(used) >= 10, f"the dashboard and rules name {len(used)} metrics")

    proc, port, metrics_port = h.start_server(args.server, metrics=True)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = pb2_grpc.InferenceStub(ch)
        backend = stub.GetModelInfo(pb2.GetModelInfoRequest(), timeout=30).backend
        for i in range(3):
            list(stub.Generate(h.generate_request(pb2, max_tokens=8, request_id=f"m{i}"),
                               timeout=60))
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        exposition = r.read().decode()
    proc.terminate()
    proc.wait(timeout=60)

    check = subprocess.run(["promtool", "check", "metrics"], input=exposition,
                           capture_output=True, text=True)
    f.check(check.returncode == 0,
            f"promtool check metrics passes ({(check.stdout + check.stderr).strip()})")
    exported = exported_names(exposition)
    for name in used:
        if name in CUDA_ONLY and backend != "cuda":
            # prometheus-cpp prints nothing for a family without children.
            f.check(name not in exported,
                    f"{name}: no graph replays on the {backend} backend (CUDA only)")
            continue
        f.check(name in exported, f"{name} is exported")
    f.check('rtgen_eager_steps_total{reason="decode"}' in exposition and
            'rtgen_eager_steps_total{reason="prefill"}' in exposition,
            "eager step reasons are pre-registered")
    generated = re.search(r"^rtgen_generation_tokens_total(?:\{\})? (\S+)$", exposition, re.M)
    f.check(generated is not None and float(generated.group(1)) >= 24,
            f"the load shows up: rtgen_generation_tokens_total = "
            f"{generated.group(1) if generated else None} (>= 24)")
    return f.report()


if __name__ == "__main__":
    sys.exit(main())
