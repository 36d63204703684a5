#!/usr/bin/python3
"""Runs every `buf curl` example of docs/api.md against a fresh hubd and
compares what it prints with the output the document shows.

The document marks its examples (docs/api.md, "How the examples are
checked"):

    ```sh example=NAME        the commands, run in one bash session in
                              document order ($BUF, $HUB and $ADDR are set;
                              variables, files and background jobs carry
                              over from one example to the next)
    ```sh grpcurl             the same call(s) with grpcurl: not run (grpcurl
                              is not installed here), but each must call the
                              same methods with the same request JSON
    ```json stdout            what the commands print on stdout: one or more
    ```text stdout            JSON documents (compared as JSON), or text
    ```json stderr            what they print on stderr (buf curl's error)
    ```json ErrorInfo         the google.rpc.ErrorInfo of that error, decoded

A missing stdout or stderr block means that stream must be empty. A comment
`# -> exit status N ... reason R` in the commands gives the expected exit
status (otherwise 0) and ErrorInfo reason (domain "hub.v1"). Values that
change from run to run are written as placeholders: <uuid>, <timestamp>,
<duration>, <fingerprint>, <path>, <base64>, <text>.

Each example is one test case named after it. With --record DOC the examples
run against a fresh hubd and their output blocks in DOC are rewritten from
what they printed, with placeholders filled in (for writing the document;
review the diff).
"""
import json
import os
import re
import select
import shlex
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hubtest  # noqa: E402

PLACEHOLDERS = {
    "uuid": r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    # Whole milliseconds: hub.v1 returns no finer times (hub.proto).
    "timestamp": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{3})?Z",
    "duration": r"\d+(?:\.\d{3})?s",
    "fingerprint": r"sqlite:[0-9a-f]{64}",
    "path": r"/[^\s\"]*",
    "base64": r"[A-Za-z0-9+/_=-]+",
    "text": r".*",
}
PLACEHOLDER = re.compile(r"<(%s)>" % "|".join(PLACEHOLDERS))
OUTPUT_TAGS = ("stdout", "stderr", "ErrorInfo")
EXPECT = re.compile(r"#\s*->\s*exit status (\d+)(?:.*?\breason ([A-Z_]+))?")
EXAMPLE_TIMEOUT_S = 90


# ---- the document ------------------------------------------------------------

class Block:
    def __init__(self, lang, tags, text, start, end):
        self.lang, self.tags, self.text = lang, tags, text
        self.start, self.end = start, end  # line indexes of the fences

    def tag(self, name):
        return name in self.tags


class Example:
    def __init__(self, name, block):
        self.name, self.block = name, block
        self.grpcurl = None
        self.outputs = {}  # tag -> Block

    @property
    def script(self):
        return self.block.text


def parse_blocks(lines):
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*(.*)$", lines[i])
        if not m or not m.group(1):
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        blocks.append(Block(m.group(1), m.group(2).split(), "\n".join(lines[i + 1:j]), i, j))
        i = j + 1
    return blocks


def parse_examples(text):
    """The examples of a document, in order, with their attached blocks."""
    examples, current = [], None
    for b in parse_blocks(text.split("\n")):
        names = [t[len("example="):] for t in b.tags if t.startswith("example=")]
        if names:
            current = Example(names[0], b)
            examples.append(current)
        elif current and b.tag("grpcurl") and current.grpcurl is None and not current.outputs:
            current.grpcurl = b
        elif current and len(b.tags) == 1 and b.tags[0] in OUTPUT_TAGS \
                and b.tags[0] not in current.outputs:
            current.outputs[b.tags[0]] = b
        else:
            current = None
    return examples


# ---- comparing with placeholders ---------------------------------------------

def string_pattern(expected):
    parts, pos = [], 0
    for m in PLACEHOLDER.finditer(expected):
        parts.append(re.escape(expected[pos:m.start()]))
        parts.append("(?:%s)" % PLACEHOLDERS[m.group(1)])
        pos = m.end()
    parts.append(re.escape(expected[pos:]))
    return re.compile("".join(parts) + r"\Z", re.S)


