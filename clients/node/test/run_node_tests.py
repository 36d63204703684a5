#!/usr/bin/python3
"""Runs the Node.js client's tests (`node --test`) under Bazel.

Usage: run_node_tests.py TEST_FILE...

Needs HUB_NODE_MODULES (the node_modules directory tools/setup.sh fills;
tools/test.sh passes it with --test_env) and HUBD (the hubd binary, set by
the BUILD rule). Node's TAP report is echoed and turned into one JUnit
<testcase> per Node test in $XML_OUTPUT_FILE, so that tools/count_tests.py
counts test cases, not just this target. Works with the TAP of Node 18
(each file a parent test) and Node 20 (flat).
"""
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

RESULT = re.compile(r"^( *)(ok|not ok) \d+ - (.*?)(?: # (SKIP|TODO)\b.*)?$")


def parse_tap(lines):
    """Returns [(name, outcome, detail)] for the leaf tests of a TAP report.

    A result line is a leaf unless the result line right before it is
    indented deeper (its subtests). outcome is pass, failure or skipped;
    detail is the YAML diagnostics block that follows a failure.
    """
    results = []
    previous_indent = -1
    i = 0
    while i < len(lines):
        m = RESULT.match(lines[i])
        i += 1
        if not m:
            continue
        indent = len(m.group(1))
        detail = []
        if i < len(lines) and lines[i].strip() == "---":
            j = i + 1
            while j < len(lines) and lines[j].strip() != "...":
                detail.append(lines[j][indent + 2:])
                j += 1
            i = j + 1
        is_leaf = previous_indent <= indent
        previous_indent = indent
        if not is_leaf:
            continue
        if m.group(4):
            outcome = "skipped"
        elif m.group(2) == "ok":
            outcome = "pass"
        else:
            outcome = "failure"
        results.append((m.group(3), outcome, "\n".join(detail)))
    return results


def write_xml(path, suite, results):
    suites = ET.Element("testsuites")
    ts = ET.SubElement(suites, "testsuite", name=suite, tests=str(len(results)))
    for name, outcome, detail in results:
        tc = ET.SubElement(ts, "testcase", name=name)
        if outcome in ("failure", "skipped"):
            ET.SubElement(tc, outcome, message=detail[:200]).text = detail
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


def main():
    files = sys.argv[1:]
    modules = os.environ.get("HUB_NODE_MODULES", "")
    if not os.path.isdir(os.path.join(modules, "@grpc", "grpc-js")):
        sys.exit("HUB_NODE_MODULES must name the node_modules directory holding "
                 "@grpc/grpc-js (got %r); run tools/setup.sh, and pass "
                 "--test_env=HUB_NODE_MODULES=... as tools/test.sh does" % modules)
    env = dict(os.environ)
    env["NODE_PATH"] = modules
    srcdir = os.environ.get("TEST_SRCDIR")
    if srcdir:
        env["HUB_PROTO_DIR"] = os.path.join(srcdir, os.environ["TEST_WORKSPACE"], "proto")
    proc = subprocess.run(["node", "--test", "--test-reporter=tap", *files], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stdout.write(proc.stdout)
    results = parse_tap(proc.stdout.splitlines())
    if proc.returncode != 0 and not any(r[1] == "failure" for r in results):
        results.append(("node --test", "failure",
                        "node exited with %d and no failing test case" % proc.returncode))
    if not results:
        results.append(("node --test", "failure", "node reported no test case"))
    xml_path = os.environ.get("XML_OUTPUT_FILE")
    if xml_path:
        write_xml(xml_path, "clients/node", results)
    failed = [r for r in results if r[1] == "failure"]
    print("%d node test cases, %d failed" % (len(results), len(failed)))
    sys.exit(1 if failed or proc.returncode != 0 else 0)


if __name__ == "__main__":
    main()
