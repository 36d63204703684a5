#!/usr/bin/env python3
"""Counts test cases from a `bazel test` run, for the final summary line.

Usage: count_tests.py BAZEL_OUTPUT_LOG TESTLOGS_DIR
Prints "<passed> <failed>". Each test target contributes the test cases in
its test.xml (GoogleTest writes one <testcase> per TEST; Bazel writes one for
other tests). A target that did not build or run counts as one failure, so a
broken build can never look green.
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

STATUS = re.compile(
    r"^(//\S+)\s+(?:\(cached\)\s+)?(PASSED|FAILED|FLAKY|TIMEOUT|NO STATUS|"
    r"FAILED TO BUILD|INCOMPLETE|SKIPPED)\b")


def cases(xml_path):
    """Returns (passed, failed) test cases in one test.xml, or None."""
    try:
        root = ET.parse(xml_path).getroot()
    except (OSError, ET.ParseError):
        return None
    passed = failed = 0
    for case in root.iter("testcase"):
        if case.get("status") == "notrun" or case.find("skipped") is not None:
            continue
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        else:
            passed += 1
    return (passed, failed) if passed + failed else None


def main():
    log_path, testlogs = sys.argv[1], sys.argv[2]
    passed = failed = 0
    seen = set()
    with open(log_path, errors="replace") as log:
        for line in log:
            m = STATUS.match(line.strip())
            if not m or m.group(1) in seen:
                continue
            target, status = m.group(1), m.group(2)
            seen.add(target)
            if status == "SKIPPED":
                continue
            pkg, _, name = target[2:].partition(":")
            counted = cases(os.path.join(testlogs, pkg, name, "test.xml"))
            ok = status in ("PASSED", "FLAKY")
            if counted is None:
                counted = (1, 0) if ok else (0, 1)
            elif not ok and counted[1] == 0:
                counted = (counted[0], 1)  # e.g. a crash after the last case
            passed += counted[0]
            failed += counted[1]
    if not seen:
        failed += 1  # bazel printed no test results at all: the build failed
    print(passed, failed)


if __name__ == "__main__":
    main()
