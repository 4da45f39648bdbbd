"""Shared pieces of the tests/ops end-to-end tests: free ports, starting the real rtgen-server
(and other processes) so that every one of them is killed when the test ends, however it ends,
Python stubs generated from proto/ at run time, and raw grpc.health.v1 checks."""

import argparse
import atexit
import importlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_ROOT = os.path.join(SOURCE_DIR, "proto")
DEFAULT_MODEL = os.path.join(SOURCE_DIR, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

_children = []


def _kill_children():
    for proc in _children:
        if proc.poll() is None:
            proc.kill()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


atexit.register(_kill_children)
# ctest kills with SIGTERM on timeout: turn it into SystemExit so atexit runs.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def spawn(args, **kwargs):
    """Popen that is killed at exit unless it ended before."""
    proc = subprocess.Popen(args, **kwargs)
    _children.append(proc)
    return proc


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, timeout_s=60, what="rtgen-server"):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited early with status {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout_s} s")


def start_server(binary, extra_args=(), model=DEFAULT_MODEL, metrics=False, log_path=None):
    """Starts rtgen-server (CPU backend, real model) on free ports; returns (proc, port, mport).
    The server's log goes to log_path (default: a temp file, printed by dump_log)."""
    port = free_port()
    metrics_port = free_port() if metrics else -1
    if log_path is None:
        log_path = tempfile.mktemp(prefix="rtgen-server-", suffix=".log")
    log = open(log_path, "w")
    proc = spawn([binary, f"--model={model}", "--backend=cpu", "--host=127.0.0.1",
                  f"--port={port}", f"--metrics-port={metrics_port}", "--max-num-seqs=8",
                  "--max-model-len=512", "--num-kv-blocks=128", "--threads=2", *extra_args],
                 stdout=log, stderr=subprocess.STDOUT)
    proc.log_path = log_path
    wait_for_port(port, proc)
    if metrics:
        wait_for_port(metrics_port, proc, what="rtgen-server /metrics")
    return proc, port, metrics_port


def dump_log(proc, tail_lines=40):
    path = getattr(proc, "log_path", None)
    if path and os.path.exists(path):
        with open(path) as f:
            lines = f.readlines()[-tail_lines:]
        sys.stderr.write(f"--- last {len(lines)} lines of {path} ---\n" + "".join(lines))


def load_stubs():
    """Generates rtgen.v1 Python stubs into a temp dir and imports them: (pb2, pb2_grpc)."""
    from grpc_tools import protoc
    import grpc_tools

    out_dir = tempfile.mkdtemp(prefix="rtgen-stubs-")
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    proto = os.path.join(PROTO_ROOT, "rtgen", "v1", "inference.proto")
    if protoc.main(["grpc_tools.protoc", f"--proto_path={PROTO_ROOT}",
                    f"--proto_path={well_known}", f"--python_out={out_dir}",
                    f"--grpc_python_out={out_dir}", proto]) != 0:
        raise RuntimeError("protoc failed on inference.proto")
    sys.path.insert(0, out_dir)
    return (importlib.import_module("rtgen.v1.inference_pb2"),
            importlib.import_module("rtgen.v1.inference_pb2_grpc"))


HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def health_check(channel, service="", timeout=5, metadata=None):
    """grpc.health.v1.Health/Check with hand-encoded messages; returns the status name."""
    check = channel.unary_unary("/grpc.health.v1.Health/Check")
    request = b""
    if service:
        data = service.encode()
        request = b"\x0a" + bytes([len(data)]) + data
    response = check(request, timeout=timeout, metadata=metadata)
    if not response:
        return "UNKNOWN"
    if response[0] != 0x08:
        raise RuntimeError(f"unexpected HealthCheckResponse bytes {response!r}")
    return HEALTH_STATUS.get(response[1], str(response[1]))


def generate_request(pb2, prompt="Tell me a long story about a dragon.", max_tokens=64,
                     request_id=""):
    """A greedy request that always runs to max_tokens (ignore_eos)."""
    request = pb2.GenerateRequest(request_id=request_id, prompt=prompt)
    request.sampling.temperature = 0.0
    request.stopping.max_tokens = max_tokens
    request.stopping.ignore_eos = True
    return request


def begin_test(*extra_flags):
    """The common start of an ops test: parses --server (and each of `extra_flags`, all
    required), generates the stubs. Returns (args, pb2, pb2_grpc, Failures())."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    for flag in extra_flags:
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    pb2, pb2_grpc = load_stubs()
    return args, pb2, pb2_grpc, Failures()


class Failures:
    """Collects failed checks; report() prints them and returns the exit status."""

    def __init__(self):
        self.items = []

    def check(self, condition, message):
        if not condition:
            self.items.append(message)
            print(f"FAIL: {message}", file=sys.stderr)
        else:
            print(f"ok: {message}")
        return condition

    def report(self):
        print(f"{len(self.items)} failure(s)" if self.items else "all checks passed")
        return 1 if self.items else 0
