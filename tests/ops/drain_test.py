#!/usr/bin/env python3
"""Graceful drain of the real rtgen-server (CPU backend, SmolLM2): streams in flight at SIGTERM
finish with all their tokens, health turns NOT_SERVING at once, new Generate calls get
UNAVAILABLE, and the process exits 0 within --drain-timeout-s."""

import signal
import sys
import threading
import time

import grpc

import ops_harness as h

NUM_STREAMS = 4
MAX_TOKENS = 64
DRAIN_TIMEOUT_S = 40


def main():
    args, pb2, pb2_grpc, f = h.begin_test()

    proc, port, _ = h.start_server(args.server, [f"--drain-timeout-s={DRAIN_TIMEOUT_S}"])
    target = f"127.0.0.1:{port}"
    channel = grpc.insecure_channel(target)
    stub = pb2_grpc.InferenceStub(channel)
    f.check(h.health_check(channel) == "SERVING", "health is SERVING before SIGTERM")

    results = [dict(tokens=0, finish=None, code=None, first=threading.Event())
               for _ in range(NUM_STREAMS)]

    def run_stream(i):
        r = results[i]
        try:
            for response in stub.Generate(
                    h.generate_request(pb2, max_tokens=MAX_TOKENS, request_id=f"s{i}"),
                    timeout=DRAIN_TIMEOUT_S + 30):
                r["tokens"] += len(response.token_ids)
                if r["tokens"] > 0:
                    r["first"].set()
                if response.finish_reason:
                    r["finish"] = response.finish_reason
            r["code"] = grpc.StatusCode.OK
        except grpc.RpcError as e:
            r["code"] = e.code()
        finally:
            r["first"].set()

    threads = [threading.Thread(target=run_stream, args=(i,)) for i in range(NUM_STREAMS)]
    for t in threads:
        t.start()
    for r in results:
        r["first"].wait(timeout=60)
    mid_stream = [r["tokens"] for r in results]
    f.check(all(0 < n < MAX_TOKENS for n in mid_stream),
            f"every stream is mid-way at SIGTERM (tokens so far {mid_stream})")

    sigterm_at = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)  # the server's signal thread flips health and the drain flag at once
    f.check(h.health_check(channel) == "NOT_SERVING",
            "health is NOT_SERVING right after SIGTERM (existing connection)")
    with grpc.insecure_channel(target) as fresh:
        f.check(h.health_check(fresh) == "NOT_SERVING",
                "health is NOT_SERVING right after SIGTERM (new connection)")
        try:
            list(pb2_grpc.InferenceStub(fresh).Generate(h.generate_request(pb2, max_tokens=4),
                                                        timeout=10))
            code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            code = e.code()
        f.check(code == grpc.StatusCode.UNAVAILABLE,
                f"a new Generate during the drain gets UNAVAILABLE (got {code})")
    still_running = sum(1 for t in threads if t.is_alive())
    f.check(still_running > 0, f"streams were still in flight during the checks ({still_running})")

    for t in threads:
        t.join(timeout=DRAIN_TIMEOUT_S + 30)
    for i, r in enumerate(results):
        f.check(r["code"] == grpc.StatusCode.OK and r["tokens"] == MAX_TOKENS and
                r["finish"] == pb2.FINISH_REASON_LENGTH,
                f"stream {i} completed: status {r['code']}, {r['tokens']}/{MAX_TOKENS} tokens, "
                f"finish {r['finish']}")
    try:
        rc = proc.wait(timeout=DRAIN_TIMEOUT_S + 10)
    except Exception:  # noqa: BLE001 — a hang is a failure, the harness kills it
        rc = None
    elapsed = time.monotonic() - sigterm_at
    f.check(rc == 0, f"rtgen-server exited with status 0 (got {rc})")
    f.check(elapsed < DRAIN_TIMEOUT_S,
            f"exited within --drain-timeout-s={DRAIN_TIMEOUT_S} ({elapsed:.1f} s after SIGTERM)")
    channel.close()
    if f.items:
        h.dump_log(proc)
    return f.report()


if __name__ == "__main__":
    sys.exit(main())
