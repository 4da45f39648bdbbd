#!/usr/bin/env python3
"""End-to-end: starts rtgen-server (CPU backend, the real model, a free port), runs rtgen-bench
for 10 requests at concurrency 2 with short outputs, and checks its JSON report (ctest:
rtgen_bench_end_to_end)."""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ops"))
import ops_harness  # noqa: E402  (shared: free ports, server start, cleanup at exit)
import tempfile

NUM_REQUESTS = 10
INPUT_LEN = 24
OUTPUT_LEN = 6


def check_report(report):
    """Returns a list of what is wrong with the report."""
    failures = []
    def expect(condition, what):
        if not condition:
            failures.append(what)
    expect(report.get("num_requests") == NUM_REQUESTS, f"num_requests != {NUM_REQUESTS}")
    expect(report.get("completed") == NUM_REQUESTS, "not every request completed")
    expect(report.get("failed") == 0 and report.get("errors") == {}, "errors reported")
    expect(report.get("output_tokens") == NUM_REQUESTS * OUTPUT_LEN,
           "output tokens are not exactly num_requests * output_len (ignore_eos + max_tokens)")
    expect(report.get("input_tokens") == NUM_REQUESTS * INPUT_LEN, "input tokens differ")
    duration = report.get("duration_s", 0)
    expect(0 < duration < 600, "duration_s out of range")
    expect(abs(report.get("requests_per_s", 0) - NUM_REQUESTS / max(duration, 1e-9)) < 1e-6,
           "requests_per_s != completed / duration")
    expect(report.get("output_tokens_per_s", 0) > 0, "no output throughput")
    for metric, count in (("ttft_ms", NUM_REQUESTS), ("tpot_ms", NUM_REQUESTS),
                          ("e2e_ms", NUM_REQUESTS), ("itl_ms", NUM_REQUESTS * (OUTPUT_LEN - 1))):
        s = report.get(metric, {})
        expect(s.get("count") == count, f"{metric}.count != {count}")
        expect(0 < s.get("p50", 0) <= s.get("p90", 0) <= s.get("p99", 0) <= s.get("max", 0),
               f"{metric} percentiles not positive and ordered")
    ttft, e2e = report.get("ttft_ms", {}), report.get("e2e_ms", {})
    expect(ttft.get("mean", 0) < e2e.get("mean", 0), "TTFT is not below end-to-end latency")
    expect(report.get("good") == NUM_REQUESTS, "a generous SLO was missed")
    # The workload as run: the synthetic lengths with their ranges, no prompts file.
    expect(report.get("input_len") == INPUT_LEN and report.get("output_len") == OUTPUT_LEN,
           "input_len / output_len differ from the flags")
    expect(report.get("input_len_range") == 0 and report.get("output_len_range") == 0,
           "the length ranges are missing")
    expect("prompts_file" not in report, "a prompts file named for synthetic prompts")
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--bench", required=True)
    parser.add_argument("--model", required=True)
    args = parser.parse_args()

    server, port, _ = ops_harness.start_server(
        args.server, model=args.model,
        extra_args=["--max-num-seqs=4", "--max-model-len=256", "--log-level=warn"])
    f = ops_harness.Failures()
    with tempfile.TemporaryDirectory() as tmp:
        output = os.path.join(tmp, "report.json")
        result = subprocess.run(
            [args.bench, f"--target=127.0.0.1:{port}", "--wait-ready=30", "--concurrency=2",
             f"--num-requests={NUM_REQUESTS}", "--warmup=1", f"--input-len={INPUT_LEN}",
             f"--output-len={OUTPUT_LEN}", "--slo-ttft-ms=60000", "--slo-tpot-ms=60000",
             f"--output={output}", "--no-progress"],
            capture_output=True, text=True, timeout=150)
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        f.check(result.returncode == 0, f"rtgen-bench exited with {result.returncode}")
        f.check("TTFT" in result.stdout and "TPOT" in result.stdout, "a table on stdout")
        if f.check(os.path.exists(output), "--output was written"):
            with open(output) as out:
                for failure in check_report(json.load(out)):
                    f.check(False, failure)
        # Past the server's context (256): a usage error at once, not a run of refused requests.
        too_long = subprocess.run(
            [args.bench, f"--target=127.0.0.1:{port}", "--num-requests=2", "--input-len=200",
             "--output-len=100", "--no-progress"],
            capture_output=True, text=True, timeout=60)
        f.check(too_long.returncode == 2 and "past the server's context of 256" in too_long.stderr,
                f"a request longer than the context is a usage error (status "
                f"{too_long.returncode}; {too_long.stderr.strip()[-160:]!r})")
        # A short CSV is written at the file's close: a failure there is an error, exit 1.
        full = subprocess.run(
            [args.bench, f"--target=127.0.0.1:{port}", "--sweep-concurrency=1",
             "--num-requests=2", "--input-len=8", "--output-len=4", "--csv=/dev/full",
             "--no-progress"],
            capture_output=True, text=True, timeout=60)
        f.check(full.returncode == 1 and "--csv: cannot write /dev/full" in full.stderr,
                f"a CSV that cannot be written fails the run (status {full.returncode}; "
                f"{full.stderr.strip()[-160:]!r})")
        # Flags refused before any request, each naming itself (usage error, exit 2).
        target = f"--target=127.0.0.1:{port}"
        for flags, message in [
                (["--target=localhost:99999"], "--target port must be within [1, 65535]"),
                ([target, "--wait-ready=nan"], "--wait-ready: must be a number of seconds"),
                ([target, "--wait-ready=-1"], "--wait-ready: must be a number of seconds"),
                ([target, "--requests-per-level=3"], "--requests-per-level needs --sweep"),
                ([target, "--sweep-concurrency=1", "--requests-per-level=0"],
                 "--requests-per-level: must be at least 1"),
                ([target, "--sweep-concurrency=1,4096", "--requests-per-level=600000"],
                 "x concurrency 4096 requests is past 2147483647"),
                ([target, "--csv=x.csv"], "--csv needs --sweep-concurrency"),
                ([target, "--sweep-concurrency=1,2", "--concurrency=4"],
                 "--sweep-concurrency and --concurrency conflict"),
                ([target, "--prompts=/dev/null", "--input-len=8"],
                 "--input-len applies to synthetic prompts, not to --prompts"),
                ([target, "--prompts=/dev/null", "--output-len-range=0.5"],
                 "--output-len-range applies to synthetic prompts, not to --prompts")]:
            bad = subprocess.run([args.bench, *flags, "--no-progress"], capture_output=True,
                                 text=True, timeout=60)
            f.check(bad.returncode == 2 and message in bad.stderr,
                    f"{flags} is refused with {message!r} (status {bad.returncode}; "
                    f"{bad.stderr.strip()[:160]!r})")
    if f.items:
        ops_harness.dump_log(server)
    return f.report()  # the server is killed at exit (ops_harness)


if __name__ == "__main__":
    sys.exit(main())
