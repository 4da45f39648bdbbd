#!/usr/bin/env python3
"""Graceful drain of the real rtgen-server (CPU backend, SmolLM2). Two replicas, A and B, and a
client channel over both addresses (pick_first: it uses A, as a client behind a balancer uses
one pod). At SIGTERM to A: the streams in flight on A finish with all their tokens; A stops
taking calls at once (GOAWAY), so a new Generate on the same channel is served by B and a fresh
connection to A is refused or reads NOT_SERVING; an open health Watch on A ends instead of
holding the exit; A exits 0 soon after its last stream, well within --drain-timeout-s. Then a
second Ctrl-C during B's drain ends B at once. Last, on a third server, streams still open (one
running, one queued) when --drain-timeout-s runs out end with UNAVAILABLE and it exits 0."""

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import grpc

import ops_harness as h

NUM_STREAMS = 4
MAX_TOKENS = 96
DRAIN_TIMEOUT_S = 40
EXIT_AFTER_LAST_STREAM_S = 10  # far under DRAIN_TIMEOUT_S: nothing else holds the exit


def run_stream(stub, pb2, request, result, timeout):
    """Reads one Generate stream into `result` (tokens, finish, code; `first` set on the first
    token or the end)."""
    try:
        for response in stub.Generate(request, timeout=timeout):
            result["tokens"] += len(response.token_ids)
            if result["tokens"] > 0:
                result["first"].set()
            if response.finish_reason:
                result["finish"] = response.finish_reason
        result["code"] = grpc.StatusCode.OK
    except grpc.RpcError as e:
        result["code"] = e.code()
    finally:
        result["ended_at"] = time.monotonic()
        result["first"].set()


def new_result():
    return dict(tokens=0, finish=None, code=None, first=threading.Event(), ended_at=None)


def watch_health(channel, seen):
    """grpc.health.v1.Health/Watch (overall status) until it ends: statuses into seen["statuses"],
    then seen["code"] and seen["ended_at"]."""
    watch = channel.unary_stream("/grpc.health.v1.Health/Watch")
    try:
        for response in watch(b"", timeout=DRAIN_TIMEOUT_S + 30):
            seen["statuses"].append(h.HEALTH_STATUS.get(response[1], "?") if response else "?")
        seen["code"] = grpc.StatusCode.OK
    except grpc.RpcError as e:
        seen["code"] = e.code()
    seen["ended_at"] = time.monotonic()


def fresh_health(target):
    """Overall health on a new connection: the status name, or the gRPC code name on error."""
    with grpc.insecure_channel(target) as fresh:
        try:
            return h.health_check(fresh, timeout=5)
        except grpc.RpcError as e:
            return e.code().name


