#!/usr/bin/env python3
"""End-to-end: starts rtgen-server with the real model on a free port and checks that
client/python/example_client.py streams a chat answer from it (ctest: python_example_client);
then against a server that wants a bearer token: refused without it (status 1, UNAUTHENTICATED),
answered with --auth-token; a negative --seed, an infinite --timeout, a port past 65535 and an
unreadable --tls-ca are usage errors naming the flag (status 2) before any call."""

import argparse
import os
import subprocess
import sys
import tempfile

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
    result = subprocess.run(
        [sys.executable, args.client, f"--target=127.0.0.1:{port}",
         "--prompt=What is the capital of France?", "--max-tokens=16", "--temperature=0",
         "--timeout=60"],
        capture_output=True, text=True, timeout=90)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    f = ops_harness.Failures()
    f.check(result.returncode == 0, f"example_client.py exited with {result.returncode}")
    f.check("Paris" in result.stdout, "the answer mentions Paris")
    f.check("finish=" in result.stderr and "generated_tokens=" in result.stderr,
            "a usage line on stderr")

    def client(port, *extra):
        return subprocess.run(
            [sys.executable, args.client, f"--target=127.0.0.1:{port}", "--prompt=Hi",
             "--max-tokens=4", "--temperature=0", "--timeout=60", *extra],
            capture_output=True, text=True, timeout=90)

    seed = client(port, "--seed=-1")
    f.check(seed.returncode == 2 and "--seed" in seed.stderr,
            f"--seed -1 is a usage error (status {seed.returncode}; {seed.stderr[-120:]!r})")
    # An infinite deadline failed at once (DEADLINE_EXCEEDED), port 99999 dialled 34463 and an
    # unreadable CA file was a traceback with status 1.
    for flag, extra in (("--timeout", ["--timeout=inf"]),
                        ("--target", ["--target=127.0.0.1:99999"]),
                        ("--tls-ca", ["--tls-ca=/no/such/rtgen/ca.pem"])):
        bad = client(port, *extra)
        f.check(bad.returncode == 2 and flag in bad.stderr and "Traceback" not in bad.stderr,
                f"{extra[0]} is a usage error naming {flag} (status {bad.returncode}; "
                f"{bad.stderr[-120:]!r})")
    with tempfile.NamedTemporaryFile("w", suffix=".tokens", delete=False) as tokens:
        tokens.write("# test token\nsecret-token-1\n")
    guarded, guarded_port, _ = ops_harness.start_server(
        args.server, model=args.model,
        extra_args=["--max-num-seqs=2", "--num-kv-blocks=32", f"--auth-token-file={tokens.name}"])
    refused = client(guarded_port)
    f.check(refused.returncode == 1 and "UNAUTHENTICATED" in refused.stderr,
            f"without a token: status 1, UNAUTHENTICATED ({refused.returncode}; "
            f"{refused.stderr[-120:]!r})")
    allowed = client(guarded_port, "--auth-token=secret-token-1")
    f.check(allowed.returncode == 0 and "finish=" in allowed.stderr,
            f"with --auth-token: answered (status {allowed.returncode}; "
            f"{allowed.stderr[-120:]!r})")
    os.unlink(tokens.name)
    if f.items:
        ops_harness.dump_log(server)
        ops_harness.dump_log(guarded)
    return f.report()  # the servers are killed at exit (ops_harness)


if __name__ == "__main__":
    sys.exit(main())
