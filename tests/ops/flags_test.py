#!/usr/bin/env python3
"""rtgen-server's command line: --help lists the flags; a stray positional argument (as in
`vllm serve MODEL`) and a negative --drain-timeout-s are refused before anything loads, each
with a message naming it, instead of serving the default model or skipping the drain. And
rtgen-bench's: --help prints the usage; a NaN or negative SLO bound is a usage error (it counted
every request within it, or none); a bad load or length is refused before connecting (it waited
out --wait-ready, then failed on GetModelInfo with exit 1); a flag given twice, an empty sweep
and --num-requests beside --requests-per-level are refused (the last flag won, one run at
concurrency 1 ran, and --num-requests was dropped)."""

import os
import subprocess
import sys
import time

import ops_harness as h


def run(binary, *args):
    done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=60,
                          cwd=h.SOURCE_DIR)
    return done.returncode, done.stdout + done.stderr


def main():
    args, _, _, f = h.begin_test()
    rc, out = run(args.server, "--help")
    f.check("--max_model_len" in out and "--drain_timeout_s" in out,
            f"--help lists the server's flags (status {rc}; {out[:120]!r})")
    rc, out = run(args.server, "/tmp/some-model.gguf", "--port=-5")
    f.check(rc != 0 and "unexpected argument '/tmp/some-model.gguf'" in out and
            "--model" in out, f"a positional argument is refused pointing at --model "
            f"(status {rc}; {out.strip()[:200]!r})")
    rc, out = run(args.server, "--drain-timeout-s=-1")
    f.check(rc != 0 and "drain-timeout-s" in out,
            f"a negative --drain-timeout-s is refused (status {rc}; {out.strip()[:200]!r})")
    bench = os.path.join(os.path.dirname(args.server), "rtgen-bench")
    rc, out = run(bench, "--help")
    f.check(rc == 0 and out.startswith("usage: rtgen-bench"),
            f"rtgen-bench --help prints the usage (status {rc}; {out[:80]!r})")
    for flag, value in (("--slo-ttft-ms", "nan"), ("--slo-tpot-ms", "-1")):
        rc, out = run(bench, "--target", "127.0.0.1:1", flag, value)
        f.check(rc == 2 and f"{flag}: must be a positive" in out,
                f"rtgen-bench {flag} {value} is a usage error (status {rc}; {out.strip()[:120]!r})")
    # Against a port nothing listens on, with a long --wait-ready: refused at once, by name.
    for extra, want in ((["--num-requests", "4", "--concurrency", "0"], "--concurrency"),
                        (["--num-requests", "4", "--duration", "-5"], "--duration"),
                        (["--num-requests", "4", "--output-len", "0"], "--output-len"),
                        (["--num-requests", "4", "--input-len", "1500000000"], "--input-len"),
                        (["--num-requests", "4", "--sweep-concurrency", ","],
                         "--sweep-concurrency: no level"),
                        (["--num-requests", "5", "--num-requests", "0"],
                         "--num-requests is given twice"),
                        (["--sweep-concurrency", "2", "--requests-per-level", "2",
                          "--num-requests", "100"], "--requests-per-level and --num-requests")):
        start = time.monotonic()
        rc, out = run(bench, "--target", "127.0.0.1:1", "--wait-ready", "30", *extra)
        took = time.monotonic() - start
        f.check(rc == 2 and want in out and took < 10,
                f"rtgen-bench {' '.join(extra)} is a usage error before connecting (status {rc}, "
                f"{took:.1f} s; {out.strip()[:120]!r})")
    return f.report()


if __name__ == "__main__":
    sys.exit(main())
