#!/usr/bin/env python3
"""--max-connection-age-s: the real rtgen-server closes a client's connection (GOAWAY) once it
is that old, and a client keeps working across it: it reconnects transparently, and a stream in
flight at the age finishes within the grace period."""

import sys
import threading
import time

import grpc

import ops_harness as h

AGE_S = 2
GRACE_S = 30
RUN_S = 7


def main():
    args, pb2, pb2_grpc, f = h.begin_test()
    proc, port, _ = h.start_server(args.server, [f"--max-connection-age-s={AGE_S}",
                                                 f"--max-connection-age-grace-s={GRACE_S}"])
    states = []
    lock = threading.Lock()

    def on_state(state):
        with lock:
            states.append(state)

    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    channel.subscribe(on_state, try_to_connect=True)
    stub = pb2_grpc.InferenceStub(channel)

    stream = {}

    def long_stream():
        try:
            responses = list(stub.Generate(h.generate_request(pb2, max_tokens=48), timeout=90))
            stream["tokens"] = sum(len(r.token_ids) for r in responses)
            stream["finish"] = responses[-1].finish_reason
        except grpc.RpcError as e:
            stream["error"] = e.code()

    streamer = threading.Thread(target=long_stream)
    streamer.start()  # opened on the first connection, runs past its max age
    calls, errors = 0, []
    start = time.time()
    while time.time() - start < RUN_S:
        try:
            stub.GetLoad(pb2.GetLoadRequest(), timeout=20)
        except grpc.RpcError as e:
            errors.append(f"{e.code()}: {e.details()}")
        calls += 1
        time.sleep(0.2)
    streamer.join(timeout=120)
    channel.unsubscribe(on_state)
    channel.close()
    proc.terminate()
    proc.wait(timeout=60)

    with lock:
        ready = sum(1 for s in states if s == grpc.ChannelConnectivity.READY)
        seen = [s.name for s in states]
    f.check(not errors, f"{calls} unary calls over {RUN_S} s all succeeded ({errors[:3]})")
    f.check(ready >= 2,
            f"the connection was closed at its max age and re-established ({ready} times READY;"
            f" states {seen})")
    f.check(stream.get("tokens") == 48 and stream.get("finish") == pb2.FINISH_REASON_LENGTH,
            f"a stream open across the max age completed within the grace ({stream})")
    if f.items:
        h.dump_log(proc)
    return f.report()


if __name__ == "__main__":
    sys.exit(main())
