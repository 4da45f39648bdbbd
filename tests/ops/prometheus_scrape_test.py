#!/usr/bin/env python3
"""A real Prometheus (/usr/bin/prometheus, temp config and TSDB) scrapes the real rtgen-server
every second while a test load runs (20 requests, 4 at a time); the test then asks Prometheus'
HTTP API for p99 TPOT and the queue depth and checks it gets numbers. Two more streams keep
requests running until Prometheus has seen one running (at most 30 s), so a scrape delayed past
the short load on a busy machine cannot make the running-requests check miss it."""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import grpc

import ops_harness as h

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
TPOT_P99 = ("histogram_quantile(0.99, sum(rate(rtgen_time_per_output_token_seconds_bucket[30s]))"
            " by (le))")
QUEUE_DEPTH = 'rtgen_requests_waiting{job="rtgen"}'


def query(prom_port, expr):
    """The instant-query result vector (list of (labels, float))."""
    url = (f"http://127.0.0.1:{prom_port}/api/v1/query?" +
           urllib.parse.urlencode({"query": expr}))
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"query {expr!r} failed: {body}")
    return [(s["metric"], float(s["value"][1])) for s in body["data"]["result"]]


def poll(prom_port, expr, accept, timeout_s):
    """Re-queries until accept(values) or the timeout; returns the last values."""
    deadline = time.time() + timeout_s
    values = []
    while True:
        try:
            values = [v for _, v in query(prom_port, expr)]
        except OSError:
            values = []
        if accept(values) or time.time() > deadline:
            return values
        time.sleep(0.5)


def main():
    args, pb2, pb2_grpc, f = h.begin_test()

    proc, port, metrics_port = h.start_server(args.server, metrics=True)
    work = tempfile.mkdtemp(prefix="rtgen-prom-")
    config = os.path.join(work, "prometheus.yml")
    with open(config, "w") as out:
        out.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                  "scrape_configs:\n  - job_name: rtgen\n    scrape_interval: 1s\n"
                  f"    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n")
    prom_port = h.free_port()
    prom = h.spawn([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={work}/data",
                    f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
                   stdout=open(os.path.join(work, "prometheus.log"), "w"),
                   stderr=subprocess.STDOUT)
    try:
        h.wait_for_port(prom_port, prom, timeout_s=60, what="prometheus")
        up = poll(prom_port, 'up{job="rtgen"}', lambda v: v == [1.0], 30)
        f.check(up == [1.0], f"Prometheus scrapes rtgen-server (up = {up})")

        def one(request_id):
            with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
                responses = list(pb2_grpc.InferenceStub(ch).Generate(
                    h.generate_request(pb2, max_tokens=16, request_id=request_id), timeout=60))
            return sum(len(r.token_ids) for r in responses)

        stop = threading.Event()

        def keep_running(name):  # requests back to back until stopped
            n = 0
            while not stop.is_set():
                one(f"{name}-{n}")
                n += 1

        background = [threading.Thread(target=keep_running, args=(f"bg{i}",)) for i in range(2)]
        for t in background:
            t.start()
        try:
            start = time.time()
            with ThreadPoolExecutor(max_workers=4) as pool:
                tokens = list(pool.map(one, [f"p{i}" for i in range(20)]))
            print(f"load: 20 requests, 4 concurrent, {sum(tokens)} tokens in "
                  f"{time.time() - start:.1f} s")
            peak = poll(prom_port, 'max_over_time(rtgen_requests_running{job="rtgen"}[1m])',
                        lambda v: len(v) == 1 and v[0] > 0, 30)
        finally:
            stop.set()
            for t in background:
                t.join(timeout=60)
        f.check(tokens == [16] * 20, "every load request got its 16 tokens")
        f.check(len(peak) == 1 and peak[0] > 0,
                f"Prometheus saw requests running during the load (peak {peak})")

        def good_tpot(values):
            return len(values) == 1 and math.isfinite(values[0]) and values[0] > 0

        tpot = poll(prom_port, TPOT_P99, good_tpot, 20)
        f.check(good_tpot(tpot), f"p99 TPOT from Prometheus is a finite positive number ({tpot})")
        queue = poll(prom_port, QUEUE_DEPTH, lambda v: len(v) == 1 and math.isfinite(v[0]), 10)
        f.check(len(queue) == 1 and math.isfinite(queue[0]) and queue[0] >= 0,
                f"queue depth from Prometheus is a number ({queue})")
    finally:
        prom.terminate()
        proc.terminate()
        prom.wait(timeout=30)
        proc.wait(timeout=60)
        if f.items:
            with open(os.path.join(work, "prometheus.log")) as log:
                sys.stderr.write(log.read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    return f.report()


if __name__ == "__main__":
    sys.exit(main())
