#!/usr/bin/env python3
"""scripts/lib/skip_reasons.py on a hand-written ctest JUnit report: a GoogleTest skip gives the
message after "Skipped", an exit-77 script its first line of output, a test with no output says
so, a GoogleTest skip without a message says that, a test ctest could not run is "not run", more
than three tests skipped for one reason are one line, and passed or failed tests print
nothing."""

import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "scripts", "lib", "skip_reasons.py")

REPORT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="x" tests="5" failures="1" skipped="3">
  <testcase name="Gtest.Skips" status="notrun"><skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
    <system-out>[ RUN      ] Gtest.Skips
tests/a_test.cc:12: Skipped
no NVML here

[  SKIPPED ] Gtest.Skips (0 ms)
</system-out></testcase>
  <testcase name="deploy_k8s" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/>
    <system-out>
kubectl not found: the manifests are not rendered
</system-out></testcase>
  <testcase name="silent" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/></testcase>
  <testcase name="Gtest.Bare" status="notrun"><skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
    <system-out>tests/b_test.cc:3: Skipped

[  SKIPPED ] Gtest.Bare (0 ms)
</system-out></testcase>
  <testcase name="missing_binary" status="notrun"><skipped message="Unable to find executable"/>
  </testcase>
  <testcase name="Gpu.A" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/>
    <system-out>no CUDA device: GPU tests skipped (0 devices)</system-out></testcase>
  <testcase name="Gpu.B" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/>
    <system-out>no CUDA device: GPU tests skipped (0 devices)</system-out></testcase>
  <testcase name="Gpu.C" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/>
    <system-out>no CUDA device: GPU tests skipped (0 devices)</system-out></testcase>
  <testcase name="Gpu.D" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/>
    <system-out>no CUDA device: GPU tests skipped (0 devices)</system-out></testcase>
  <testcase name="passes" status="run"><system-out>ok</system-out></testcase>
  <testcase name="fails" status="fail"><failure message="Failed"/></testcase>
</testsuite>
"""

WANT = [
    "test.sh: skipped Gtest.Skips: no NVML here",
    "test.sh: skipped deploy_k8s: kubectl not found: the manifests are not rendered",
    "test.sh: skipped silent: (no output)",
    "test.sh: skipped Gtest.Bare: (no message)",
    "test.sh: not run missing_binary: Unable to find executable",
    # More than three tests skipped for one reason: one line.
    "test.sh: skipped 4 tests (Gpu.A, Gpu.B, Gpu.C, ...): no CUDA device: GPU tests skipped "
    "(0 devices)",
]


def main() -> int:
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
        f.write(REPORT)
    try:
        out = subprocess.run([sys.executable, TOOL, f.name], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    finally:
        os.unlink(f.name)
    if out != WANT:
        print(f"skip_reasons printed {out!r}, want {WANT!r}")
        return 1
    print(f"skip_reasons: {len(WANT)} tests not run, each with its reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
