#!/usr/bin/python3
"""The real hubd binary, driven over the wire by buf curl (reflection only,
no local .proto files), as a user would from the README."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hubtest  # noqa: E402

CTO_KEY = {"projectId": "prj_AAAAAAAAAAAAAAAAAAAAAA", "kind": "ROLE_KIND_CTO"}
CTO_WIRE = ("rk2.eyJwcm9qZWN0X2lkIjoicHJqX0FBQUFBQUFBQUFBQUFBQUFBQUFBQUEiLCJy"
            "b2xlX2tpbmQiOiJjdG8ifQ")


class HubdOverBufCurlTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.db = os.path.join(hubtest.tmpdir(), "e2e.sqlite")
        cls.hubd = hubtest.Hubd(cls.db)

    @classmethod
    def tearDownClass(cls):
        cls.hubd.stop()

    def call(self, method, body=None):
        code, out, err = hubtest.buf_curl(self.hubd.address, method, body)
        self.assertEqual(code, 0, "buf curl %s failed: %s" % (method, err))
        return json.loads(out)

    def test_reflection_lists_every_registered_method(self):
        code, out, err = hubtest.buf_curl(self.hubd.address, "", extra=["--list-methods"])
        self.assertEqual(code, 0, err)
        methods = set(out.split())
        for m in ("hub.v1.PresenceService/RegisterAgent", "hub.v1.PresenceService/Attach",
                  "hub.v1.PresenceService/Heartbeat", "hub.v1.PresenceService/Deregister",
                  "hub.v1.PresenceService/GetAgent", "hub.v1.PresenceService/ListAgents",
                  "hub.v1.RoleService/ReserveRole", "hub.v1.RoleService/CompareAndSetRole",
                  "hub.v1.RoleService/EnsureRole", "hub.v1.RoleService/AckRoleActivation",
                  "hub.v1.RoleService/WatchRoles",
                  "hub.v1.MessageService/Publish", "hub.v1.MessageService/Ack",
                  "hub.v1.MessageService/ListPending", "hub.v1.MessageService/ListDeadLetters",
                  "hub.v1.MessageService/Ask", "hub.v1.MessageService/ListTrace",
                  "hub.v1.HubService/GetStatus", "hub.v1.HubService/EncodeRoleKey",
                  "hub.v1.HubService/DecodeRoleKey", "grpc.health.v1.Health/Check",
                  "grpc.health.v1.Health/Watch"):
            self.assertIn(m, methods)

    def test_health_check_reports_serving(self):
        self.assertEqual(self.call("grpc.health.v1.Health/Check", {}),
                         {"status": "SERVING"})

    def test_encode_then_decode_round_trips_a_cto_key(self):
        enc = self.call("hub.v1.HubService/EncodeRoleKey", {"roleKey": CTO_KEY})
        self.assertEqual(enc["wire"], CTO_WIRE)
        self.assertEqual(len(enc["wire"]), 86)
        self.assertEqual(enc["topic"], "topic:role:" + CTO_WIRE)
        dec = self.call("hub.v1.HubService/DecodeRoleKey", {"wire": enc["wire"]})
        self.assertEqual(dec["roleKey"]["projectId"], CTO_KEY["projectId"])
        self.assertEqual(dec["roleKey"]["kind"], "ROLE_KIND_CTO")
        self.assertEqual(dec["wire"], CTO_WIRE)

    def test_lead_key_is_140_bytes_and_round_trips(self):
        key = {"projectId": "prj_AAAAAAAAAAAAAAAAAAAAAA", "kind": "ROLE_KIND_LEAD",
               "scopeId": "scp_BBBBBBBBBBBBBBBBBBBBBB"}
        enc = self.call("hub.v1.HubService/EncodeRoleKey", {"roleKey": key})
        self.assertEqual(len(enc["wire"]), 140)
        dec = self.call("hub.v1.HubService/DecodeRoleKey", {"wire": enc["wire"]})
        self.assertEqual(dec["roleKey"], key)

    def test_bad_wire_is_invalid_argument_with_its_reason(self):
        code, out, err = hubtest.buf_curl(self.hubd.address, "hub.v1.HubService/DecodeRoleKey",
                                          {"wire": "rk3." + CTO_WIRE[4:]})
        self.assertNotEqual(code, 0)
        status, info = hubtest.error_info(err)
        self.assertEqual(status, "invalid_argument")
        self.assertEqual(info.get("reason"), "ROLE_KEY_WIRE_PREFIX")
        self.assertEqual(info.get("domain"), "hub.v1")
        # The reason leads the message too, for people reading buf curl output.
        self.assertTrue(json.loads(err)["message"].startswith("ROLE_KEY_WIRE_PREFIX: "))

    def test_non_canonical_wire_with_padding_is_rejected(self):
        code, _, err = hubtest.buf_curl(self.hubd.address, "hub.v1.HubService/DecodeRoleKey",
                                        {"wire": CTO_WIRE + "="})
        self.assertNotEqual(code, 0)
        status, info = hubtest.error_info(err)
        self.assertEqual(status, "invalid_argument")
        self.assertEqual(info.get("reason"), "ROLE_KEY_NON_CANONICAL")

    def test_cto_key_with_a_scope_is_rejected(self):
        key = dict(CTO_KEY, scopeId="scp_BBBBBBBBBBBBBBBBBBBBBB")
        code, _, err = hubtest.buf_curl(self.hubd.address, "hub.v1.HubService/EncodeRoleKey",
                                        {"roleKey": key})
        self.assertNotEqual(code, 0)
        status, info = hubtest.error_info(err)
        self.assertEqual(status, "invalid_argument")
        self.assertEqual(info.get("reason"), "ROLE_SCOPE_FORBIDDEN")

    def test_status_reports_version_identity_and_store(self):
        st = self.call("hub.v1.HubService/GetStatus", {})
        self.assertEqual(st["version"], "0.1.0")
        self.assertEqual(st["hubInstanceId"], self.hubd.instance_id)
        self.assertEqual(st["storePath"], self.hubd.store_path)
        self.assertEqual(st["storeType"], "sqlite")
        self.assertTrue(st["storeFingerprint"].startswith("sqlite:"))
        self.assertIn("uptime", st)


class MessagesOverBufCurlTest(unittest.TestCase):
    """Publish, ListPending, Ack, ListTrace and ListDeadLetters on the real
    hubd, as the README shows them."""

    def setUp(self):
        self.db = os.path.join(hubtest.tmpdir(), "messages-%s.sqlite" % self._testMethodName)
        self.hubd = hubtest.Hubd(self.db)

    def tearDown(self):
        self.hubd.stop()

    def call(self, service, method, body):
        code, out, err = hubtest.buf_curl(self.hubd.address, "hub.v1.%s/%s" % (service, method),
                                          body)
        self.assertEqual(code, 0, "%s failed: %s" % (method, err))
        return json.loads(out)

    def test_publish_list_pending_and_ack(self):
        self.call("PresenceService", "RegisterAgent", {"agentId": "agent-b",
                                                       "cli": "AGENT_CLI_CLAUDE"})
        pub = self.call("MessageService", "Publish", {
            "fromAgentId": "agent-a", "to": "agent-b", "type": "MESSAGE_TYPE_HANDOFF",
            "priority": 7, "ttl": "600s", "payload": {"task": "review"},
            "traceId": "trace-e2e"})
        self.assertEqual(pub["recipientCount"], 1)
        self.assertEqual(pub["type"], "MESSAGE_TYPE_HANDOFF")
        pending = self.call("MessageService", "ListPending", {"agentId": "agent-b"})
        [d] = pending["deliveries"]
        self.assertEqual(d["message"]["messageId"], pub["messageId"])
        self.assertEqual(d["message"]["payload"], {"task": "review"})
        self.assertEqual(d["state"], "DELIVERY_STATE_DELIVERED")
        ack = self.call("MessageService", "Ack", {"agentId": "agent-b",
                                                  "messageIds": [pub["messageId"], "nope"]})
        self.assertEqual(ack["result"]["ackedMessageIds"], [pub["messageId"]])
        self.assertEqual(ack["result"]["ignoredMessageIds"], ["nope"])
        after = self.call("MessageService", "ListPending", {"agentId": "agent-b"})
        self.assertNotIn("deliveries", after)
        trace = self.call("MessageService", "ListTrace", {"traceId": "trace-e2e"})
        self.assertEqual([m["status"] for m in trace["messages"]], ["MESSAGE_STATUS_ACKED"])
        self.assertEqual(self.call("MessageService", "ListDeadLetters", {}), {})

    def test_a_bad_priority_is_invalid_argument_and_writes_nothing(self):
        code, _, err = hubtest.buf_curl(self.hubd.address, "hub.v1.MessageService/Publish",
                                        {"fromAgentId": "agent-a", "to": "agent-b",
                                         "priority": 12, "traceId": "trace-bad"})
        self.assertNotEqual(code, 0)
        status, info = hubtest.error_info(err)
        self.assertEqual((status, info["reason"]), ("invalid_argument", "PRIORITY_INVALID"))
        self.assertEqual(self.call("MessageService", "ListTrace", {"traceId": "trace-bad"}), {})

    def test_ask_without_a_responder_returns_queued_after_its_timeout(self):
        ask = self.call("MessageService", "Ask", {"fromAgentId": "agent-a", "to": "agent-b",
                                                   "awaitTimeout": "0.2s"})
        self.assertEqual(ask["state"], "ASK_STATE_QUEUED")
        self.assertEqual(ask["recipientCount"], 1)


class HungAgentTest(unittest.TestCase):
    """An agent that stops answering (SIGSTOP: its process is alive but hung,
    so the kernel keeps the TCP connection open) is found by HTTP/2 keepalive:
    its presence stream ends within keepalive interval + timeout."""

    def test_a_hung_agent_loses_its_stream_within_the_keepalive_window(self):
        hubd = hubtest.Hubd(os.path.join(hubtest.tmpdir(), "hung.sqlite"),
                            "--keepalive_interval=1s", "--keepalive_timeout=1s")
        try:
            code, _, err = hubtest.buf_curl(hubd.address, "hub.v1.PresenceService/RegisterAgent",
                                            {"agentId": "agent-hung", "cli": "AGENT_CLI_OTHER"})
            self.assertEqual(code, 0, err)
            # The client keeps its stream open (stdin stays open) until stopped.
            client = subprocess.Popen(
                [hubtest.buf_path(), "curl", "--protocol", "grpc", "--http2-prior-knowledge",
                 "-d", "@-", "http://%s/hub.v1.PresenceService/Attach" % hubd.address],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                text=True)
            client.stdin.write(json.dumps({"hello": {"agentId": "agent-hung",
                                                     "presenceGeneration": "1"}}) + "\n")
            client.stdin.flush()

            def open_streams():
                code, out, err = hubtest.buf_curl(hubd.address, "hub.v1.HubService/GetStatus", {})
                self.assertEqual(code, 0, err)
                return int(json.loads(out).get("openPresenceStreams", "0"))

            deadline = time.monotonic() + 20
            while open_streams() != 1:
                self.assertLess(time.monotonic(), deadline, "the stream never attached")
                time.sleep(0.1)
            client.send_signal(signal.SIGSTOP)
            stopped = time.monotonic()
            try:
                while open_streams() != 0:
                    self.assertLess(time.monotonic() - stopped, 15,
                                    "the hung client's stream was never dropped")
                    time.sleep(0.1)
                # interval + timeout = 2 s; allow for ping scheduling on a busy machine
                elapsed = time.monotonic() - stopped
                print("hung client's stream dropped after %.2f s" % elapsed, file=sys.stderr)
                self.assertLess(elapsed, 8)
            finally:
                client.send_signal(signal.SIGCONT)
                client.kill()
                client.wait(timeout=30)
        finally:
            hubd.stop()


class PresenceOverBufCurlTest(unittest.TestCase):
    """RegisterAgent, Heartbeat, the Attach stream, lookups and Deregister on
    the real hubd, and agents surviving a restart of it."""

    def setUp(self):
        self.db = os.path.join(hubtest.tmpdir(), "presence-%s.sqlite" % self._testMethodName)
        self.hubd = hubtest.Hubd(self.db)

    def tearDown(self):
        self.hubd.stop()

    def call(self, method, body):
        code, out, err = hubtest.buf_curl(self.hubd.address, "hub.v1.PresenceService/" + method, body)
        self.assertEqual(code, 0, "%s failed: %s" % (method, err))
        return json.loads(out)

    def fail_reason(self, method, body):
        code, _, err = hubtest.buf_curl(self.hubd.address, "hub.v1.PresenceService/" + method, body)
        self.assertNotEqual(code, 0)
        return hubtest.error_info(err)

    def test_register_heartbeat_get_list_and_deregister(self):
        reg = self.call("RegisterAgent", {"agentId": "session:e2e", "cli": "AGENT_CLI_CLAUDE",
                                          "topics": ["builds"], "heartbeatTtl": "30s"})
        self.assertEqual(reg["presenceGeneration"], "1")
        self.assertEqual(reg["hubInstanceId"], self.hubd.instance_id)
        self.assertEqual(reg["agent"]["status"], "AGENT_STATUS_ONLINE")
        hb = self.call("Heartbeat", {"agentId": "session:e2e", "presenceGeneration": "1"})
        self.assertEqual(hb["status"], "AGENT_STATUS_ONLINE")
        got = self.call("GetAgent", {"agentId": "session:e2e"})
        self.assertEqual(got["agent"]["topics"], ["builds"])
        listed = self.call("ListAgents", {"topic": "builds"})
        self.assertEqual([a["agentId"] for a in listed["agents"]], ["session:e2e"])
        dereg = self.call("Deregister", {"agentId": "session:e2e", "presenceGeneration": "1"})
        self.assertTrue(dereg["changed"])
        self.assertEqual(dereg["agent"]["status"], "AGENT_STATUS_OFFLINE")
        status, info = self.fail_reason("Heartbeat", {"agentId": "session:e2e"})
        self.assertEqual((status, info["reason"]), ("failed_precondition", "AGENT_OFFLINE"))

    def test_a_late_heartbeat_from_the_old_owner_is_stale_presence_owner(self):
        self.call("RegisterAgent", {"agentId": "agent-a", "cli": "AGENT_CLI_CODEX"})
        self.call("RegisterAgent", {"agentId": "agent-a", "cli": "AGENT_CLI_CODEX"})
        status, info = self.fail_reason("Heartbeat", {"agentId": "agent-a", "presenceGeneration": "1"})
        self.assertEqual(status, "failed_precondition")
        self.assertEqual(info["reason"], "STALE_PRESENCE_OWNER")
        self.assertEqual(info["metadata"]["presence_generation"], "2")

    def test_a_codex_agent_with_a_claude_uds_locator_is_rejected_and_not_written(self):
        locator = {"schemaVersion": "tfx.transport-locator.v1", "transportId": "trn_1",
                   "kind": "TRANSPORT_KIND_CLAUDE_UDS", "hostId": "hst_h",
                   "capabilities": ["TRANSPORT_CAPABILITY_PROBE"], "priority": "1",
                   "expiresAt": "2099-01-01T00:00:00Z",
                   "claudeUds": {"sessionId": "s", "bridgeId": "b"}}
        status, info = self.fail_reason("RegisterAgent", {"agentId": "codex-1", "cli": "AGENT_CLI_CODEX",
                                                          "transportLocators": [locator]})
        self.assertEqual((status, info["reason"]), ("invalid_argument", "CODEX_TRANSPORT_UNSUPPORTED"))
        self.assertEqual(self.fail_reason("GetAgent", {"agentId": "codex-1"})[1]["reason"],
                         "AGENT_NOT_FOUND")

    def test_attach_streams_an_attached_frame_and_lease_acks(self):
        self.call("RegisterAgent", {"agentId": "agent-s", "cli": "AGENT_CLI_GEMINI"})
        frames = "\n".join(json.dumps(f) for f in (
            {"frameId": "1", "hello": {"agentId": "agent-s", "presenceGeneration": "1"}},
            {"frameId": "2", "heartbeat": {}}))
        r = subprocess.run([hubtest.buf_path(), "curl", "--protocol", "grpc", "--http2-prior-knowledge",
                            "-d", "@-", "http://%s/hub.v1.PresenceService/Attach" % self.hubd.address],
                           input=frames, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        replies = [json.loads(chunk) for chunk in re.split(r"(?<=\})\s*(?=\{)", r.stdout.strip())]
        self.assertIn("attached", replies[0])
        self.assertEqual(replies[0]["attached"]["agent"]["streamAttached"], True)
        self.assertEqual(replies[1]["frameId"], "2")
        self.assertIn("leaseAck", replies[1])

    def test_agents_survive_a_restart_and_the_old_hub_instance_is_rejected(self):
        reg = self.call("RegisterAgent", {"agentId": "agent-r", "cli": "AGENT_CLI_OTHER"})
        self.assertEqual(self.hubd.stop(), 0)
        self.hubd = hubtest.Hubd(self.db)
        got = self.call("GetAgent", {"agentId": "agent-r"})
        self.assertEqual(got["agent"]["presenceGeneration"], "1")
        self.assertEqual(got["agent"]["status"], "AGENT_STATUS_ONLINE")
        status, info = self.fail_reason("Heartbeat", {"agentId": "agent-r", "presenceGeneration": "1",
                                                      "hubInstanceId": reg["hubInstanceId"]})
        self.assertEqual((status, info["reason"]), ("failed_precondition", "STALE_HUB_INSTANCE"))
        self.call("Heartbeat", {"agentId": "agent-r", "presenceGeneration": "1",
                                "hubInstanceId": self.hubd.instance_id})


class ActivationOverTmuxTest(unittest.TestCase):
    """EnsureRole on the real hubd wakes a candidate through the real tmux
    adapter (the activation envelope is typed into its session), and the
    candidate's AckRoleActivation makes the role active."""

    PROJECT = "prj_AAAAAAAAAAAAAAAAAAAAAA"

    def setUp(self):
        self.server = "hub-e2e-%d" % os.getpid()
        self.dir = tempfile.mkdtemp(prefix="hubtmux.", dir="/tmp")
        self.out = os.path.join(self.dir, "out.txt")
        subprocess.run(["tmux", "-L", self.server, "new-session", "-d", "-s", "work",
                        "stty -echo; cat > %s" % self.out], check=True, timeout=30)
        self.hubd = hubtest.Hubd(os.path.join(hubtest.tmpdir(), "tmux.sqlite"))

    def tearDown(self):
        self.hubd.stop()
        subprocess.run(["tmux", "-L", self.server, "kill-server"], timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)

    def call(self, service, method, body):
        code, out, err = hubtest.buf_curl(self.hubd.address, "hub.v1.%s/%s" % (service, method), body)
        self.assertEqual(code, 0, "%s failed: %s" % (method, err))
        return json.loads(out)

    def test_ensure_wakes_the_candidate_in_tmux_and_its_ack_makes_the_role_active(self):
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 50))
        self.call("PresenceService", "RegisterAgent", {
            "agentId": "session:tmux", "cli": "AGENT_CLI_CLAUDE", "projectId": self.PROJECT,
            "capabilities": ["role:cto:candidate"], "heartbeatTtl": "60s",
            "transportLocators": [{
                "schemaVersion": "tfx.transport-locator.v1", "transportId": "trn_tmux",
                "kind": "TRANSPORT_KIND_TMUX", "hostId": "hst_e2e",
                "capabilities": ["TRANSPORT_CAPABILITY_PROBE", "TRANSPORT_CAPABILITY_WAKE",
                                 "TRANSPORT_CAPABILITY_ACTIVATE"],
                "priority": "100", "expiresAt": expires,
                "tmux": {"sessionName": "work", "muxServerId": self.server}}]})
        key = {"projectId": self.PROJECT, "kind": "ROLE_KIND_CTO"}
        self.call("RoleService", "UpsertRoleCandidate", {"roleKey": key, "agentId": "session:tmux"})
        receipt = self.call("RoleService", "EnsureRole", {
            "roleKey": key, "trigger": "ENSURE_ROLE_TRIGGER_MANUAL", "causeId": "e2e"})["receipt"]
        self.assertEqual(receipt["disposition"], "ENSURE_ROLE_DISPOSITION_STARTED")
        self.assertEqual(receipt["holderAgentId"], "session:tmux")

        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline and not line.endswith("\n"):
            time.sleep(0.05)
            if os.path.exists(self.out):
                with open(self.out) as f:
                    line = f.read()
        activation = json.loads(line)
        self.assertEqual(activation["schema"], "tfx.role-activation.v1")
        self.assertEqual(activation["epoch"], int(receipt["epoch"]))

        wire = activation["role_key_wire"]
        result = self.call("RoleService", "AckRoleActivation", {"agentId": "session:tmux", "ack": {
            "schema": "tfx.role-activation-ack.v1", "activationId": activation["activation_id"],
            "roleKeyWire": wire, "epoch": str(activation["epoch"]),
            "activationSeq": str(activation["activation_seq"]),
            "holderAgentId": "session:tmux", "reachable": True,
            "charterAck": {"roleKeyWire": wire, "epoch": str(activation["epoch"]),
                           "charterVersion": activation["charter_version"]}}})["result"]
        self.assertEqual(result["role"]["state"], "ROLE_STATE_ACTIVE")
        role = self.call("RoleService", "GetRole", {"roleKeyWire": wire})["role"]
        self.assertEqual(role["state"], "ROLE_STATE_ACTIVE")
        self.assertEqual(role["holderAgentId"], "session:tmux")


