#!/usr/bin/env python3
"""End-to-end: starts rtgen-server with the real model on a free port and checks that
client/python/example_client.py streams a chat answer from it (ctest: python_example_client)."""

import argparse
import socket
import subprocess
import sys
import time


def free_port():
    """A port the kernel just handed out (avoiding the 19464-19466 range used elsewhere)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not 19464 <= port <= 19466:
            return port


def wait_until_listening(port, server, timeout_s):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"rtgen-server exited early with status {server.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"rtgen-server did not listen on {port} within {timeout_s} s")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--client", required=True)
    args = parser.parse_args()

    port = free_port()
    server = subprocess.Popen(
        [args.server, f"--model={args.model}", "--backend=cpu", "--host=127.0.0.1",
         f"--port={port}", "--metrics-port=-1", "--max-num-seqs=4", "--max-model-len=512",
         "--num-kv-blocks=64", "--threads=2", "--log-format=json"])
    try:
        wait_until_listening(port, server, timeout_s=60)
        result = subprocess.run(
            [sys.executable, args.client, f"--target=127.0.0.1:{port}",
             "--prompt=What is the capital of France?", "--max-tokens=16", "--temperature=0",
             "--timeout=60"],
            capture_output=True, text=True, timeout=90)
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        failures = []
        if result.returncode != 0:
            failures.append(f"example_client.py exited with {result.returncode}")
        if "Paris" not in result.stdout:
            failures.append("the answer does not mention Paris")
        if "finish=" not in result.stderr or "generated_tokens=" not in result.stderr:
            failures.append("no usage line on stderr")
        for failure in failures:
            print(f"FAIL: {failure}", file=sys.stderr)
        return 1 if failures else 0
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    sys.exit(main())
