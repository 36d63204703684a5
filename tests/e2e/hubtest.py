"""Shared helpers for end-to-end tests that drive the real hubd binary.

Tests are plain unittest cases. run_tests() executes them and, under Bazel,
writes one JUnit <testcase> per test to $XML_OUTPUT_FILE so that the test
command counts cases, not just targets.
"""
import base64
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import unittest
import xml.etree.ElementTree as ET

SERVING = re.compile(r"serving on (\S+) db=(\S+) hub_instance_id=(\S+)")


def hubd_path():
    return os.path.abspath(os.environ["HUBD"])


def hubctl_path():
    return os.path.abspath(os.environ["HUBCTL"])


class HubctlCalls:
    """For a unittest.TestCase with a hubd `self.hubd` and a class attribute
    PROJECT: runs the hubctl binary ($HUBCTL) against that hubd, in PROJECT
    ($HUB_PROJECT_ID), as `agent` ($HUB_AGENT_ID) or as no agent."""

    def env(self, agent=None):
        env = dict(os.environ)
        env["HUB_ADDR"] = self.hubd.address
        env["HUB_PROJECT_ID"] = self.PROJECT
        env.pop("HUB_AGENT_ID", None)
        if agent:
            env["HUB_AGENT_ID"] = agent
        return env

    def ctl(self, *args, agent=None, cwd=None):
        """(exit status, stdout, stderr) of `hubctl ARGS`."""
        r = subprocess.run([hubctl_path(), *args], capture_output=True, text=True,
                           timeout=60, env=self.env(agent), cwd=cwd)
        return r.returncode, r.stdout, r.stderr

    def ok(self, *args, agent=None, cwd=None):
        """The stdout of `hubctl ARGS`, which must exit 0."""
        code, out, err = self.ctl(*args, agent=agent, cwd=cwd)
        self.assertEqual(code, 0, "hubctl %s: %s" % (" ".join(args), err))
        return out

    def assert_each_has_its_own_help(self, commands):
        """`hubctl --help` lists each of `commands` ("jobs create"), and
        `hubctl COMMAND --help` prints its usage."""
        top = self.ok("--help")
        for command in commands:
            self.assertIn(command, top)
            self.assertIn("Usage: hubctl " + command, self.ok(*command.split(), "--help"))


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