def mismatch(expected, actual, path="$"):
    """None when `actual` matches `expected`, else a description."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return "%s: expected an object, got %r" % (path, actual)
        if set(expected) != set(actual):
            return "%s: keys differ: missing %s, unexpected %s" % (
                path, sorted(set(expected) - set(actual)), sorted(set(actual) - set(expected)))
        for k in expected:
            m = mismatch(expected[k], actual[k], "%s.%s" % (path, k))
            if m:
                return m
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(expected) != len(actual):
            return "%s: expected %d elements, got %r" % (path, len(expected), actual)
        for i, (e, a) in enumerate(zip(expected, actual)):
            m = mismatch(e, a, "%s[%d]" % (path, i))
            if m:
                return m
        return None
    if isinstance(expected, str) and isinstance(actual, str):
        if string_pattern(expected).match(actual):
            return None
        return "%s: expected %r, got %r" % (path, expected, actual)
    if expected != actual or type(expected) != type(actual):
        return "%s: expected %r, got %r" % (path, expected, actual)
    return None


def json_documents(text):
    docs, decoder, i = [], json.JSONDecoder(), 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            return docs
        doc, i = decoder.raw_decode(text, i)
        docs.append(doc)


def error_info(stderr_text):
    """The decoded ErrorInfo of buf curl's error output (None if none)."""
    try:
        docs = json_documents(stderr_text)
    except ValueError:
        return None
    for doc in docs:
        for d in doc.get("details", []) if isinstance(doc, dict) else []:
            if d.get("type") == "google.rpc.ErrorInfo":
                return hubtest.decode_error_info(d["value"])
    return None


def compare_block(block, actual_text):
    """None when the output matches the block, else a description."""
    if block.lang == "json":
        try:
            actual = json_documents(actual_text)
        except ValueError as e:
            return "not JSON (%s): %r" % (e, actual_text[:2000])
        return mismatch(json_documents(on_this_store(block.text)), actual)
    exp_lines = block.text.rstrip("\n").split("\n")
    act_lines = actual_text.rstrip("\n").split("\n")
    if len(exp_lines) != len(act_lines):
        return "expected %d lines, got %d:\n%s" % (len(exp_lines), len(act_lines), actual_text)
    for e, a in zip(exp_lines, act_lines):
        if not string_pattern(e).match(a):
            return "line %r does not match %r" % (a, e)
    return None


# ---- grpcurl equivalence -----------------------------------------------------

def calls(script, tool):
    """(method, body) of every call of `tool` ("buf" or "grpcurl") in a
    script; body is the request JSON documents, or None when read from a
    file the script does not show."""
    lines = script.replace("\\\n", " ").split("\n")
    found = []
    for n, line in enumerate(lines):
        if tool == "buf" and "$BUF curl" not in line:
            continue
        if tool == "grpcurl" and not re.search(r"(^\s*|[|(;&]\s*)grpcurl\b", line):
            continue
        words = shlex.split(line, comments=True)
        if tool == "buf":
            methods = [w.split("$HUB/", 1)[1] for w in words if w.startswith("$HUB/")]
        else:
            methods = [w for w in words if re.fullmatch(r"[\w.]+/\w+", w)]
        if not methods:
            continue
        body = []
        for flag in ("-d", "--data"):
            if flag in words:
                body = words[words.index(flag) + 1]
        if body in ("@-", "@"):
            heredoc = re.search(r"<<-?\s*'?(\w+)'?", line)
            body = None
            if heredoc:
                end = next(i for i in range(n + 1, len(lines))
                           if lines[i].strip() == heredoc.group(1))
                body = "\n".join(lines[n + 1:end])
        if isinstance(body, str):
            body = json_documents(body)
        found.append((methods[0], body))
    return found


# ---- running -----------------------------------------------------------------

