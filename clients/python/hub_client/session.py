"""PresenceSession: registers an agent, attaches its presence stream,
heartbeats, receives messages (and activations) and acknowledges messages.

A small, thread-based helper: it does not reconnect by itself. When the
stream ends, `ended` is set and `end_error` tells why (a HubError, None for
a clean end); to come back, start a new session on the same client (its
start() waits for the hub to be reachable again); `authority_lost` is true when another registration or stream
took the agent over (STALE_PRESENCE_OWNER, PRESENCE_STREAM_REPLACED,
AGENT_DEREGISTERED); then do not register again to fight back. The Node.js
client (clients/node) has the full reconnecting session.
"""
import itertools
import os
import queue
import threading

import grpc
from google.protobuf import duration_pb2

from .client import HubError

LOST_REASONS = frozenset(["STALE_PRESENCE_OWNER", "PRESENCE_STREAM_REPLACED",
                          "AGENT_DEREGISTERED"])


def _duration(seconds):
    d = duration_pb2.Duration()
    d.FromMilliseconds(int(seconds * 1000))
    return d


class PresenceSession:
    def __init__(self, client, agent_id, cli, heartbeat_ttl=30.0, heartbeat_fraction=1 / 3,
                 heartbeat_interval=None, frame_timeout=10.0, on_message=None,
                 **registration):
        """registration: further RegisterAgentRequest fields (capabilities,
        topics, project_id, session_id, host_id, ...). on_message(delivery),
        if given, is called on the reader thread for each message; every
        message is also queued for next_message()."""
        self._client = client
        self._pb = client.pb
        self.agent_id = agent_id
        self._cli = cli
        self._ttl = heartbeat_ttl
        self._interval = heartbeat_interval or max(1.0, heartbeat_ttl * heartbeat_fraction)
        self._frame_timeout = frame_timeout
        self._on_message = on_message
        self._registration = dict(registration)
        self._registration.setdefault("pid", os.getpid())
        self._frame_ids = itertools.count(1)
        self._requests = queue.Queue()
        self._waiters = {}
        self._lock = threading.Lock()
        self._attached = threading.Event()
        self._stopping = threading.Event()
        self.ended = threading.Event()
        self.end_error = None
        self.fencing = None
        self.attached = None
        self.last_lease = None  # the PresenceLeaseAck of the last background heartbeat
        self.presence_generation = 0
        self.hub_instance_id = None
        self.store_fingerprint = None
        self.activations = queue.Queue()
        self._messages = queue.Queue()
        self._call = None
        self._threads = []

    @property
    def authority_lost(self):
        return self.end_error is not None and self.end_error.reason in LOST_REASONS

    def start(self, timeout=10.0):
        """Registers, attaches and starts heartbeats. Returns the
        PresenceAttached answer; raises HubError if either step fails.
        While the hub is unreachable it waits for it (up to `timeout`), so a
        new session started after the previous one `ended` attaches as soon
        as a restarted hub serves."""
        self._client.wait_for_connected(timeout)
        registered = self._client.presence.register_agent(
            agent_id=self.agent_id, cli=self._cli, heartbeat_ttl=_duration(self._ttl),
            **self._registration)
        self.presence_generation = registered.presence_generation
        self.hub_instance_id = registered.hub_instance_id
        self.store_fingerprint = registered.store_fingerprint
        pb = self._pb.presence_pb2
        self._call = self._client.attach(self._request_iterator())
        self._requests.put(pb.AttachRequest(frame_id=next(self._frame_ids), hello=pb.AttachHello(
            agent_id=self.agent_id, presence_generation=self.presence_generation,
            hub_instance_id=self.hub_instance_id, store_fingerprint=self.store_fingerprint,
            lease_ttl=_duration(self._ttl))))
        reader = threading.Thread(target=self._read, name="hub-presence-reader", daemon=True)
        reader.start()
        self._threads.append(reader)
        if not self._wait_attached(timeout):
            self._call.cancel()
            raise self.end_error or HubError(grpc.StatusCode.DEADLINE_EXCEEDED,
                                             "no attached answer within %ss" % timeout)
        beat = threading.Thread(target=self._heartbeats, name="hub-presence-heartbeat",
                                daemon=True)
        beat.start()
        self._threads.append(beat)
        return self.attached

    def _wait_attached(self, timeout):
        waited = 0.0
        while waited < timeout:
            if self._attached.wait(0.05):
                return True
            if self.ended.is_set():
                return False
            waited += 0.05
        return self._attached.is_set()

    def heartbeat(self, timeout=None):
        """Sends a heartbeat frame; returns the PresenceLeaseAck."""
        pb = self._pb.presence_pb2
        return self._request(pb.AttachRequest(heartbeat=pb.AttachHeartbeat()), timeout)

    def ack(self, message_ids, timeout=None):
        """Acknowledges messages over the stream; returns MessageAckResult.
        Raises HubError with the frame_error's reason when the hub rejects
        the frame (the stream stays open)."""
        pb = self._pb.presence_pb2
        return self._request(pb.AttachRequest(message_ack=pb.AttachMessageAck(
            message_ids=list(message_ids))), timeout)

    def next_message(self, timeout=None):
        """The next delivered MessageDelivery, or None after `timeout`."""
        try:
            return self._messages.get(timeout=timeout)
        except queue.Empty:
            return None

    def stop(self, deregister=False, timeout=5.0):
        """Half-closes the stream (the hub ends it OK) and, with
        deregister=True, marks the agent offline at once."""
        self._stopping.set()
        self._requests.put(None)
        self.ended.wait(timeout)
        if self._call is not None and not self.ended.is_set():
            self._call.cancel()
        if deregister and not self.authority_lost:
            self._client.presence.deregister(agent_id=self.agent_id,
                                             presence_generation=self.presence_generation)

    # ---- internals -------------------------------------------------------------

    def _request_iterator(self):
        while True:
            frame = self._requests.get()
            if frame is None:
                return
            yield frame

    def _request(self, frame, timeout):
        if self.ended.is_set():
            raise self.end_error or HubError(grpc.StatusCode.UNAVAILABLE,
                                             "the presence stream ended")
        frame.frame_id = next(self._frame_ids)
        done = threading.Event()
        slot = {}
        with self._lock:
            self._waiters[frame.frame_id] = (done, slot)
        self._requests.put(frame)
        if not done.wait(timeout or self._frame_timeout):
            with self._lock:
                self._waiters.pop(frame.frame_id, None)
            raise HubError(grpc.StatusCode.DEADLINE_EXCEEDED,
                           "no answer to frame %d" % frame.frame_id)
        if "error" in slot:
            raise slot["error"]
        return slot["value"]

    def _answer(self, frame_id, value=None, error=None):
        with self._lock:
            waiter = self._waiters.pop(frame_id, None)
        if waiter is None:
            return
        done, slot = waiter
        if error is not None:
            slot["error"] = error
        else:
            slot["value"] = value
        done.set()

    def _read(self):
        try:
            for frame in self._call:
                kind = frame.WhichOneof("frame")
                if kind == "attached":
                    self.attached = frame.attached
                    self.hub_instance_id = frame.attached.hub_instance_id
                    self._attached.set()
                elif kind == "event":
                    self._on_event(frame.event)
                elif kind == "frame_error":
                    self._answer(frame.frame_id, error=HubError.from_error_status(
                        frame.frame_error, self._pb))
                else:
                    self._answer(frame.frame_id, value=getattr(frame, kind))
        except grpc.RpcError as err:
            if not (self._stopping.is_set() and err.code() == grpc.StatusCode.CANCELLED):
                self.end_error = HubError.from_rpc_error(err, self._pb)
        finally:
            self._requests.put(None)  # ends the request iterator
            self.ended.set()
            with self._lock:
                waiters, self._waiters = self._waiters, {}
            for done, slot in waiters.values():
                slot["error"] = self.end_error or HubError(grpc.StatusCode.UNAVAILABLE,
                                                           "the presence stream ended")
                done.set()

    def _on_event(self, event):
        kind = event.WhichOneof("event")
        if kind == "message":
            self._messages.put(event.message)
            if self._on_message is not None:
                self._on_message(event.message)
        elif kind == "role_activation":
            self.activations.put(event.role_activation)
        elif kind == "fencing":
            self.fencing = event.fencing

    def _heartbeats(self):
        while not self._stopping.wait(self._interval):
            if self.ended.is_set():
                return
            try:
                self.last_lease = self.heartbeat()
            except HubError as err:
                if err.code == grpc.StatusCode.DEADLINE_EXCEEDED and self._call is not None:
                    self._call.cancel()  # a hub that stops answering is gone
                    return
