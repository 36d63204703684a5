#!/usr/bin/python3
"""The Python client against the real hubd: stubs generated at test time from
proto/hub/v1, a session that registers, attaches, heartbeats, receives and
acknowledges a message, and errors that carry hub's reason codes."""
import os
import signal
import sys
import threading
import time
import unittest

import grpc

# Under Bazel the runfiles tree holds clients/python and tests/e2e; from a
# checkout they are found relative to this file.
_RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", ""), os.environ.get("TEST_WORKSPACE", ""))
_ROOT = _RUNFILES if os.environ.get("TEST_SRCDIR") else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
sys.path.insert(0, os.path.join(_ROOT, "clients", "python"))
sys.path.insert(0, os.path.join(_ROOT, "tests", "e2e"))
import hubtest  # noqa: E402
from hub_client import HubClient, HubError, PresenceSession  # noqa: E402


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.environ.setdefault("HUB_PROTO_DIR", os.path.join(_ROOT, "proto"))
        os.environ.setdefault("HUB_PY_STUBS_DIR", os.path.join(hubtest.tmpdir(), "py-stubs"))
        cls.hubd = hubtest.Hubd(os.path.join(hubtest.tmpdir(), "python-client.sqlite"))
        cls.client = HubClient(cls.hubd.address)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.hubd.stop()

    def session(self, agent_id, **kwargs):
        s = PresenceSession(self.client, agent_id, "AGENT_CLI_CODEX", heartbeat_ttl=10.0,
                            **kwargs)
        self.addCleanup(s.stop)
        return s

    def test_status_reports_the_running_hub(self):
        status = self.client.hub.get_status()
        self.assertEqual(status.hub_instance_id, self.hubd.instance_id)
        self.assertTrue(status.store_fingerprint.startswith("sqlite:"))

    def test_a_session_registers_attaches_and_heartbeats(self):
        s = self.session("py-presence-1", heartbeat_interval=0.2)
        attached = s.start()
        self.assertEqual(attached.presence_generation, 1)
        self.assertEqual(attached.hub_instance_id, self.hubd.instance_id)
        lease = s.heartbeat()
        self.assertEqual(lease.presence_generation, 1)
        self.assertEqual(lease.status, self.client.pb.agent_pb2.AGENT_STATUS_ONLINE)
        deadline = time.monotonic() + 10
        while s.last_lease is None and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertIsNotNone(s.last_lease, "a background heartbeat was answered")
        self.assertEqual(s.last_lease.presence_generation, 1)
        self.assertFalse(s.ended.is_set())
        agent = self.client.presence.get_agent(agent_id="py-presence-1").agent
        self.assertTrue(agent.stream_attached)
        self.assertEqual(agent.pid, os.getpid())

    def test_a_published_message_is_received_and_acknowledged(self):
        s = self.session("py-inbox-1")
        s.start()
        published = self.client.messages.publish(from_agent_id="py-sender-1", to="py-inbox-1")
        delivery = s.next_message(timeout=20)
        self.assertIsNotNone(delivery)
        self.assertEqual(delivery.message.message_id, published.message_id)
        result = s.ack([published.message_id])
        self.assertEqual(list(result.acked_message_ids), [published.message_id])
        pending = self.client.messages.list_pending(agent_id="py-inbox-1", peek=True)
        self.assertEqual(len(pending.deliveries), 0)

    def test_errors_carry_the_status_code_and_reason(self):
        with self.assertRaises(HubError) as caught:
            self.client.presence.register_agent(agent_id="x", cli="AGENT_CLI_CLAUDE")
        self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(caught.exception.reason, "AGENT_ID_INVALID")
        self.assertEqual(caught.exception.domain, "hub.v1")
        with self.assertRaises(HubError) as caught:
            self.client.presence.heartbeat(agent_id="py-nobody")
        self.assertEqual(caught.exception.code, grpc.StatusCode.NOT_FOUND)
        self.assertEqual(caught.exception.reason, "AGENT_NOT_FOUND")

    def test_a_rejected_frame_raises_its_reason_and_keeps_the_stream(self):
        s = self.session("py-frames-1")
        s.start()
        with self.assertRaises(HubError) as caught:
            s.ack([""])
        self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(caught.exception.reason, "MESSAGE_ID_INVALID")
        self.assertFalse(s.ended.is_set())
        s.heartbeat()

    def test_a_newer_registration_ends_the_first_session_with_lost_authority(self):
        first = self.session("py-owner-1")
        first.start()
        second = self.session("py-owner-1")
        second.start()
        self.assertTrue(first.ended.wait(20))
        self.assertTrue(first.authority_lost)
        self.assertEqual(first.end_error.code, grpc.StatusCode.FAILED_PRECONDITION)
        self.assertEqual(first.end_error.reason, "STALE_PRESENCE_OWNER")
        self.assertEqual(first.fencing.current_presence_generation,
                         second.presence_generation)
        self.assertFalse(second.ended.is_set())


