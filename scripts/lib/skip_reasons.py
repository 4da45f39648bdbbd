#!/usr/bin/env python3
"""Prints why each test ctest skipped, from its JUnit report (ctest --output-junit): ctest shows
no output of a skipped test, so a missing tool or device would otherwise go unexplained.

Usage: skip_reasons.py JUNIT_XML. One line a skipped test: "test.sh: skipped NAME: REASON",
the reason being GoogleTest's message after "Skipped", else the test's first line of output.
A test ctest could not run (its report marks it skipped too, but counts it failed) is "not run"
with ctest's message."""

import sys
import xml.etree.ElementTree as ET


def reason(output: str) -> str:
    lines = [line.strip() for line in output.splitlines()]
    for i, line in enumerate(lines):
        if line.endswith(": Skipped"):  # GoogleTest: "file:line: Skipped", then the message
            rest = [later for later in lines[i + 1:] if later]
            # GTEST_SKIP() without a message: its "[  SKIPPED ]" line comes next.
            return rest[0] if rest and not rest[0].startswith("[") else "(no message)"
    first = [line for line in lines if line]
    return first[0] if first else "(no output)"


def main() -> int:
    root = ET.parse(sys.argv[1]).getroot()
    for case in root.iter("testcase"):
        skipped = case.find("skipped")
        if skipped is None:
            continue
        message = skipped.get("message", "")
        if not message.startswith("SKIP_"):  # SKIP_RETURN_CODE=77, SKIP_REGULAR_EXPRESSION_...
            print(f"test.sh: not run {case.get('name')}: {message or '(no message)'}")
            continue
        out = case.find("system-out")
        text = out.text if out is not None and out.text else ""
        print(f"test.sh: skipped {case.get('name')}: {reason(text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
