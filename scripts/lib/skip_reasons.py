#!/usr/bin/env python3
"""Prints why each test ctest skipped, from its JUnit report (ctest --output-junit): ctest shows
no output of a skipped test, so a missing tool or device would otherwise go unexplained.

Usage: skip_reasons.py JUNIT_XML. One line a skipped test: "test.sh: skipped NAME: REASON",
the reason being GoogleTest's message after "Skipped", else the test's first line of output;
more than GROUP_AT tests not run for one reason (each GPU test without a device) are one line,
"test.sh: skipped N tests (A, B, C, ...): REASON". A test ctest could not run (its report marks
it skipped too, but counts it failed) is "not run" with ctest's message."""

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


GROUP_AT = 3  # more tests than this skipped for one reason: one line for them all


def main() -> int:
    root = ET.parse(sys.argv[1]).getroot()
    groups = {}  # (kind, reason) -> test names, in the order first met
    for case in root.iter("testcase"):
        skipped = case.find("skipped")
        if skipped is None:
            continue
        message = skipped.get("message", "")
        if message.startswith("SKIP_"):  # SKIP_RETURN_CODE=77, SKIP_REGULAR_EXPRESSION_...
            out = case.find("system-out")
            key = ("skipped", reason(out.text if out is not None and out.text else ""))
        else:
            key = ("not run", message or "(no message)")
        groups.setdefault(key, []).append(case.get("name"))
    for (kind, why), names in groups.items():
        if len(names) > GROUP_AT:
            print(f"test.sh: {kind} {len(names)} tests ({', '.join(names[:GROUP_AT])}, ...): "
                  f"{why}")
        else:
            for name in names:
                print(f"test.sh: {kind} {name}: {why}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