class PythonClientRestartTest(unittest.TestCase):
    """A client that outlives hubd being killed (SIGKILL) and restarted on the
    same address and database."""

    @classmethod
    def setUpClass(cls):
        os.environ.setdefault("HUB_PROTO_DIR", os.path.join(_ROOT, "proto"))
        os.environ.setdefault("HUB_PY_STUBS_DIR", os.path.join(hubtest.tmpdir(), "py-stubs"))
        cls.db = os.path.join(hubtest.tmpdir(), "python-restart.sqlite")
        cls.hubd = hubtest.Hubd(cls.db)

    @classmethod
    def tearDownClass(cls):
        cls.hubd.stop()

    def test_a_session_started_while_the_hub_is_down_attaches_soon_after_it_serves(self):
        client = HubClient(self.hubd.address)  # the defaults, as an agent runs it
        self.addCleanup(client.close)
        first = PresenceSession(client, "py-restart-1", "AGENT_CLI_CODEX")
        self.addCleanup(first.stop)
        first.start()
        first_instance = first.hub_instance_id

        self.hubd.stop(signal.SIGKILL)
        self.assertTrue(first.ended.wait(20))
        # The hub stays down until the channel has failed to reconnect.
        failed = threading.Event()

        def on_state(state):
            if state == grpc.ChannelConnectivity.TRANSIENT_FAILURE:
                failed.set()
        client.channel.subscribe(on_state, try_to_connect=True)
        self.assertTrue(failed.wait(30), "the channel never failed to reconnect")
        client.channel.unsubscribe(on_state)

        second = PresenceSession(client, "py-restart-1", "AGENT_CLI_CODEX")
        self.addCleanup(second.stop)
        outcome = {}
        done = threading.Event()

        def start():
            try:
                outcome["attached"] = second.start(timeout=60)
            except HubError as err:
                outcome["error"] = err
            finally:
                done.set()
        threading.Thread(target=start, daemon=True).start()
        self.__class__.hubd = hubtest.Hubd(self.db, listen=self.hubd.address)
        serving = time.monotonic()
        # Generous for a busy machine; a healthy client takes well under a second.
        self.assertTrue(done.wait(10), "not attached 10 s after the hub was serving")
        self.assertNotIn("error", outcome)
        self.assertLess(time.monotonic() - serving, 10)
        self.assertEqual(outcome["attached"].hub_instance_id, self.hubd.instance_id)
        self.assertNotEqual(outcome["attached"].hub_instance_id, first_instance)


class PythonClientTlsTest(unittest.TestCase):
    """The client and a session over mutual TLS with a bearer token."""

    TOKEN = "python-client-token-0001"

    @classmethod
    def setUpClass(cls):
        os.environ.setdefault("HUB_PROTO_DIR", os.path.join(_ROOT, "proto"))
        os.environ.setdefault("HUB_PY_STUBS_DIR", os.path.join(hubtest.tmpdir(), "py-stubs"))
        cls.pki = hubtest.make_test_pki(os.path.join(hubtest.tmpdir(), "py-pki"))
        tokens = hubtest.write_tokens(os.path.join(hubtest.tmpdir(), "py-tokens.json"), [
            (cls.TOKEN, "py-builder", "agent", ["*"])])
        cls.hubd = hubtest.Hubd(
            os.path.join(hubtest.tmpdir(), "python-tls.sqlite"),
            "--tls_cert=" + os.path.join(cls.pki, "server.pem"),
            "--tls_key=" + os.path.join(cls.pki, "server.key"),
            "--tls_client_ca=" + os.path.join(cls.pki, "ca.pem"), "--token_file=" + tokens)

    @classmethod
    def tearDownClass(cls):
        cls.hubd.stop()

    def client(self, **kwargs):
        settings = dict(tls_ca=os.path.join(self.pki, "ca.pem"),
                        tls_cert=os.path.join(self.pki, "client.pem"),
                        tls_key=os.path.join(self.pki, "client.key"),
                        tls_server_name="localhost", token=self.TOKEN)
        settings.update(kwargs)
        c = HubClient(self.hubd.address, **settings)
        self.addCleanup(c.close)
        return c

    def test_a_session_connects_with_tls_and_a_token(self):
        client = self.client()
        self.assertEqual(client.hub.get_status().hub_instance_id, self.hubd.instance_id)
        s = PresenceSession(client, "py-tls-1", "AGENT_CLI_CODEX", heartbeat_ttl=10.0)
        self.addCleanup(s.stop)
        self.assertEqual(s.start().presence_generation, 1)
        self.assertEqual(s.heartbeat().presence_generation, 1)

    def test_without_the_token_or_the_right_ca_the_call_fails(self):
        with self.assertRaises(HubError) as ctx:
            self.client(token="").hub.get_status()
        self.assertEqual(ctx.exception.code, grpc.StatusCode.UNAUTHENTICATED)
        self.assertEqual(ctx.exception.reason, "PRINCIPAL_REQUIRED")
        with self.assertRaises(HubError) as ctx:
            self.client(tls_ca=os.path.join(self.pki, "other_ca.pem")).hub.get_status(
                timeout=5)
        self.assertEqual(ctx.exception.code, grpc.StatusCode.UNAVAILABLE)


if __name__ == "__main__":
    hubtest.run_tests()
