#!/usr/bin/env python3
"""Streams a chat answer from an rtgen server (rtgen.v1.Inference/Generate).

Quick start (grpcio and grpcio-tools from pip, in a venv on Debian; the stubs are generated
from proto/rtgen/v1/inference.proto into a temporary directory at start-up)::

    python3 -m venv /tmp/rtgen-py && /tmp/rtgen-py/bin/pip install grpcio grpcio-tools
    build/bin/rtgen-server &                     # serves on localhost:50051
    /tmp/rtgen-py/bin/python3 client/python/example_client.py --target localhost:50051 \
        --prompt "Tell me a joke" --max-tokens 64 --temperature 0.7 --seed 1

Against a server with TLS and bearer tokens add ``--tls-ca ca.pem`` (or ``--tls`` for the
system's roots) and ``--auth-token TOKEN`` (default: $RTGEN_AUTH_TOKEN); one that asks for client
certificates (``--tls-client-ca``) also wants ``--tls-cert client.pem --tls-key client.key``.

In your own code::

    request = inference_pb2.GenerateRequest(
        messages=inference_pb2.ChatMessages(messages=[
            inference_pb2.ChatMessage(role="user", content="Hi!")]),
        sampling=inference_pb2.SamplingParams(temperature=0.7),
        stopping=inference_pb2.StoppingParams(max_tokens=64))
    for response in stub.Generate(request, timeout=30):
        print(response.text, end="", flush=True)
        if response.finish_reason:           # only the last message has one
            print(response.usage)

The answer streams to stdout; a usage line goes to stderr. Exit status 0 on success, 1 when the
RPC fails (the gRPC status is printed), 2 for a bad flag (named), 130 on Ctrl-C (the server
cancels the request).
"""

import argparse
import importlib
import math
import os
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_ROOT = os.path.join(REPO_ROOT, "proto")
PROTO_FILE = "rtgen/v1/inference.proto"
# Longest --timeout: grpc's deadline arithmetic overflows somewhere past 1e9 s (1e10 failed at
# once with DEADLINE_EXCEEDED).
MAX_TIMEOUT_S = 1e8


def load_stubs(out_dir):
    """Generates inference_pb2 / inference_pb2_grpc into out_dir and imports them."""
    from grpc_tools import protoc

    import grpc_tools

    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    args = [
        "grpc_tools.protoc",
        f"--proto_path={PROTO_ROOT}",
        f"--proto_path={well_known}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        os.path.join(PROTO_ROOT, PROTO_FILE),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {PROTO_FILE}")
    sys.path.insert(0, out_dir)
    pb2 = importlib.import_module("rtgen.v1.inference_pb2")
    pb2_grpc = importlib.import_module("rtgen.v1.inference_pb2_grpc")
    return pb2, pb2_grpc


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="localhost:50051", help="HOST:PORT of rtgen-server")
    parser.add_argument("--prompt", default="Tell me a joke about dragons.")
    parser.add_argument("--system", default=None, help="optional system message")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=None, help="0 .. 2^64 - 1")
    parser.add_argument("--timeout", type=float, default=60.0, help="deadline in seconds")
    parser.add_argument("--tls", action="store_true", help="TLS with the system's root CAs")
    parser.add_argument("--tls-ca", default=None, help="PEM file of the CA that signed the server")
    parser.add_argument("--tls-cert", default=None,
                        help="PEM client certificate, for a server with --tls-client-ca")
    parser.add_argument("--tls-key", default=None, help="PEM private key of --tls-cert")
    parser.add_argument("--auth-token", default=os.environ.get("RTGEN_AUTH_TOKEN"),
                        help="bearer token (default: $RTGEN_AUTH_TOKEN)")
    args = parser.parse_args()
    if args.seed is not None and not 0 <= args.seed < 2**64:
        parser.error(f"--seed: must be within [0, 2^64 - 1], got {args.seed}")
    if not (math.isfinite(args.timeout) and 0 < args.timeout <= MAX_TIMEOUT_S):
        parser.error(f"--timeout: must be a number of seconds in (0, {MAX_TIMEOUT_S:g}], "
                     f"got {args.timeout}")
    # gRPC takes a numeric port modulo 65536 (localhost:99999 dialled port 34463).
    port = args.target.rpartition(":")[2]
    if (not args.target.startswith("unix:") and ":" in args.target and port.isdigit()
            and not 1 <= int(port) <= 65535):
        parser.error(f"--target: the port must be within [1, 65535], got {args.target!r}")
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key must be given together")
    pem = {}
    for flag in ("tls_ca", "tls_cert", "tls_key"):
        path = getattr(args, flag)
        if path is not None:
            try:
                with open(path, "rb") as f:
                    pem[flag] = f.read()
            except OSError as error:
                parser.error(f"--{flag.replace('_', '-')}: cannot read {path!r}: "
                             f"{error.strerror}")

    import grpc

    with tempfile.TemporaryDirectory(prefix="rtgen_stubs_") as stub_dir:
        pb2, pb2_grpc = load_stubs(stub_dir)
        messages = []
        if args.system:
            messages.append(pb2.ChatMessage(role="system", content=args.system))
        messages.append(pb2.ChatMessage(role="user", content=args.prompt))
        sampling = pb2.SamplingParams(temperature=args.temperature)
        if args.seed is not None:
            sampling.seed = args.seed
        request = pb2.GenerateRequest(
            messages=pb2.ChatMessages(messages=messages),
            sampling=sampling,
            stopping=pb2.StoppingParams(max_tokens=args.max_tokens),
        )
        if args.tls or pem:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=pem.get("tls_ca"), private_key=pem.get("tls_key"),
                certificate_chain=pem.get("tls_cert"))
            channel = grpc.secure_channel(args.target, credentials)
        else:
            channel = grpc.insecure_channel(args.target)
        metadata = [("authorization", f"Bearer {args.auth_token}")] if args.auth_token else None
        with channel:
            stub = pb2_grpc.InferenceStub(channel)
            last = None
            try:
                for response in stub.Generate(request, timeout=args.timeout, metadata=metadata):
                    sys.stdout.write(response.text)
                    sys.stdout.flush()
                    last = response
                sys.stdout.write("\n")
            except grpc.RpcError as error:
                sys.stdout.write("\n")
                print(f"generate failed: {error.code().name}: {error.details()}", file=sys.stderr)
                return 1
            except KeyboardInterrupt:  # leaving the channel cancels the call
                sys.stdout.write("\n")
                print("interrupted", file=sys.stderr)
                return 130
        if last is None or last.finish_reason == pb2.FINISH_REASON_UNSPECIFIED:
            print("generate failed: the stream ended without a finish reason", file=sys.stderr)
            return 1
        usage = last.usage
        print(
            f"[finish={pb2.FinishReason.Name(last.finish_reason).removeprefix('FINISH_REASON_').lower()}"
            f" prompt_tokens={usage.prompt_tokens} cached_tokens={usage.cached_tokens}"
            f" generated_tokens={usage.generated_tokens}"
            f" ttft={usage.time_to_first_token_seconds * 1e3:.1f}ms"
            f" total={usage.total_time_seconds * 1e3:.1f}ms]",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
