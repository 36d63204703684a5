#!/usr/bin/python3
"""The Python client against the real hubd: stubs generated at test time from
proto/hub/v1, a session that registers, attaches, heartbeats, receives and
acknowledges a message, errors that carry hub's reason codes, and JobService's
calls from both sides (a supervisor's and a worker's)."""
import os
import signal
import sys
import threading
import time
import unittest

import grpc
from google.protobuf import duration_pb2, json_format, struct_pb2

# Under Bazel the runfiles tree holds clients/python and tests/e2e; from a
# checkout they are found relative to this file.
_RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", ""), os.environ.get("TEST_WORKSPACE", ""))
_ROOT = _RUNFILES if os.environ.get("TEST_SRCDIR") else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
sys.path.insert(0, os.path.join(_ROOT, "clients", "python"))
sys.path.insert(0, os.path.join(_ROOT, "tests", "e2e"))
import hubtest  # noqa: E402
from hub_client import HubClient, HubError, PresenceSession  # noqa: E402


class _OneHubdTest(unittest.TestCase):
    """A hubd on a fresh SQLite database (DB) and a client, for the class."""

    DB = None

    @classmethod
    def setUpClass(cls):
        os.environ.setdefault("HUB_PROTO_DIR", os.path.join(_ROOT, "proto"))
        os.environ.setdefault("HUB_PY_STUBS_DIR", os.path.join(hubtest.tmpdir(), "py-stubs"))
        cls.hubd = hubtest.Hubd(os.path.join(hubtest.tmpdir(), cls.DB))
        cls.client = HubClient(cls.hubd.address)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.hubd.stop()


class PythonClientTest(_OneHubdTest):
    DB = "python-client.sqlite"

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


def _struct(value):
    s = struct_pb2.Struct()
    s.update(value)
    return s