def check_drain(f, args, pb2, pb2_grpc, proc_a, port_a, port_b):
    target_a = f"127.0.0.1:{port_a}"
    both = grpc.insecure_channel(f"ipv4:127.0.0.1:{port_a},127.0.0.1:{port_b}")
    stub = pb2_grpc.InferenceStub(both)
    direct_a = grpc.insecure_channel(target_a)
    f.check(h.health_check(direct_a) == "SERVING", "A is SERVING before SIGTERM")

    watch = dict(statuses=[], code=None, ended_at=None)
    watcher = threading.Thread(target=watch_health, args=(direct_a, watch))
    watcher.start()

    results = [new_result() for _ in range(NUM_STREAMS)]
    threads = [threading.Thread(target=run_stream, args=(
        stub, pb2, h.generate_request(pb2, max_tokens=MAX_TOKENS, request_id=f"s{i}"), r,
        DRAIN_TIMEOUT_S + 30)) for i, r in enumerate(results)]
    for t in threads:
        t.start()
    for r in results:
        r["first"].wait(timeout=60)
    mid_stream = [r["tokens"] for r in results]
    f.check(all(0 < n < MAX_TOKENS for n in mid_stream),
            f"every stream is mid-way at SIGTERM (tokens so far {mid_stream})")
    load_a = pb2_grpc.InferenceStub(direct_a).GetLoad(pb2.GetLoadRequest(), timeout=20)
    f.check(load_a.running == NUM_STREAMS,
            f"the channel over both replicas runs its streams on A ({load_a.running} running)")

    sigterm_at = time.monotonic()
    proc_a.send_signal(signal.SIGTERM)
    time.sleep(0.3)  # the server's signal thread starts the drain at once
    got = fresh_health(target_a)
    f.check(got in ("NOT_SERVING", "UNAVAILABLE"),
            f"a new connection to A is refused or reads NOT_SERVING right after SIGTERM ({got})")
    after = new_result()
    run_stream(stub, pb2, h.generate_request(pb2, max_tokens=8, request_id="after"), after, 60)
    f.check(after["code"] == grpc.StatusCode.OK and after["tokens"] == 8,
            f"a new Generate on the same channel during A's drain is served elsewhere "
            f"(status {after['code']}, {after['tokens']}/8 tokens)")
    still_running = sum(1 for t in threads if t.is_alive())
    f.check(still_running > 0, f"A's streams were still in flight during the checks "
            f"({still_running})")

    for t in threads:
        t.join(timeout=DRAIN_TIMEOUT_S + 30)
    for i, r in enumerate(results):
        f.check(r["code"] == grpc.StatusCode.OK and r["tokens"] == MAX_TOKENS and
                r["finish"] == pb2.FINISH_REASON_LENGTH,
                f"stream {i} completed: status {r['code']}, {r['tokens']}/{MAX_TOKENS} tokens, "
                f"finish {r['finish']}")
    watcher.join(timeout=DRAIN_TIMEOUT_S + 30)
    watch_end = watch["ended_at"]
    last_stream = max(r["ended_at"] or time.monotonic() for r in results)
    f.check(watch["statuses"][:1] == ["SERVING"] and watch_end is not None and
            watch_end - last_stream < EXIT_AFTER_LAST_STREAM_S,
            f"the health Watch on A saw SERVING and ended soon after A's last stream "
            f"({watch['statuses']}, {watch['code']}, "
            f"{(watch_end or 0) - last_stream:.1f} s after it)")
    try:
        rc = proc_a.wait(timeout=DRAIN_TIMEOUT_S + 10)
    except Exception:  # noqa: BLE001 — a hang is a failure, the harness kills it
        rc = None
    exited_at = time.monotonic()
    f.check(rc == 0, f"A exited with status 0 (got {rc})")
    f.check(exited_at - last_stream < EXIT_AFTER_LAST_STREAM_S,
            f"A exited soon after its last stream ({exited_at - last_stream:.1f} s after it, "
            f"{exited_at - sigterm_at:.1f} s after SIGTERM; --drain-timeout-s={DRAIN_TIMEOUT_S})")
    both.close()
    direct_a.close()


def check_second_signal(f, pb2, pb2_grpc, proc_b, port_b):
    with grpc.insecure_channel(f"127.0.0.1:{port_b}") as channel:
        long_stream = new_result()
        request = h.generate_request(pb2, max_tokens=480, request_id="long")
        t = threading.Thread(target=run_stream, args=(
            pb2_grpc.InferenceStub(channel), pb2, request, long_stream, DRAIN_TIMEOUT_S + 30))
        t.start()
        long_stream["first"].wait(timeout=60)
        proc_b.send_signal(signal.SIGINT)
        time.sleep(0.5)
        second_at = time.monotonic()
        proc_b.send_signal(signal.SIGINT)
        try:
            rc = proc_b.wait(timeout=DRAIN_TIMEOUT_S + 10)
        except Exception:  # noqa: BLE001
            rc = None
        took = time.monotonic() - second_at
        f.check(rc == 128 + signal.SIGINT and took < 3,
                f"a second Ctrl-C during the drain exits at once (status {rc}, {took:.1f} s; "
                f"the stream had {long_stream['tokens']}/480 tokens)")
        t.join(timeout=30)


