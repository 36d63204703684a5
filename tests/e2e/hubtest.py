"""Shared helpers for end-to-end tests that drive the real hubd binary.

Tests are plain unittest cases. run_tests() executes them and, under Bazel,
writes one JUnit <testcase> per test to $XML_OUTPUT_FILE so that the test
command counts cases, not just targets.
"""
import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest
import xml.etree.ElementTree as ET

SERVING = re.compile(r"serving on (\S+) db=(\S+) hub_instance_id=(\S+)")


def hubd_path():
    return os.path.abspath(os.environ["HUBD"])


def buf_path():
    buf = os.environ.get("HUB_BUF", "")
    if not buf or not os.access(buf, os.X_OK):
        raise RuntimeError(
            "HUB_BUF must name the buf binary; run tools/test.sh, which "
            "installs buf and passes it (--test_env=HUB_BUF=...)")
    return buf


def tmpdir():
    return os.environ.get("TEST_TMPDIR", "/tmp")


class Hubd:
    """A hubd process on a free loopback port, stopped with SIGTERM."""

    def __init__(self, db_path, *extra_args, listen="127.0.0.1:0", log_dir=None):
        """`db_path`: a SQLite file, or a PostgreSQL URL with `log_dir` for
        hubd's output."""
        self.db_path = db_path
        base = os.path.join(log_dir, "hubd") if log_dir else db_path
        self.log_path = base + ".stdout"
        self.err_path = base + ".stderr"
        self.proc = subprocess.Popen(
            [hubd_path(), "--listen=" + listen, "--db=" + db_path, *extra_args],
            stdout=open(self.log_path, "w"), stderr=open(self.err_path, "w"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with open(self.log_path) as f:
                m = SERVING.search(f.read())
            if m:
                self.address, self.store_path, self.instance_id = m.groups()
                return
            if self.proc.poll() is not None:
                raise RuntimeError("hubd exited early: " + self.stderr())
            time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError("hubd did not start within 60 s")

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)


def make_test_pki(directory):
    """A throw-away CA and certificates in `directory` (tests/make_test_pki.sh:
    ca.pem, server.pem/key, client.pem/key, other_ca.pem, other_client.*,
    other_server.*)."""
    script = os.environ.get("HUB_TEST_PKI_SCRIPT", "tests/make_test_pki.sh")
    subprocess.run(["sh", script, directory], check=True, timeout=60)
    return directory


def write_tokens(path, entries):
    """Writes a hubd token file: entries are (token, principal, kind, projects)."""
    with open(path, "w") as f:
        json.dump({"tokens": [{"token": t, "principal": p, "kind": k, "projects": list(pr)}
                              for t, p, k, pr in entries]}, f)
    return path


def buf_curl(address, method, body=None, extra=()):
    """Runs `buf curl` against hubd. Returns (exit code, stdout, stderr)."""
    cmd = [buf_path(), "curl", "--protocol", "grpc", "--http2-prior-knowledge",
           *extra, "http://%s/%s" % (address, method)]
    if body is not None:
        cmd += ["-d", json.dumps(body)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def _varint(data, i):
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def _fields(data):
    """Yields (field number, bytes) of the length-delimited fields of a
    protobuf message: enough to read google.rpc.ErrorInfo without protoc."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        if key & 7 != 2:
            raise ValueError("unexpected wire type %d" % (key & 7))
        n, i = _varint(data, i)
        yield key >> 3, data[i:i + n]
        i += n


def decode_error_info(value_b64):
    """google.rpc.ErrorInfo {reason = 1; domain = 2; map metadata = 3} from
    the base64 `value` buf curl prints (it does not resolve detail types)."""
    info = {"metadata": {}}
    raw = base64.b64decode(value_b64 + "=" * (-len(value_b64) % 4))
    for number, payload in _fields(raw):
        if number == 1:
            info["reason"] = payload.decode()
        elif number == 2:
            info["domain"] = payload.decode()
        elif number == 3:
            entry = dict(_fields(payload))
            info["metadata"][entry.get(1, b"").decode()] = entry.get(2, b"").decode()
    return info


def error_info(stderr_text):
    """The (code, ErrorInfo as dict) of a failed buf curl call."""
    err = json.loads(stderr_text)
    infos = [d.get("debug") or decode_error_info(d["value"])
             for d in err.get("details", []) if d.get("type") == "google.rpc.ErrorInfo"]
    return err.get("code"), (infos[0] if infos else {})


class _Result(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cases = []
        self._start = 0.0

    def startTest(self, test):
        self._start = time.monotonic()
        super().startTest(test)

    def _record(self, test, outcome, detail=""):
        self.cases.append((test.id(), outcome, detail, time.monotonic() - self._start))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failure", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)


def run_tests():
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules["__main__"])
    runner = unittest.TextTestRunner(resultclass=_Result, verbosity=2)
    result = runner.run(suite)
    xml_path = os.environ.get("XML_OUTPUT_FILE")
    if xml_path:
        suites = ET.Element("testsuites")
        ts = ET.SubElement(suites, "testsuite", name=os.path.basename(sys.argv[0]),
                           tests=str(len(result.cases)))
        for name, outcome, detail, secs in result.cases:
            tc = ET.SubElement(ts, "testcase", name=name, time="%.3f" % secs)
            if outcome in ("failure", "error", "skipped"):
                ET.SubElement(tc, outcome, message=detail[:200]).text = detail
        ET.ElementTree(suites).write(xml_path, encoding="utf-8", xml_declaration=True)
    sys.exit(0 if result.wasSuccessful() else 1)


class Postgres:
    """A throw-away PostgreSQL 15 server (like storage/pg/pg_test_server.h):
    initdb into a fresh directory under /tmp, listening only on a Unix
    socket there, run as `nobody` when the test runs as root (PostgreSQL
    refuses root; the Bazel target is tagged no-sandbox for it)."""

    BIN = "/usr/lib/postgresql/15/bin/"

    def __init__(self):
        import tempfile
        self.dir = tempfile.mkdtemp(prefix="hub-pg-e2e.", dir="/tmp")
        if os.geteuid() == 0:
            import pwd
            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
        self._run("initdb", "-D", self.dir + "/data", "-A", "trust", "-U", "hub",
                  "-E", "UTF8", "--locale=C.UTF-8", "--locale-provider=icu",
                  "--icu-locale=en-US", "--no-sync")
        options = ("-c listen_addresses= -c unix_socket_directories=%s "
                   "-c fsync=off -c full_page_writes=off -c synchronous_commit=off"
                   % self.dir)
        self._run("pg_ctl", "-D", self.dir + "/data", "-l", self.dir + "/server.log",
                  "-o", options, "-w", "-t", "60", "start")

    def _run(self, program, *args, stdin=None):
        prefix = []
        if os.geteuid() == 0:
            prefix = ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup",
                      "--clear-groups"]
        r = subprocess.run(prefix + [self.BIN + program, *args], cwd=self.dir,
                           capture_output=True, text=True, input=stdin, timeout=120)
        if r.returncode != 0:
            raise RuntimeError("%s failed: %s%s" % (program, r.stdout, r.stderr))
        return r.stdout

    def url(self, database):
        """A libpq URI for `database` as the superuser `hub`."""
        return "postgresql://hub@/%s?host=%s" % (database, self.dir)

    def create_database(self, name):
        self._run("createdb", "-h", self.dir, "-U", "hub", name)

    def sql(self, database, statement):
        """Runs `statement` with psql; its rows as tab-separated lines."""
        return self._run("psql", "-h", self.dir, "-U", "hub", "-d", database, "-XAtq",
                         "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", statement).strip()

    def stop(self):
        try:
            self._run("pg_ctl", "-D", self.dir + "/data", "-m", "immediate", "-w", "stop")
        finally:
            import shutil
            shutil.rmtree(self.dir, ignore_errors=True)