class PythonClientJobsTest(_OneHubdTest):
    """JobService through client.jobs: create, claim, heartbeat, complete,
    fail, retry, cancel, get and list, a superseded attempt's late result, and
    the refusals' reasons."""

    DB = "python-jobs.sqlite"
    PROJECT = "prj_PYTHONCLIENTJOBSAAAAAA"

    def worker(self, agent_id):
        s = PresenceSession(self.client, agent_id, "AGENT_CLI_CODEX", heartbeat_ttl=30.0,
                            project_id=self.PROJECT)
        self.addCleanup(s.stop)
        s.start()
        return s

    def create(self, worker, task, **fields):
        return self.client.jobs.create_job(
            project_id=self.PROJECT, supervisor={"agent_id": "py-job-sup"},
            worker={"agent_id": worker}, task=task, **fields)

    def test_a_job_is_created_claimed_beaten_and_completed(self):
        pb = self.client.pb.job_pb2
        w = self.worker("py-job-worker-1")
        self.assertFalse(self.client.jobs.claim_job(agent_id="py-job-worker-1").HasField("job"))
        created = self.create("py-job-worker-1", "run the tests",
                              payload=_struct({"target": "//..."}), priority=7,
                              timeout=duration_pb2.Duration(seconds=300), max_attempts=3)
        self.assertTrue(created.created)
        job = created.job
        self.assertEqual(job.state, pb.JOB_STATE_QUEUED)
        self.assertEqual((job.priority, job.timeout.seconds, job.max_attempts, job.topic),
                         (7, 300, 3, "assign.job"))
        # The same idempotency key returns the first job.
        keyed = self.create("py-job-worker-1", "keyed", idempotency_key="py-key-1")
        again = self.create("py-job-worker-1", "keyed", idempotency_key="py-key-1")
        self.assertFalse(again.created)
        self.assertEqual(again.job.job_id, keyed.job.job_id)

        claimed = self.client.jobs.claim_job(agent_id="py-job-worker-1", job_id=job.job_id,
                                             presence_generation=w.presence_generation).job
        self.assertEqual(claimed.state, pb.JOB_STATE_RUNNING)
        self.assertEqual(json_format.MessageToDict(claimed.payload), {"target": "//..."})
        self.assertEqual((claimed.attempt.job_id, claimed.attempt.attempt, claimed.attempt.agent_id,
                          claimed.attempt.presence_generation),
                         (job.job_id, 1, "py-job-worker-1", w.presence_generation))
        beat = self.client.jobs.heartbeat_job(attempt=claimed.attempt,
                                              progress=_struct({"passed": 120}))
        self.assertFalse(beat.cancel_requested)
        self.assertGreater(beat.deadline.ToMilliseconds(), int(time.time() * 1000))
        running = self.client.jobs.get_job(job_id=job.job_id).job
        self.assertEqual(json_format.MessageToDict(running.progress), {"passed": 120})

        done = self.client.jobs.complete_job(attempt=claimed.attempt,
                                             result=_struct({"passed": 300})).job
        self.assertEqual(done.state, pb.JOB_STATE_SUCCEEDED)
        self.assertEqual(json_format.MessageToDict(done.result), {"passed": 300})
        listed = self.client.jobs.list_jobs(project_id=self.PROJECT,
                                            supervisor_agent_id="py-job-sup",
                                            states=[pb.JOB_STATE_SUCCEEDED])
        self.assertEqual([j.job_id for j in listed.jobs], [job.job_id])

    def test_fail_retry_cancel_a_late_result_and_the_refusals(self):
        pb = self.client.pb.job_pb2
        self.worker("py-job-worker-2")
        job = self.create("py-job-worker-2", "deploy", max_attempts=2,
                          retry_policy={"initial_backoff": duration_pb2.Duration()}).job
        first = self.client.jobs.claim_job(agent_id="py-job-worker-2", job_id=job.job_id).job
        # A retryable failure with an attempt left: queued again as attempt 2.
        failed = self.client.jobs.fail_job(
            attempt=first.attempt,
            error={"reason": "flaky", "message": "the runner died", "retryable": True}).job
        self.assertEqual((failed.state, failed.attempt.attempt, failed.error.reason),
                         (pb.JOB_STATE_QUEUED, 2, "flaky"))
        second = self.client.jobs.claim_job(agent_id="py-job-worker-2", job_id=job.job_id).job
        self.assertEqual(second.attempt.attempt, 2)
        # The first attempt's completion is refused, and kept as a late result.
        with self.assertRaises(HubError) as caught:
            self.client.jobs.complete_job(attempt=first.attempt, result=_struct({"late": True}))
        self.assertEqual(caught.exception.code, grpc.StatusCode.FAILED_PRECONDITION)
        self.assertEqual(caught.exception.reason, "ASSIGN_ATTEMPT_MISMATCH")
        self.assertEqual(caught.exception.metadata.get("job_id"), job.job_id)
        late = self.client.jobs.get_job(job_id=job.job_id).job.late_results
        self.assertEqual([(l.attempt, l.agent_id) for l in late], [(1, "py-job-worker-2")])
        self.assertEqual(json_format.MessageToDict(late[0].result), {"late": True})

        # A running job's cancellation reaches its worker through the heartbeat.
        marked = self.client.jobs.cancel_job(job_id=job.job_id, reason="frozen").job
        self.assertEqual((marked.state, marked.cancel_requested), (pb.JOB_STATE_RUNNING, True))
        self.assertTrue(self.client.jobs.heartbeat_job(attempt=second.attempt).cancel_requested)
        stopped = self.client.jobs.fail_job(attempt=second.attempt,
                                            error={"reason": "cancelled"}).job
        self.assertEqual(stopped.state, pb.JOB_STATE_CANCELLED)
        again = self.client.jobs.retry_job(job_id=job.job_id).job
        self.assertEqual((again.state, again.attempt.attempt), (pb.JOB_STATE_QUEUED, 3))
        with self.assertRaises(HubError) as caught:
            self.client.jobs.retry_job(job_id=job.job_id)
        self.assertEqual(caught.exception.reason, "JOB_NOT_ENDED")

        with self.assertRaises(HubError) as caught:
            self.client.jobs.get_job(job_id="no-such-job")
        self.assertEqual((caught.exception.code, caught.exception.reason),
                         (grpc.StatusCode.NOT_FOUND, "ASSIGN_NOT_FOUND"))
        with self.assertRaises(HubError) as caught:
            self.create("py-job-worker-2", "x", priority=10)
        self.assertEqual((caught.exception.code, caught.exception.reason),
                         (grpc.StatusCode.INVALID_ARGUMENT, "JOB_FIELD_INVALID"))
        self.assertEqual(caught.exception.metadata.get("field"), "priority")
        with self.assertRaises(HubError) as caught:
            self.create("py-job-worker-2", "x", depends_on=["no-such-parent"])
        self.assertEqual(caught.exception.reason, "JOB_DEPENDENCY_NOT_FOUND")


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