def signals_blocked(pid):
    """True once the process's main thread blocks SIGINT and SIGTERM (its first step)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("SigBlk:"):
                mask = int(line.split()[1], 16)
                return all(mask & (1 << (s - 1)) for s in (signal.SIGINT, signal.SIGTERM))
    return False


def check_signal_while_loading(f, server):
    """A FIFO as the model keeps the server in its load (open blocks until a writer comes): a
    signal then ends it at once, 128 + the signal, with nothing to drain."""
    with tempfile.TemporaryDirectory() as tmp:
        fifo = os.path.join(tmp, "model.gguf")
        os.mkfifo(fifo)
        proc = h.spawn([server, f"--model={fifo}", "--backend=cpu", "--host=127.0.0.1",
                        f"--port={h.free_port()}", "--metrics-port=-1"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not signals_blocked(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # well into the load: the model's open blocks on the FIFO
        sent_at = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        took = time.monotonic() - sent_at
        err = proc.stderr.read()
        f.check(rc == 128 + signal.SIGTERM and took < 3 and "before serving" in err,
                f"SIGTERM while loading exits at once (status {rc}, {took:.1f} s; "
                f"stderr {err.strip()[-160:]!r})")


def check_drain_timeout(f, args, pb2, pb2_grpc):
    """Streams still open when --drain-timeout-s runs out: one running (far from its end) and
    one queued behind it (--max-num-seqs=1) both end with UNAVAILABLE, cut short, and the server
    exits 0 soon after the timeout."""
    timeout_s = 1
    proc, port, _ = h.start_server(args.server, [f"--drain-timeout-s={timeout_s}",
                                                 "--max-num-seqs=1"])
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb2_grpc.InferenceStub(channel)
        running, queued = new_result(), new_result()
        threads = [threading.Thread(target=run_stream, args=(
            stub, pb2, h.generate_request(pb2, max_tokens=480, request_id=rid), r, 120))
            for rid, r in (("running", running), ("queued", queued))]
        threads[0].start()  # "running" first, streaming before "queued" is sent
        running["first"].wait(timeout=60)
        threads[1].start()
        deadline = time.monotonic() + 30
        while True:
            load = stub.GetLoad(pb2.GetLoadRequest(), timeout=20)
            if load.waiting >= 1 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        f.check(load.running == 1 and load.waiting == 1,
                f"drain timeout: one stream runs and one waits at SIGTERM "
                f"({load.running} running, {load.waiting} waiting)")
        sigterm_at = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=timeout_s + 20)
        except subprocess.TimeoutExpired:
            rc = None
        took = time.monotonic() - sigterm_at
        for t in threads:
            t.join(timeout=30)
        f.check(rc == 0 and took < timeout_s + EXIT_AFTER_LAST_STREAM_S,
                f"drain timeout: the server exits 0 soon after --drain-timeout-s={timeout_s} "
                f"(status {rc}, {took:.1f} s after SIGTERM)")
        for name, r in (("running", running), ("queued", queued)):
            f.check(r["code"] == grpc.StatusCode.UNAVAILABLE and r["tokens"] < 480,
                    f"drain timeout: the {name} stream ends with UNAVAILABLE (status "
                    f"{r['code']}, {r['tokens']}/480 tokens)")
    if f.items:
        h.dump_log(proc)


def main():
    args, pb2, pb2_grpc, f = h.begin_test()
    check_signal_while_loading(f, args.server)
    proc_a, port_a, _ = h.start_server(args.server, [f"--drain-timeout-s={DRAIN_TIMEOUT_S}"])
    proc_b, port_b, _ = h.start_server(args.server, [f"--drain-timeout-s={DRAIN_TIMEOUT_S}"])
    check_drain(f, args, pb2, pb2_grpc, proc_a, port_a, port_b)
    check_second_signal(f, pb2, pb2_grpc, proc_b, port_b)
    check_drain_timeout(f, args, pb2, pb2_grpc)
    if f.items:
        h.dump_log(proc_a)
        h.dump_log(proc_b)
    return f.report()


if __name__ == "__main__":
    sys.exit(main())