def _all_fields(data):
    """Yields (field number, wire type, value) of a protobuf message: ints
    for varints, bytes for length-delimited fields."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        wire = key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            n, i = _varint(data, i)
            value = data[i:i + n]
            i += n
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value = data[i:i + size]
            i += size
        else:
            raise ValueError("unexpected wire type %d" % wire)
        yield key >> 3, wire, value


class ApiError(Exception):
    """A failed call: its gRPC status code name (e.g. "UNAVAILABLE"), message
    and google.rpc.ErrorInfo as a dict (reason, domain, metadata)."""

    def __init__(self, code, message, info):
        super().__init__("%s %s: %s" % (code, info.get("reason", ""), message))
        self.code, self.message, self.info = code, message, info

    @property
    def reason(self):
        return self.info.get("reason", "")


class Api:
    """hubd's public API from Python: the request and response types come
    from hubd's own server reflection (no .proto files, no generated code),
    requests and answers are JSON-shaped dicts as buf curl prints them.
    Much faster than a buf curl per call, for load tests."""

    def __init__(self, address, timeout=20):
        import grpc
        from google.protobuf import descriptor_pb2, descriptor_pool
        self._grpc = grpc
        self.address = address
        self.timeout = timeout
        self.channel = grpc.insecure_channel(address)
        files = {}
        pending = ["hub.v1.PresenceService", "hub.v1.RoleService",
                   "hub.v1.MessageService", "hub.v1.HubService"]
        reflect = self.channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
        requests = [bytes([4 << 3 | 2, len(sym)]) + sym.encode() for sym in pending]
        for answer in reflect(iter(requests), timeout=timeout):
            for number, _, value in _all_fields(answer):
                if number == 7:
                    raise RuntimeError("reflection refused: %r" % value)
                if number != 4:
                    continue
                for inner, _, raw in _all_fields(value):
                    if inner == 1:
                        fd = descriptor_pb2.FileDescriptorProto.FromString(raw)
                        files[fd.name] = fd
        self.pool = descriptor_pool.DescriptorPool()
        added = set()

        def add(name):
            if name in added:
                return
            for dep in files[name].dependency:
                add(dep)
            self.pool.Add(files[name])
            added.add(name)

        for name in sorted(files):
            add(name)
        self._methods = {}

    def close(self):
        self.channel.close()

    def _method(self, full, kind="unary_unary"):
        """The request type and a callable of `kind` (a grpc.Channel method
        name: unary_unary, unary_stream, stream_stream) for `full`."""
        from google.protobuf import message_factory
        if (full, kind) not in self._methods:
            service, name = full.split("/")
            method = self.pool.FindServiceByName(service).FindMethodByName(name)
            factory = message_factory.MessageFactory(self.pool)
            req = factory.GetPrototype(method.input_type)
            resp = factory.GetPrototype(method.output_type)
            self._methods[(full, kind)] = (req, getattr(self.channel, kind)(
                "/" + full, request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=resp.FromString))
        return self._methods[(full, kind)]

    def stream(self, method, body=None, timeout=None):
        """A server-streaming call (WatchRoles): a Stream of its answers."""
        from google.protobuf import json_format
        req_type, stub = self._method(method, "unary_stream")
        return Stream(self, stub(json_format.ParseDict(body or {}, req_type()),
                                 timeout=timeout))

    def bidi(self, method, frames, timeout=None):
        """A bidirectional call (Attach): `frames` yields request dicts (a
        generator may block for the next one); a Stream of the answers."""
        from google.protobuf import json_format
        req_type, stub = self._method(method, "stream_stream")
        requests = (json_format.ParseDict(f, req_type()) for f in frames)
        return Stream(self, stub(requests, timeout=timeout))

    def _api_error(self, e):
        """An ApiError for a grpc.RpcError, with its ErrorInfo when it has
        one."""
        info = {}
        for key, value in (e.trailing_metadata() or ()):
            if key != "grpc-status-details-bin":
                continue
            for number, _, detail in _all_fields(value):
                if number != 3:
                    continue
                any_fields = {n: v for n, _, v in _all_fields(detail)}
                if any_fields.get(1, b"").endswith(b"google.rpc.ErrorInfo"):
                    info = decode_error_info(
                        base64.b64encode(any_fields.get(2, b"")).decode())
        return ApiError(e.code().name, e.details(), info)

    def call(self, method, body=None, timeout=None):
        """`method` as "hub.v1.PresenceService/RegisterAgent"; returns the
        answer as a dict (proto3 JSON, as buf curl prints it) or raises
        ApiError."""
        from google.protobuf import json_format
        req_type, stub = self._method(method)
        request = json_format.ParseDict(body or {}, req_type())
        try:
            answer = stub(request, timeout=timeout or self.timeout)
        except self._grpc.RpcError as e:
            raise self._api_error(e) from None
        return json_format.MessageToDict(answer)


class Stream:
    """The answers of a streaming call, as dicts (proto3 JSON), in order.
    Iterating ends when the call does; a failed call raises ApiError (a
    cancel() ends the iteration quietly)."""

    def __init__(self, api, call):
        self._api, self._call, self._cancelled = api, call, False

    def __iter__(self):
        from google.protobuf import json_format
        try:
            for answer in self._call:
                yield json_format.MessageToDict(answer)
        except self._api._grpc.RpcError as e:
            if self._cancelled and e.code() == self._api._grpc.StatusCode.CANCELLED:
                return
            raise self._api._api_error(e) from None

    def cancel(self):
        self._cancelled = True
        self._call.cancel()


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

    def __init__(self, durable=False, settings=(), primary=None):
        """`durable`: fsync, full-page writes and synchronous_commit on (what
        a crash test needs: a commit PostgreSQL acknowledged survives its
        `stop -m immediate`); otherwise all three off, for speed. `settings`:
        more `name=value` server settings. `primary`: a running Postgres this
        one is a streaming hot standby of (standby_of)."""
        import tempfile
        self.dir = tempfile.mkdtemp(prefix="hub-pg-e2e.", dir="/tmp")
        self.durable = durable
        if os.geteuid() == 0:
            import pwd
            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
        if primary is None:
            self._run("initdb", "-D", self.dir + "/data", "-A", "trust", "-U", "hub",
                      "-E", "UTF8", "--locale=C.UTF-8", "--locale-provider=icu",
                      "--icu-locale=en-US", "--no-sync")
        else:
            # -R: standby.signal and a primary_conninfo naming the primary's
            # socket (initdb's pg_hba.conf lets the local superuser replicate).
            self._run("pg_basebackup", "-D", self.dir + "/data", "-h", primary.dir,
                      "-U", "hub", "-R", "-X", "stream", "--no-sync")
        self.options = "-c listen_addresses= -c unix_socket_directories=%s " % self.dir
        if durable:
            self.options += "-c fsync=on -c full_page_writes=on -c synchronous_commit=on"
        else:
            self.options += ("-c fsync=off -c full_page_writes=off "
                             "-c synchronous_commit=off")
        for setting in settings:
            self.options += " -c " + shlex.quote(setting)  # pg_ctl runs a shell
        self.start()

    @classmethod
    def standby_of(cls, primary, settings=()):
        """A hot standby of the running `primary` (pg_basebackup -R, then
        streaming replication), as durable as it, on its own socket
        directory; read-only until promote(). Its command-line settings are
        its own: the primary's (synchronous_standby_names, say) are not
        copied."""
        # Its first start syncs the unsynced base backup: one syncfs is
        # seconds faster than PostgreSQL's default fsync of every file.
        return cls(durable=primary.durable, primary=primary,
                   settings=("recovery_init_sync_method=syncfs", *settings))

    def promote(self):
        """`pg_ctl promote`, waiting until the server accepts writes."""
        self._run("pg_ctl", "-D", self.dir + "/data", "-w", "-t", "60", "promote")

    def start(self):
        """Starts the server (again, after stop_server), waiting until it
        accepts connections."""
        self._run("pg_ctl", "-D", self.dir + "/data", "-l", self.dir + "/server.log",
                  "-o", self.options, "-w", "-t", "60", "start")

    def stop_server(self, mode="fast"):
        """`pg_ctl stop -m MODE` (smart, fast, immediate), keeping the data
        directory for start()."""
        self._run("pg_ctl", "-D", self.dir + "/data", "-m", mode, "-w", "-t", "60", "stop")

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

    def url(self, database, *more):
        """A libpq URI for `database` as the superuser `hub`; with `more`
        servers (a standby and its primary), one naming every server's
        socket, in that order, with target_session_attrs=read-write: libpq
        connects to the first that accepts writes."""
        if not more:
            return "postgresql://hub@/%s?host=%s" % (database, self.dir)
        return "postgresql://hub@/%s?host=%s&target_session_attrs=read-write" % (
            database, ",".join(server.dir for server in (self, *more)))

    def create_database(self, name):
        self._run("createdb", "-h", self.dir, "-U", "hub", name)

    def sql(self, database, statement):
        """Runs `statement` with psql; its rows as tab-separated lines."""
        return self._run("psql", "-h", self.dir, "-U", "hub", "-d", database, "-XAtq",
                         "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", statement).strip()

    def stop(self):
        try:
            if os.path.exists(self.dir + "/data/postmaster.pid"):
                self._run("pg_ctl", "-D", self.dir + "/data", "-m", "immediate", "-w",
                          "stop")
        finally:
            import shutil
            shutil.rmtree(self.dir, ignore_errors=True)


class PostgresTestCase(unittest.TestCase):
    """One throw-away server per test class (`DURABLE`: see Postgres), and
    per test a fresh database named after it (`self.database`, `self.url`)
    and a fresh directory (`self.dir`). A test that stopped the server finds
    it started again for the next."""

    DURABLE = False

    @classmethod
    def setUpClass(cls):
        cls.pg = Postgres(durable=cls.DURABLE)

    @classmethod
    def tearDownClass(cls):
        cls.pg.stop()

    def setUp(self):
        import shutil
        name = self.id().rsplit(".", 1)[-1]
        self.dir = os.path.join(tmpdir(), name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.database = name.lower()[:60]
        self.pg.create_database(self.database)
        self.url = self.pg.url(self.database)
        self.addCleanup(self._start_postgres_if_stopped)

    def _start_postgres_if_stopped(self):
        if not os.path.exists(os.path.join(self.pg.dir, "data", "postmaster.pid")):
            self.pg.start()


REGISTER = "hub.v1.PresenceService/RegisterAgent"
GET_AGENT = "hub.v1.PresenceService/GetAgent"
PUBLISH = "hub.v1.MessageService/Publish"
PENDING = "hub.v1.MessageService/ListPending"
ACK = "hub.v1.MessageService/Ack"
TRACE = "hub.v1.MessageService/ListTrace"


def guards(role):
    """CompareAndSetRole's four guards from a role as GetRole prints it."""
    activation = role.get("activationId")
    return {"expectedVersion": role.get("version", "0"),
            "expectedEpoch": role.get("epoch", "0"),
            "expectedActivationSeq": role.get("activationSeq", "0"),
            "expectedActivationId": ({"activationId": activation} if activation
                                     else {"none": True})}


