#!/usr/bin/env python3
"""End-to-end: starts rtgen-server with the real model on a free port and checks that
client/python/example_client.py streams a chat answer from it (ctest: python_example_client)."""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ops"))
import ops_harness  # noqa: E402  (shared: free ports, server start, cleanup at exit)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--client", required=True)
    args = parser.parse_args()

    server, port, _ = ops_harness.start_server(
        args.server, model=args.model,
        extra_args=["--max-num-seqs=4", "--num-kv-blocks=64", "--log-format=json"])
    try:
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