class Session:
    """One bash process the examples are typed into, in order."""

    def __init__(self, workdir, env):
        self.workdir = workdir
        self.proc = subprocess.Popen(
            ["/bin/bash", "--noprofile", "--norc"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, cwd=workdir, env=env)
        self.count = 0
        self.dead = None

    def run(self, script):
        """Runs a script; returns (exit status, stdout, stderr)."""
        if self.dead:
            raise RuntimeError(self.dead)
        self.count += 1
        n = self.count
        marker = "__example_done_%d__" % n
        self.proc.stdin.write((
            "{\n%s\n} >out.%d 2>err.%d </dev/null; echo $? >rc.%d; echo %s\n"
            % (script, n, n, n, marker)).encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + EXAMPLE_TIMEOUT_S
        line = b""
        while not line.startswith(marker.encode()):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                self.dead = "an earlier example did not finish within %d s" % EXAMPLE_TIMEOUT_S
                self.proc.kill()
                raise RuntimeError("did not finish within %d s" % EXAMPLE_TIMEOUT_S)
            line = self.proc.stdout.readline()
            if not line:
                self.dead = "the bash session ended"
                raise RuntimeError(self.dead)

        def read(name):
            with open(os.path.join(self.workdir, "%s.%d" % (name, n))) as f:
                return f.read()

        return int(read("rc").strip()), read("out"), read("err")

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(b"kill $(jobs -p) 2>/dev/null; wait; exit 0\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()


# HUB_API_DOC_STORE=postgres runs the same examples against a hubd on a
# PostgreSQL database the test starts itself: the API must answer the same on
# both stores, but for what names the store (its type and fingerprint) and
# BackupStore, which copies SQLite files only.
ON_POSTGRES = os.environ.get("HUB_API_DOC_STORE") == "postgres"
if ON_POSTGRES:
    PLACEHOLDERS["fingerprint"] = r"postgres:[0-9a-f]{64}"
    PLACEHOLDER = re.compile(r"<(%s)>" % "|".join(PLACEHOLDERS))
POSTGRES = []  # the server, when ON_POSTGRES


def on_this_store(text):
    """The document's expected text as this store answers it."""
    if ON_POSTGRES:
        text = text.replace('"storeType": "sqlite"', '"storeType": "postgres"')
        text = text.replace('"storePath": "<path>"', '"storePath": "<text>"')
    return text


def start(workdir):
    if ON_POSTGRES:
        if not POSTGRES:
            POSTGRES.append(hubtest.Postgres())
        name = "api_doc_%d" % len(POSTGRES)
        POSTGRES.append(name)
        POSTGRES[0].create_database(name)
        hubd = hubtest.Hubd(POSTGRES[0].url(name), log_dir=workdir)
    else:
        hubd = hubtest.Hubd(os.path.join(workdir, "hub.sqlite"))
    env = dict(os.environ, BUF=hubtest.buf_path(), HUB="http://" + hubd.address,
               ADDR=hubd.address)
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin:" + env.get("PATH", "")
    return hubd, Session(workdir, env)


def check(example, result):
    """None when an example's result matches the document, else why not."""
    rc, out, err = result
    m = EXPECT.search(example.script)
    want_rc = int(m.group(1)) if m else 0
    problems = []
    if rc != want_rc:
        problems.append("exit status %d, expected %d" % (rc, want_rc))
    if m and m.group(2):
        info = error_info(err) or {}
        if (info.get("reason"), info.get("domain")) != (m.group(2), "hub.v1"):
            problems.append("ErrorInfo %r, expected reason %s in domain hub.v1"
                            % (info, m.group(2)))
    for tag, actual in (("stdout", out), ("stderr", err)):
        block = example.outputs.get(tag)
        if block is None:
            if actual.strip():
                problems.append("unexpected %s:\n%s" % (tag, actual))
            continue
        why = compare_block(block, actual)
        if why:
            problems.append("%s differs from the document: %s\n--- %s was:\n%s"
                            % (tag, why, tag, actual))
    block = example.outputs.get("ErrorInfo")
    if block is not None:
        why = mismatch(json_documents(block.text), [error_info(err)])
        if why:
            problems.append("ErrorInfo differs from the document: %s" % why)
    return "\n".join(problems) or None


def doc_path():
    return os.environ.get("API_DOC") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "api.md")


class ApiDocExamplesTest(unittest.TestCase):
    """One case per example, in document order, against one hubd."""

    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.mkdtemp(prefix="api_doc.", dir=hubtest.tmpdir())
        cls.hubd, cls.session = start(cls.workdir)

    @classmethod
    def tearDownClass(cls):
        cls.session.close()
        cls.hubd.stop()
        if POSTGRES:
            POSTGRES[0].stop()
            del POSTGRES[:]

    def run_example(self, example):
        if ON_POSTGRES and any(m.endswith("/BackupStore")
                               for m, _ in calls(example.script, "buf")):
            self.skipTest("BackupStore copies SQLite files; on PostgreSQL "
                          "it answers BACKUP_UNSUPPORTED (test_998)")
        result = self.session.run(example.script)
        why = check(example, result)
        if why:
            self.fail("docs/api.md example %s (line %d): %s"
                      % (example.name, example.block.start + 1, why))


    def test_998_backup_store_on_postgres_names_the_tools_to_use(self):
        if not ON_POSTGRES:
            self.skipTest("SQLite: the documented examples back it up")
        code, out, err = hubtest.buf_curl(
            self.hubd.address, "hub.v1.AdminService/BackupStore", {})
        self.assertNotEqual(code, 0, out)
        info = error_info(err) or {}
        self.assertEqual(info.get("reason"), "BACKUP_UNSUPPORTED", err)
        self.assertIn("pg_dump", err)

    def test_999_every_rpc_the_hub_serves_has_an_example(self):
        code, out, err = hubtest.buf_curl(self.hubd.address, "", extra=["--list-methods"])
        self.assertEqual(code, 0, err)
        served = {m for m in out.split() if m.startswith("hub.v1.")}
        served.add("grpc.health.v1.Health/Check")
        self.assertGreater(len(served), 20)
        called = {m for ex in EXAMPLES for m, _ in calls(ex.script, "buf")}
        self.assertEqual(sorted(served - called), [], "RPCs without a buf curl example")


class ApiDocStructureTest(unittest.TestCase):
    def test_every_example_has_a_grpcurl_twin_calling_the_same_methods(self):
        for ex in EXAMPLES:
            buf = calls(ex.script, "buf")
            if not buf:
                continue
            self.assertIsNotNone(ex.grpcurl, "example %s has no grpcurl block" % ex.name)
            self.assertEqual(
                [(m, b) for m, b in buf],
                [(m, b if b is not None else None) for m, b in calls(ex.grpcurl.text, "grpcurl")],
                "example %s: the grpcurl block does not make the same calls" % ex.name)

    def test_example_names_are_unique(self):
        names = [ex.name for ex in EXAMPLES]
        self.assertEqual(len(names), len(set(names)))


def _load_examples():
    with open(doc_path()) as f:
        return parse_examples(f.read())


EXAMPLES = _load_examples()
for _i, _ex in enumerate(EXAMPLES):
    def _case(self, ex=_ex):
        self.run_example(ex)
    _case.__doc__ = "docs/api.md example %s" % _ex.name
    setattr(ApiDocExamplesTest, "test_%03d_%s" % (_i + 1, re.sub(r"\W", "_", _ex.name)), _case)


# ---- --record ----------------------------------------------------------------

def _generalize(value, key=None):
    if isinstance(value, dict):
        return {k: _generalize(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_generalize(v, key) for v in value]
    if not isinstance(value, str):
        return value
    if key == "uptime":
        return "<duration>"
    if key in ("storePath",):
        return "<path>"
    if key == "value":
        # Metadata that varies per run, or whose order does (a proto map with
        # more than one entry serializes in no fixed order).
        info = hubtest.decode_error_info(value)
        if len(info["metadata"]) > 1 or re.search(
                PLACEHOLDERS["uuid"] + "|" + PLACEHOLDERS["fingerprint"],
                json.dumps(info)):
            return "<base64>"
        return value
    for name in ("fingerprint", "timestamp", "uuid"):
        value = re.sub(PLACEHOLDERS[name], "<%s>" % name, value)
    return value


def _render(lang, tag, text):
    if lang == "json":
        body = "\n".join(json.dumps(_generalize(d), indent=2) for d in json_documents(text))
    else:
        body = text.rstrip("\n")
    return ["```%s %s" % (lang, tag)] + body.split("\n") + ["```"]


def record(path):
    with open(path) as f:
        lines = f.read().split("\n")
    examples = parse_examples("\n".join(lines))
    workdir = tempfile.mkdtemp(prefix="api_doc_record.")
    hubd, session = start(workdir)
    results = []
    try:
        for ex in examples:
            results.append(session.run(ex.script))
            print("%-40s exit %d" % (ex.name, results[-1][0]))
    finally:
        session.close()
        hubd.stop()
    for ex, (rc, out, err) in reversed(list(zip(examples, results))):
        if check(ex, (rc, out, err)) is None:
            continue  # still matches: keep the document's blocks as written
        new = []
        if out.strip():
            lang = ex.outputs["stdout"].lang if "stdout" in ex.outputs else "json"
            try:
                new += _render(lang, "stdout", out)
            except ValueError:
                new += _render("text", "stdout", out)
        if err.strip():
            new += _render("json", "stderr", err)
            info = error_info(err)
            if info:
                ordered = {k: info[k] for k in ("reason", "domain", "metadata")}
                new += ["```json ErrorInfo", json.dumps(_generalize(ordered), indent=2), "```"]
        last = max(b.end for b in [ex.block] + ([ex.grpcurl] if ex.grpcurl else []))
        for b in sorted(ex.outputs.values(), key=lambda b: -b.start):
            del lines[b.start:b.end + 1]
        lines[last + 1:last + 1] = new
    with open(path, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--record":
        record(sys.argv[2])
    else:
        hubtest.run_tests()