def wait_for(what, predicate, timeout=20.0, interval=0.02):
    """Polls `predicate` until it returns a true value (returned) or the
    deadline passes (the test fails naming `what`)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(interval)


class Load:
    """Concurrent clients writing through one hubd until the first failure
    each sees. Records every write hubd acknowledged (an OK answer) and every
    write attempted, so that a check afterwards can demand the first and
    allow no more than the second."""

    def __init__(self, address, prefix, clients=6):
        self.address, self.prefix = address, prefix
        self.lock = threading.Lock()
        self.acked_generation = {}  # agent -> highest generation acknowledged
        self.registers_tried = {}  # agent -> RegisterAgent calls sent
        self.published = {}  # message id -> (inbox, trace id)
        self.ack_tried = set()  # message ids an Ack was sent for
        self.acked = set()  # message ids an Ack acknowledged as acked
        self.inboxes = {}  # inbox agent -> its generation
        self.traces = []
        self.acknowledged = 0
        self.failures = []  # (monotonic time, ApiError) ending each client
        self.ready = threading.Barrier(clients + 1)
        self.threads = [threading.Thread(target=self._client, args=(i,), daemon=True)
                        for i in range(clients)]
        for t in self.threads:
            t.start()
        self.ready.wait(timeout=60)

    def join(self):
        for t in self.threads:
            t.join(timeout=60)
            assert not t.is_alive(), "a load client hangs"

    def _count(self):
        with self.lock:
            self.acknowledged += 1

    def _client(self, n):
        api = Api(self.address, timeout=15)
        inbox = "session:%s-c%d-inbox" % (self.prefix, n)
        trace = "%s-c%d" % (self.prefix, n)
        agents = ["session:%s-c%d-a%d" % (self.prefix, n, k) for k in range(4)]
        try:
            answer = api.call(REGISTER, {"agentId": inbox, "cli": "AGENT_CLI_CODEX",
                                         "heartbeatTtl": "7200s"})
            with self.lock:
                self.inboxes[inbox] = answer["presenceGeneration"]
                self.traces.append(trace)
                self.registers_tried[inbox] = 1
                self.acked_generation[inbox] = int(answer["presenceGeneration"])
        finally:
            self.ready.wait(timeout=60)
        generation = self.inboxes[inbox]
        try:
            for i in range(100000):
                agent = agents[i % len(agents)]
                with self.lock:
                    self.registers_tried[agent] = self.registers_tried.get(agent, 0) + 1
                answer = api.call(REGISTER, {"agentId": agent, "cli": "AGENT_CLI_CLAUDE",
                                             "heartbeatTtl": "7200s"})
                with self.lock:
                    self.acked_generation[agent] = max(
                        self.acked_generation.get(agent, 0),
                        int(answer["presenceGeneration"]))
                self._count()
                answer = api.call(PUBLISH, {"fromAgentId": agent, "to": inbox,
                                            "payload": {"client": n, "i": i},
                                            "traceId": trace, "ttl": "3600s"})
                with self.lock:
                    self.published[answer["messageId"]] = (inbox, trace)
                self._count()
                if i % 4 == 3:
                    # Delivered (ListPending marks them), then half of them acked.
                    page = api.call(PENDING, {"agentId": inbox, "pageSize": 6})
                    ids = [d["message"]["messageId"] for d in page.get("deliveries", [])]
                    ids = ids[::2]
                    if ids:
                        with self.lock:
                            self.ack_tried.update(ids)
                        answer = api.call(ACK, {"agentId": inbox,
                                                "presenceGeneration": generation,
                                                "messageIds": ids})
                        acked = answer.get("result", {}).get("ackedMessageIds", [])
                        with self.lock:
                            self.acked.update(acked)
                        self._count()
        except ApiError as e:
            with self.lock:
                self.failures.append((time.monotonic(), e))
        finally:
            api.close()


class HubdClients:
    """For a unittest.TestCase with a directory `self.dir`: hubds (their
    output in self.dir/hubd-N/, killed at cleanup) and Api clients (closed
    at cleanup)."""

    def hubd(self, url, *args):
        self.hubds = getattr(self, "hubds", 0) + 1
        log_dir = os.path.join(self.dir, "hubd-%d" % self.hubds)
        os.makedirs(log_dir)
        hubd = Hubd(url, *args, log_dir=log_dir)
        self.addCleanup(hubd.stop, signal.SIGKILL)
        return hubd

    def api(self, hubd):
        api = Api(hubd.address)
        self.addCleanup(api.close)
        return api

    def assert_unavailable(self, error, what):
        self.assertEqual((error.code, error.reason), ("UNAVAILABLE", "STORE_UNAVAILABLE"),
                         "%s: %s" % (what, error))

    def assert_unavailable_or_seat_lost(self, error, what):
        """A call while the database is out of reach, or just after it came
        back: UNAVAILABLE with STORE_UNAVAILABLE, or HUB_SEAT_LOST when
        the gap outlasted the hub's seat lease (it stopped acting on its own
        and serves again once it has joined again, docs/design/multi-hub.md)."""
        self.assertEqual(error.code, "UNAVAILABLE", "%s: %s" % (what, error))
        self.assertIn(error.reason, ("STORE_UNAVAILABLE", "HUB_SEAT_LOST"),
                      "%s: %s" % (what, error))

    def assert_in_flight_lost(self, error, what):
        """A call in flight when the database went away: UNAVAILABLE with
        STORE_UNAVAILABLE (nothing of it was written), or
        STORE_COMMIT_UNKNOWN when its group's COMMIT was in flight and the
        database stayed out of reach while hubd looked it up (it may have
        been written)."""
        self.assertEqual(error.code, "UNAVAILABLE", "%s: %s" % (what, error))
        self.assertIn(error.reason, ("STORE_UNAVAILABLE", "STORE_COMMIT_UNKNOWN"),
                      "%s: %s" % (what, error))


class AcknowledgedWrites(HubdClients):
    """For a unittest.TestCase: a Load through a hubd with a crash in the
    middle of it, and the check afterwards that every write hubd
    acknowledged is there and none was invented."""

    def run_load_until(self, hubd, prefix, crash):
        """Load through `hubd`; once enough writes were acknowledged, `crash()`
        while the clients keep writing. Returns the finished load."""
        load = Load(hubd.address, prefix)
        wait_for("300 acknowledged writes", lambda: load.acknowledged >= 300, timeout=30)
        crash_started = time.monotonic()
        crash()
        load.join()
        self.assertEqual(len(load.failures), len(load.threads))
        for when, error in load.failures:
            # The first failure any client saw came after the crash began.
            self.assertGreaterEqual(when, crash_started, str(error))
        return load

    def check_every_acknowledged_write(self, api, load):
        for agent, tried in load.registers_tried.items():
            acked = load.acked_generation.get(agent)
            try:
                got = int(api.call(GET_AGENT, {"agentId": agent})["agent"]
                          ["presenceGeneration"])
            except ApiError as e:
                self.assertIsNone(acked, "%s acknowledged at generation %s: %s"
                                  % (agent, acked, e))
                self.assertEqual(e.reason, "AGENT_NOT_FOUND")
                continue
            # Every acknowledged registration is there, and none was invented.
            self.assertGreaterEqual(got, acked or 0, agent)
            self.assertLessEqual(got, tried, agent)
        statuses = {}
        for trace in load.traces:
            token = ""
            while True:
                page = api.call(TRACE, {"traceId": trace, "pageSize": 500,
                                        "pageToken": token})
                for m in page.get("messages", []):
                    statuses[m["messageId"]] = m["status"]
                token = page.get("nextPageToken", "")
                if not token:
                    break
        pending = set()
        for inbox, generation in load.inboxes.items():
            token = ""
            while True:
                page = api.call(PENDING, {"agentId": inbox, "peek": True, "pageSize": 500,
                                          "pageToken": token})
                pending.update(d["message"]["messageId"] for d in page.get("deliveries", []))
                token = page.get("nextPageToken", "")
                if not token:
                    break
        missing = [m for m in load.published if m not in statuses]
        self.assertEqual(missing, [], "acknowledged publishes lost")
        for message in load.published:
            if message in load.acked:
                self.assertEqual(statuses[message], "MESSAGE_STATUS_ACKED", message)
                self.assertNotIn(message, pending)
            elif message not in load.ack_tried:
                self.assertIn(statuses[message], ("MESSAGE_STATUS_QUEUED",
                                                  "MESSAGE_STATUS_DELIVERED"), message)
                self.assertIn(message, pending)
        self.assertGreater(len(load.acked), 0)
        return statuses