class HubdLifecycleTest(unittest.TestCase):
    def test_sigterm_stops_hubd_with_exit_code_zero(self):
        h = hubtest.Hubd(os.path.join(hubtest.tmpdir(), "term.sqlite"))
        self.assertEqual(h.stop(signal.SIGTERM), 0)
        self.assertIn("shutting down", h.stderr())

    def test_sigint_stops_hubd_with_exit_code_zero(self):
        h = hubtest.Hubd(os.path.join(hubtest.tmpdir(), "int.sqlite"))
        self.assertEqual(h.stop(signal.SIGINT), 0)

    def test_taken_port_is_a_clear_error_and_exit_code_one(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            port = s.getsockname()[1]
            r = subprocess.run([hubtest.hubd_path(), "--listen=127.0.0.1:%d" % port,
                                "--db=" + os.path.join(hubtest.tmpdir(), "port.sqlite")],
                               capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot listen on 127.0.0.1:%d" % port, r.stderr)

    def test_second_hubd_on_the_same_port_is_refused(self):
        h = hubtest.Hubd(os.path.join(hubtest.tmpdir(), "first.sqlite"))
        try:
            r = subprocess.run([hubtest.hubd_path(), "--listen=" + h.address,
                                "--db=" + os.path.join(hubtest.tmpdir(), "second.sqlite")],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 1)
            self.assertIn("cannot listen", r.stderr)
        finally:
            h.stop()

    def test_second_hubd_on_a_held_database_is_refused_naming_the_holder(self):
        db = os.path.join(hubtest.tmpdir(), "held.sqlite")
        h = hubtest.Hubd(db)
        try:
            r = subprocess.run([hubtest.hubd_path(), "--listen=127.0.0.1:0", "--db=" + db],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertNotIn("serving on", r.stdout)
            self.assertIn("hubd: database %s is in use by hubd" % db, r.stderr)
            self.assertIn("pid %d" % h.proc.pid, r.stderr)
            self.assertIn("address %s" % h.address, r.stderr)
            self.assertIn("hub_instance_id %s" % h.instance_id, r.stderr)
            # The first hub still serves, and still writes.
            code, out, err = hubtest.buf_curl(
                h.address, "hub.v1.PresenceService/RegisterAgent",
                {"agentId": "session:after-refusal", "cli": "AGENT_CLI_CLAUDE"})
            self.assertEqual(code, 0, err)
            code, out, err = hubtest.buf_curl(h.address, "hub.v1.HubService/GetStatus", {})
            self.assertEqual(code, 0, err)
            self.assertEqual(json.loads(out)["hubInstanceId"], h.instance_id)
        finally:
            self.assertEqual(h.stop(), 0)

    def test_a_new_hubd_starts_at_once_after_the_holder_is_killed(self):
        db = os.path.join(hubtest.tmpdir(), "killed.sqlite")
        first = hubtest.Hubd(db)
        first.stop(signal.SIGKILL)
        # No stale lock: the kernel released it with the dead process.
        second = hubtest.Hubd(db)
        try:
            self.assertNotEqual(second.instance_id, first.instance_id)
            code, out, err = hubtest.buf_curl(second.address, "hub.v1.HubService/GetStatus", {})
            self.assertEqual(code, 0, err)
        finally:
            self.assertEqual(second.stop(), 0)

    def test_a_database_url_is_refused_with_what_hubd_accepts(self):
        workdir = tempfile.mkdtemp(dir=hubtest.tmpdir())
        for db, scheme in (("mysql://user:s3cret@localhost/hub", "mysql"),
                           ("file:hub.sqlite", "file")):
            r = subprocess.run([hubtest.hubd_path(), "--listen=127.0.0.1:0", "--db=" + db],
                               capture_output=True, text=True, timeout=60, cwd=workdir)
            self.assertEqual(r.returncode, 1, db)
            self.assertNotIn("serving on", r.stdout)
            self.assertIn("must be a SQLite file path", r.stderr)
            self.assertIn("or a PostgreSQL URL", r.stderr)
            self.assertIn("'%s:'" % scheme, r.stderr)
            self.assertNotIn("s3cret", r.stderr)
        self.assertEqual(os.listdir(workdir), [], "a URL created files")

    def test_an_unreachable_postgresql_database_is_named_without_its_password(self):
        workdir = tempfile.mkdtemp(dir=hubtest.tmpdir())
        missing = os.path.join(workdir, "no-server-here")
        db = "postgresql://user:s3cret@/hub?host=" + missing
        r = subprocess.run([hubtest.hubd_path(), "--listen=127.0.0.1:0", "--db=" + db],
                           capture_output=True, text=True, timeout=60, cwd=workdir)
        self.assertEqual(r.returncode, 1)
        self.assertNotIn("serving on", r.stdout)
        self.assertIn("is unusable", r.stderr)
        self.assertIn("dbname=hub", r.stderr)
        self.assertNotIn("s3cret", r.stderr)
        self.assertEqual(os.listdir(workdir), [], "a URL created files")

    def test_unusable_database_path_is_a_clear_error_and_exit_code_one(self):
        not_a_db = os.path.join(hubtest.tmpdir(), "not_a_db.sqlite")
        with open(not_a_db, "wb") as f:
            f.write(b"this is not a sqlite database, just text " * 100)
        for db in ("/proc/hub-cannot-live-here/hub.sqlite", not_a_db):
            r = subprocess.run([hubtest.hubd_path(), "--listen=127.0.0.1:0", "--db=" + db],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 1, db)
            self.assertIn("hubd:", r.stderr)
            self.assertIn(db, r.stderr)

    def test_help_prints_usage_with_the_flags(self):
        r = subprocess.run([hubtest.hubd_path(), "--help"], capture_output=True,
                           text=True, timeout=60)
        text = r.stdout + r.stderr
        self.assertIn("--listen", text)
        self.assertIn("--db", text)
        self.assertIn("coordination service", text)


if __name__ == "__main__":
    hubtest.run_tests()
