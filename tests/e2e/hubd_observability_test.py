#!/usr/bin/python3
"""hubd's metrics endpoint and structured logs, through the real binary.

Each test starts its own hubd (--metrics_listen=127.0.0.1:0), makes RPCs with
buf curl, scrapes GET /metrics and reads stderr.
"""
import json
import os
import re
import socket
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hubtest  # noqa: E402

PRJ = "prj_AAAAAAAAAAAAAAAAAAAAAA"
SCP = "scp_BBBBBBBBBBBBBBBBBBBBBB"
SCP_KERNEL = "scp_DDDDDDDDDDDDDDDDDDDDDD"
METRICS_ADDRESS = re.compile(r"event=hub_started .*metrics_address=(\S*)")
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse_exposition(text):
    """Parses the text format strictly: returns ({name: type},
    {(name, frozenset(labels)): value}); raises on any malformed line, a
    sample before its family's HELP and TYPE, or a family declared twice."""
    types, helps, samples = {}, set(), {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            if name in helps:
                raise ValueError("HELP twice: " + line)
            helps.add(name)
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            if name in types or name not in helps:
                raise ValueError("TYPE out of place: " + line)
            if kind not in ("counter", "gauge", "histogram"):
                raise ValueError("unknown type: " + line)
            types[name] = kind
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ValueError("malformed line: %r" % line)
        name, labels_text, value = m.groups()
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        if name not in types and not (family in types and types[family] == "histogram"):
            raise ValueError("sample without TYPE: " + line)
        labels = {}
        rest = labels_text or ""
        while rest:
            lm = LABEL.match(rest)
            if not lm:
                raise ValueError("malformed labels: " + line)
            labels[lm.group(1)] = re.sub(r"\\(.)", lambda e: {"n": "\n"}.get(e.group(1), e.group(1)),
                                         lm.group(2))
            rest = rest[lm.end():]
        key = (name, frozenset(labels.items()))
        if key in samples:
            raise ValueError("duplicate sample: " + line)
        samples[key] = float(value)
    return types, samples


class Observed:
    """A hubd with its metrics endpoint."""

    def __init__(self, name, *args):
        self.hubd = hubtest.Hubd(os.path.join(hubtest.tmpdir(), name + ".sqlite"),
                                 "--metrics_listen=127.0.0.1:0", *args)
        deadline = time.monotonic() + 10
        self.metrics = None
        while self.metrics is None and time.monotonic() < deadline:
            m = METRICS_ADDRESS.search(self.hubd.stderr())
            if m:
                self.metrics = m.group(1)
            else:
                time.sleep(0.02)
        if not self.metrics:
            self.hubd.stop()
            raise RuntimeError("no metrics address in hubd's log: " + self.hubd.stderr())

    def call(self, method, body, headers=()):
        extra = []
        for h in headers:
            extra += ["-H", h]
        return hubtest.buf_curl(self.hubd.address, method, body, extra=extra)

    def ok(self, method, body):
        code, out, err = self.call(method, body)
        if code != 0:
            raise AssertionError("%s failed: %s" % (method, err))
        return out

    def scrape(self):
        with urllib.request.urlopen("http://%s/metrics" % self.metrics, timeout=10) as r:
            content_type = r.headers["Content-Type"]
            text = r.read().decode()
        return content_type, text

    def samples(self):
        return parse_exposition(self.scrape()[1])[1]


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


class MetricsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.hub = Observed("metrics")

    @classmethod
    def tearDownClass(cls):
        cls.hub.hubd.stop()

    def test_scrape_is_well_formed_text_exposition(self):
        content_type, text = self.hub.scrape()
        self.assertEqual(content_type, "text/plain; version=0.0.4; charset=utf-8")
        types, samples = parse_exposition(text)
        for family, kind in [("hub_rpc_handled_total", "counter"),
                             ("hub_rpc_duration_seconds", "histogram"),
                             ("hub_open_streams", "gauge"),
                             ("hub_agents", "gauge"),
                             ("hub_roles", "gauge"),
                             ("hub_role_failovers_total", "counter"),
                             ("hub_role_activations_total", "counter"),
                             ("hub_role_kernel_transitions_total", "counter"),
                             ("hub_role_transitions_refused_total", "counter"),
                             ("hub_messages_published_total", "counter"),
                             ("hub_messages_delivered_total", "counter"),
                             ("hub_messages_acked_total", "counter"),
                             ("hub_messages_dead_lettered_total", "counter"),
                             ("hub_message_ack_requests_total", "counter"),
                             ("hub_message_ack_writes_total", "counter"),
                             ("hub_store_writes_total", "counter"),
                             ("hub_store_commit_groups_total", "counter"),
                             ("hub_store_commit_replays_total", "counter"),
                             ("hub_store_commit_group_size", "histogram"),
                             ("hub_store_commit_duration_seconds", "histogram")]:
            self.assertEqual(types.get(family), kind, family)
        self.assertEqual(value(samples, "hub_build_info", version="0.1.0",
                               hub_instance_id=self.hub.hubd.instance_id), 1)

    def test_rpc_counts_and_latencies_by_method_and_code(self):
        before = self.hub.samples()
        register = "hub.v1.PresenceService/RegisterAgent"
        heartbeat = "hub.v1.PresenceService/Heartbeat"
        self.hub.ok(register, {"agentId": "session:m1", "cli": "AGENT_CLI_CLAUDE"})
        self.hub.ok(register, {"agentId": "session:m1", "cli": "AGENT_CLI_CLAUDE"})
        code, _, _ = self.hub.call(register, {"agentId": "", "cli": "AGENT_CLI_CLAUDE"})
        self.assertNotEqual(code, 0)
        code, _, _ = self.hub.call(heartbeat, {"agentId": "session:m1",
                                               "presenceGeneration": "1"})
        self.assertNotEqual(code, 0)
        after = self.hub.samples()

        def delta(name, **labels):
            return value(after, name, **labels) - value(before, name, **labels)

        self.assertEqual(delta("hub_rpc_handled_total", method=register, code="OK"), 2)
        self.assertEqual(delta("hub_rpc_handled_total", method=register,
                               code="INVALID_ARGUMENT"), 1)
        self.assertEqual(delta("hub_rpc_handled_total", method=heartbeat,
                               code="FAILED_PRECONDITION"), 1)
        self.assertEqual(delta("hub_rpc_failures_total", method=heartbeat,
                               code="FAILED_PRECONDITION",
                               reason="STALE_PRESENCE_OWNER"), 1)
        self.assertEqual(delta("hub_fencing_rejections_total",
                               reason="STALE_PRESENCE_OWNER"), 1)
        # The histogram saw the same calls: +Inf bucket == count, and the
        # buckets are cumulative.
        labels = dict(method=register, code="OK")
        self.assertEqual(delta("hub_rpc_duration_seconds_count", **labels), 2)
        self.assertEqual(value(after, "hub_rpc_duration_seconds_bucket", le="+Inf", **labels),
                         value(after, "hub_rpc_duration_seconds_count", **labels))
        self.assertGreater(value(after, "hub_rpc_duration_seconds_sum", **labels), 0)
        buckets = sorted((float(dict(k[1])["le"]), v) for k, v in after.items()
                         if k[0] == "hub_rpc_duration_seconds_bucket" and
                         dict(k[1]).get("method") == register and
                         dict(k[1]).get("code") == "OK")
        self.assertEqual([v for _, v in buckets], sorted(v for _, v in buckets))
        # Durable writes went through group commits.
        self.assertGreaterEqual(delta("hub_store_commit_group_size_sum"), 2)
        self.assertGreaterEqual(delta("hub_store_commit_duration_seconds_count"), 1)
        self.assertGreaterEqual(value(after, "hub_agents", status="online"), 1)

    def test_messages_published_delivered_acked_and_dead_lettered(self):
        register = "hub.v1.PresenceService/RegisterAgent"
        for agent in ("session:inbox", "session:sender"):
            self.hub.ok(register, {"agentId": agent, "cli": "AGENT_CLI_CODEX"})
        before = self.hub.samples()
        publish = "hub.v1.MessageService/Publish"
        self.hub.ok(publish, {"fromAgentId": "session:sender", "to": "session:inbox",
                              "payload": {"n": 1}})
        self.hub.ok(publish, {"fromAgentId": "session:sender", "to": "session:inbox",
                              "payload": {"n": 2}})
        import json
        pending = json.loads(self.hub.ok("hub.v1.MessageService/ListPending",
                                         {"agentId": "session:inbox"}))
        ids = [d["message"]["messageId"] for d in pending["deliveries"]]
        self.assertEqual(len(ids), 2)
        self.hub.ok("hub.v1.MessageService/ListPending",
                    {"agentId": "session:inbox", "peek": True})  # not a delivery
        self.hub.ok("hub.v1.MessageService/Ack",
                    {"agentId": "session:inbox", "messageIds": ids[:1]})
        # Expires in 1 s; the sweep (every second) dead-letters it.
        self.hub.ok(publish, {"fromAgentId": "session:sender", "to": "session:inbox",
                              "ttl": "1s", "type": "MESSAGE_TYPE_EVENT"})
        deadline = time.monotonic() + 15
        while True:
            after = self.hub.samples()
            if value(after, "hub_messages_dead_lettered_total", reason="ttl_expired") > \
                    value(before, "hub_messages_dead_lettered_total", reason="ttl_expired"):
                break
            self.assertLess(time.monotonic(), deadline, "no dead letter counted")
            time.sleep(0.2)

        def delta(name, **labels):
            return value(after, name, **labels) - value(before, name, **labels)

        self.assertEqual(delta("hub_messages_published_total"), 3)
        self.assertEqual(delta("hub_messages_delivered_total", via="list_pending"), 2)
        self.assertEqual(delta("hub_messages_acked_total"), 1)
        self.assertEqual(delta("hub_messages_dead_lettered_total", reason="ttl_expired"), 1)
        self.assertIn("event=message_dead_lettered", self.hub.hubd.stderr())

    def test_presence_streams_deliveries_and_stream_acks(self):
        import json
        register = "hub.v1.PresenceService/RegisterAgent"
        reply = json.loads(self.hub.ok(register, {"agentId": "session:streamer",
                                                  "cli": "AGENT_CLI_CLAUDE"}))
        before = self.hub.samples()
        out_path = os.path.join(hubtest.tmpdir(), "attach.out")
        out = open(out_path, "w")
        attach = subprocess.Popen(
            [hubtest.buf_path(), "curl", "--protocol", "grpc", "--http2-prior-knowledge",
             "http://%s/hub.v1.PresenceService/Attach" % self.hub.hubd.address, "-d", "@-"],
            stdin=subprocess.PIPE, stdout=out, stderr=subprocess.PIPE, text=True)
        self.addCleanup(attach.kill)
        attach.stdin.write(json.dumps({"frameId": "1", "hello": {
            "agentId": "session:streamer",
            "presenceGeneration": reply["presenceGeneration"]}}) + "\n")
        attach.stdin.flush()

        def wait_for(predicate, what):
            deadline = time.monotonic() + 15
            while True:
                samples = self.hub.samples()
                if predicate(samples):
                    return samples
                self.assertLess(time.monotonic(), deadline, what)
                time.sleep(0.1)

        attach_method = "hub.v1.PresenceService/Attach"
        wait_for(lambda s: value(s, "hub_open_streams", method=attach_method) >= 1 and
                 value(s, "hub_presence_streams_attached") >= 1, "stream never counted")
        published = json.loads(self.hub.ok("hub.v1.MessageService/Publish", {
            "fromAgentId": "session:streamer", "to": "session:streamer",
            "payload": {"via": "stream"}}))
        wait_for(lambda s: value(s, "hub_messages_delivered_total", via="stream") >
                 value(before, "hub_messages_delivered_total", via="stream"),
                 "the push was not counted")
        attach.stdin.write(json.dumps({"frameId": "2", "messageAck": {
            "messageIds": [published["messageId"]]}}) + "\n")
        attach.stdin.flush()
        wait_for(lambda s: value(s, "hub_messages_acked_total") ==
                 value(before, "hub_messages_acked_total") + 1, "the ack was not counted")
        attach.stdin.close()  # half-close: the hub ends the stream with OK
        attach.wait(timeout=15)
        out.close()
        after = wait_for(lambda s: value(s, "hub_open_streams", method=attach_method) ==
                         value(before, "hub_open_streams", method=attach_method),
                         "the stream stayed counted as open")
        self.assertEqual(value(after, "hub_rpc_handled_total", method=attach_method, code="OK") -
                         value(before, "hub_rpc_handled_total", method=attach_method, code="OK"), 1)

    def test_roles_by_state_and_transitions(self):
        reserve = "hub.v1.RoleService/ReserveRole"
        before = self.hub.samples()
        self.hub.ok(reserve, {"roleKey": {"projectId": PRJ, "kind": "ROLE_KIND_LEAD",
                                          "scopeId": SCP},
                              "patch": {"state": "ROLE_STATE_ELECTABLE",
                                        "lastReason": "operator"}})
        # With a retry time an hour away, so that the activator's tick does
        # not restore the role before a scrape sees it quarantined (without
        # one it may, between two scrapes); restored when the test ends, for
        # the other tests that count quarantined roles.
        retry_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
        self.hub.ok(reserve, {"roleKey": {"projectId": PRJ, "kind": "ROLE_KIND_LEAD",
                                          "scopeId": SCP},
                              "patch": {"state": "ROLE_STATE_QUARANTINED",
                                        "nextProbeAt": retry_at,
                                        "lastReason": "operator"}})
        self.addCleanup(self.hub.ok, reserve, {
            "roleKey": {"projectId": PRJ, "kind": "ROLE_KIND_LEAD", "scopeId": SCP},
            "patch": {"state": "ROLE_STATE_ELECTABLE", "lastReason": "operator"}})
        deadline = time.monotonic() + 10
        while True:
            after = self.hub.samples()
            if value(after, "hub_roles", state="quarantined") >= 1:
                break
            self.assertLess(time.monotonic(), deadline, "role counts never changed")
            time.sleep(0.1)
        self.assertEqual(value(after, "hub_role_transitions_total",
                               **{"from": "electable", "to": "quarantined"}) -
                         value(before, "hub_role_transitions_total",
                               **{"from": "electable", "to": "quarantined"}), 1)
        self.assertIn("event=role_transition", self.hub.hubd.stderr())

    def test_the_activators_role_writes_are_counted_by_their_kernel_trigger(self):
        key = {"projectId": PRJ, "kind": "ROLE_KIND_LEAD", "scopeId": SCP_KERNEL}
        kernel = "hub_role_kernel_transitions_total"
        restore = {"from": "quarantined", "trigger": "exclusion_expired", "to": "electable"}
        blocked = {"from": "electable", "trigger": "no_candidate", "to": "electable"}
        # The counters are per transition, not per role: a role another test
        # quarantined would be restored by the activator's tick in the
        # middle of this one. Start once there is none.
        deadline = time.monotonic() + 10
        while value(self.hub.samples(), "hub_roles", state="quarantined") > 0:
            self.assertLess(time.monotonic(), deadline,
                            "another test's quarantined role was never restored")
            time.sleep(0.1)
        # An operator quarantines the role without a retry time; the activator
        # restores it (exclusion_expired), then finds no candidate.
        self.hub.ok("hub.v1.RoleService/ReserveRole",
                    {"roleKey": key, "patch": {"state": "ROLE_STATE_QUARANTINED"}})
        before = self.hub.samples()
        receipt = json.loads(self.hub.ok("hub.v1.RoleService/EnsureRole", {
            "roleKey": key, "trigger": "ENSURE_ROLE_TRIGGER_MANUAL",
            "causeId": "kernel"}))["receipt"]
        self.assertEqual(receipt["disposition"], "ENSURE_ROLE_DISPOSITION_NO_CANDIDATE")
        self.assertEqual(receipt["state"], "ROLE_STATE_ELECTABLE")
        after = self.hub.samples()
        self.assertEqual(value(after, kernel, **restore) - value(before, kernel, **restore), 1)
        self.assertEqual(value(after, kernel, **blocked) - value(before, kernel, **blocked), 1)
        self.assertNotIn("event=role_transition_refused", self.hub.hubd.stderr())

    def test_only_get_metrics_is_served(self):
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen("http://%s/nothing" % self.hub.metrics, timeout=10)
        self.assertEqual(e.exception.code, 404)
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(urllib.request.Request(
                "http://%s/metrics" % self.hub.metrics, data=b"x", method="POST"), timeout=10)
        self.assertEqual(e.exception.code, 405)


class LogTest(unittest.TestCase):
    def start(self, name, level):
        hubd = hubtest.Hubd(os.path.join(hubtest.tmpdir(), name + ".sqlite"),
                            "--log_level=" + level)
        self.addCleanup(hubd.stop)
        return hubd

    def exercise(self, hubd):
        token = "Bearer sekrit-token-do-not-log"
        for _ in range(2):
            code, _, err = hubtest.buf_curl(
                hubd.address, "hub.v1.PresenceService/RegisterAgent",
                {"agentId": "session:logged", "cli": "AGENT_CLI_GEMINI"},
                extra=["-H", "authorization: " + token])
            self.assertEqual(code, 0, err)
        code, _, _ = hubtest.buf_curl(
            hubd.address, "hub.v1.PresenceService/Heartbeat",
            {"agentId": "session:logged", "presenceGeneration": "1"},
            extra=["-H", "authorization: " + token])
        self.assertNotEqual(code, 0)
        # A call's log line may be written after its answer: once hubd has
        # exited, every line is on stderr, however slow the machine.
        self.assertEqual(hubd.stop(), 0)
        return hubd.stderr()

    def test_info_level_logs_registrations_and_fencing_rejections_as_key_values(self):
        hubd = self.start("log-info", "info")
        log = self.exercise(hubd)
        lines = log.splitlines()
        registered = [l for l in lines if "event=agent_registered" in l]
        self.assertEqual(len(registered), 2, log)
        self.assertRegex(registered[1],
                         r"^ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=info "
                         r"event=agent_registered agent_id=session:logged generation=2 "
                         r"cli=AGENT_CLI_GEMINI ")
        fenced = [l for l in lines if "event=fencing_rejected" in l]
        self.assertEqual(len(fenced), 1, log)
        self.assertIn("method=hub.v1.PresenceService/Heartbeat", fenced[0])
        self.assertIn("code=FAILED_PRECONDITION reason=STALE_PRESENCE_OWNER", fenced[0])
        self.assertNotIn("sekrit", log)
        self.assertNotIn("Bearer", log)
        # The startup line stays on stdout, unchanged.
        with open(hubd.log_path) as f:
            self.assertRegex(f.read(), r"^hubd \S+ serving on 127\.0\.0\.1:\d+ db=")

    def test_warn_level_logs_neither(self):
        hubd = self.start("log-warn", "warn")
        log = self.exercise(hubd)
        self.assertNotIn("event=agent_registered", log)
        self.assertNotIn("event=fencing_rejected", log)

    def test_unknown_level_is_refused_at_start(self):
        r = subprocess.run([hubtest.hubd_path(), "--listen=127.0.0.1:0",
                            "--db=" + os.path.join(hubtest.tmpdir(), "bad-level.sqlite"),
                            "--log_level=loud"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--log_level", r.stderr)


class MetricsFlagTest(unittest.TestCase):
    def test_metrics_are_off_by_default(self):
        hubd = hubtest.Hubd(os.path.join(hubtest.tmpdir(), "nometrics.sqlite"))
        self.addCleanup(hubd.stop)
        deadline = time.monotonic() + 10
        while "event=hub_started" not in hubd.stderr():
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.02)
        self.assertRegex(hubd.stderr(), r"event=hub_started .*metrics_address=\"\"")

    def test_a_taken_metrics_port_stops_hubd_with_a_clear_message(self):
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        self.addCleanup(taken.close)
        port = taken.getsockname()[1]
        r = subprocess.run([hubtest.hubd_path(), "--listen=127.0.0.1:0",
                            "--db=" + os.path.join(hubtest.tmpdir(), "taken.sqlite"),
                            "--metrics_listen=127.0.0.1:%d" % port],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot serve metrics on 127.0.0.1:%d" % port, r.stderr)


class SystemdUnitTest(unittest.TestCase):
    def test_the_units_command_line_starts_hubd_and_sigterm_stops_it_cleanly(self):
        with open(os.environ["HUBD_SERVICE"]) as f:
            unit = f.read().replace("\\\n", " ")
        service = {}
        for line in unit.splitlines():
            if "=" in line and not line.startswith("#"):
                key, _, val = line.partition("=")
                service[key.strip()] = val.strip()
        self.assertEqual(service["KillSignal"], "SIGTERM")
        argv = service["ExecStart"].split()
        self.assertEqual(argv[0], "/usr/local/bin/hubd")
        flags = dict(a[2:].split("=", 1) for a in argv[1:])
        self.assertEqual(sorted(flags), ["db", "listen", "log_level",
                                         "metrics_listen", "shutdown_grace"])
        # The same flags, on free ports and a temporary database.
        flags["db"] = os.path.join(hubtest.tmpdir(), "unit.sqlite")
        flags["listen"] = "127.0.0.1:0"
        flags["metrics_listen"] = "127.0.0.1:0"
        hubd = hubtest.Hubd(flags["db"], *["--%s=%s" % kv for kv in flags.items()
                                            if kv[0] != "db"])
        deadline = time.monotonic() + 10
        while not METRICS_ADDRESS.search(hubd.stderr()):
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.02)
        metrics = METRICS_ADDRESS.search(hubd.stderr()).group(1)
        with urllib.request.urlopen("http://%s/metrics" % metrics, timeout=10) as r:
            self.assertIn("hub_build_info", r.read().decode())
        self.assertEqual(hubd.stop(), 0)
        self.assertIn("event=hub_stopped", hubd.stderr())


if __name__ == "__main__":
    hubtest.run_tests()
