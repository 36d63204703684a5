"""HubClient: one channel to a hub; every RPC fails with a HubError that
carries the gRPC code and hub's reason code (google.rpc.ErrorInfo, domain
"hub.v1", from the grpc-status-details-bin trailer)."""
import collections
import os
import re

import grpc
from google.protobuf import symbol_database

from . import stubs

DEFAULT_DEADLINE = 10.0  # seconds
# Find a dead hub within ~15 s; the hub accepts pings every second or slower.
# While the hub is down the channel tries to connect every 500 ms (+-20 %)
# rather than gRPC's default of up to 120 s, so a client that waits for it
# (wait_for_connected, PresenceSession.start) is back within about that long
# once a restarted hub serves. Each HubClient has its own connection and
# reconnect state: in gRPC's default global pool, channels to one address
# share a subchannel, and a new client inherited an old one's backoff
# (docs/RELIABILITY.md).
DEFAULT_CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 10000),
    ("grpc.keepalive_timeout_ms", 5000),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
    ("grpc.use_local_subchannel_pool", 1),
]
_SERVICES = {
    "hub": ("hub", "HubService"),
    "presence": ("presence", "PresenceService"),
    "roles": ("role_service", "RoleService"),
    "messages": ("message", "MessageService"),
    "jobs": ("job", "JobService"),
}
_REASON_PREFIX = "ERROR_REASON_"


class HubError(Exception):
    """A failed hub call: code (grpc.StatusCode), reason (e.g.
    "STALE_PRESENCE_OWNER", "" when the hub sent none), domain, metadata
    (dict) and details (the server's text, not stable)."""

    def __init__(self, code, details="", reason="", domain="", metadata=None):
        super().__init__("%s: %s%s" % (code.name, details,
                                       " [%s]" % reason if reason and reason not in details
                                       else ""))
        self.code = code
        self.details = details
        self.reason = reason
        self.domain = domain
        self.metadata = dict(metadata or {})

    @classmethod
    def from_rpc_error(cls, err, pb):
        """From a grpc.RpcError (a failed call or a stream's end)."""
        reason, domain, metadata = "", "", {}
        for key, value in (err.trailing_metadata() or ()):
            if key != "grpc-status-details-bin":
                continue
            status = pb.status_pb2.Status.FromString(value)
            for detail in status.details:
                if detail.Is(pb.error_details_pb2.ErrorInfo.DESCRIPTOR):
                    info = pb.error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    reason, domain, metadata = info.reason, info.domain, dict(info.metadata)
                    break
        return cls(err.code(), err.details() or "", reason, domain, metadata)

    @classmethod
    def from_error_status(cls, error_status, pb):
        """From an in-band hub.v1.ErrorStatus (a presence stream frame_error)."""
        name = pb.errors_pb2.ErrorReason.Name(error_status.reason)
        reason = "" if name == "ERROR_REASON_UNSPECIFIED" else name[len(_REASON_PREFIX):]
        code = next((c for c in grpc.StatusCode if c.value[0] == error_status.code),
                    grpc.StatusCode.UNKNOWN)
        return cls(code, error_status.message, reason, "hub.v1", error_status.metadata)


def _snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class _Service:
    """The unary methods of one service, as snake_case callables taking a
    request message or keyword arguments: client.presence.register_agent(
    agent_id="a-1", cli="AGENT_CLI_CLAUDE")."""

    def __init__(self, client, module, service):
        self._client = client
        descriptor = getattr(client.pb, module + "_pb2").DESCRIPTOR.services_by_name[service]
        stub = getattr(getattr(client.pb, module + "_pb2_grpc"), service + "Stub")(client.channel)
        db = symbol_database.Default()
        for method in descriptor.methods:
            if method.client_streaming or method.server_streaming:
                continue
            request_class = db.GetSymbol(method.input_type.full_name)
            setattr(self, _snake(method.name),
                    self._wrap(getattr(stub, method.name), request_class))
        self.stub = stub

    def _wrap(self, rpc, request_class):
        # A request field named `timeout` (CreateJobRequest's, a Duration)
        # shares its name with the call's deadline: a number is the deadline
        # in seconds, anything else (a Duration, a dict) the field.
        has_timeout = "timeout" in request_class.DESCRIPTOR.fields_by_name

        def call(request=None, timeout=None, metadata=None, **fields):
            if has_timeout and timeout is not None and not isinstance(timeout, (int, float)):
                fields["timeout"] = timeout
                timeout = None
            if request is None:
                request = request_class(**fields)
            try:
                return rpc(request, timeout=timeout or self._client.deadline,
                           metadata=metadata)
            except grpc.RpcError as err:
                raise HubError.from_rpc_error(err, self._client.pb) from None
        return call


class _CallDetails(collections.namedtuple(
        "_CallDetails", ("method", "timeout", "metadata", "credentials", "wait_for_ready",
                         "compression")), grpc.ClientCallDetails):
    pass


class _BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                   grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds `authorization: Bearer <token>` to every call. An interceptor, not
    call credentials: gRPC sends call credentials only over TLS, and a
    loopback hub may take tokens over plaintext."""

    def __init__(self, token):
        self._header = ("authorization", "Bearer " + token)

    def _details(self, d):
        metadata = list(d.metadata or []) + [self._header]
        return _CallDetails(d.method, d.timeout, metadata, d.credentials,
                            getattr(d, "wait_for_ready", None), getattr(d, "compression", None))

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


class HubClient:
    """client = HubClient("127.0.0.1:27889"); client.hub.get_status().

    TLS: tls_ca (PEM file of the CA that signed the hub's certificate; TLS
    with the system's roots when tls=True and no CA), tls_cert/tls_key (PEM
    files of a client certificate, for mutual TLS), tls_server_name (the name
    in the hub's certificate when it differs from the address's host). token:
    the bearer token sent on every call (default: $HUB_TOKEN if set)."""

    def __init__(self, address, deadline=DEFAULT_DEADLINE, channel_options=None,
                 stubs_dir=None, proto_dir=None, include_dirs=None, tls=False, tls_ca=None,
                 tls_cert=None, tls_key=None, tls_server_name=None, token=None):
        self.pb = stubs.load(stubs_dir, proto_dir, include_dirs)
        self.address = address
        self.deadline = deadline
        options = DEFAULT_CHANNEL_OPTIONS + list(channel_options or [])
        if bool(tls_cert) != bool(tls_key):
            raise ValueError("tls_cert and tls_key go together")
        if tls or tls_ca or tls_cert:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(tls_ca) if tls_ca else None,
                private_key=_read(tls_key) if tls_key else None,
                certificate_chain=_read(tls_cert) if tls_cert else None)
            if tls_server_name:
                options.append(("grpc.ssl_target_name_override", tls_server_name))
            self.channel = grpc.secure_channel(address, credentials, options=options)
        else:
            self.channel = grpc.insecure_channel(address, options=options)
        self._raw_channel = self.channel
        if token is None:
            token = os.environ.get("HUB_TOKEN") or None
        if token:
            self.channel = grpc.intercept_channel(self.channel, _BearerToken(token.strip()))
        for name, (module, service) in _SERVICES.items():
            setattr(self, name, _Service(self, module, service))

    def wait_for_connected(self, timeout):
        """Waits up to `timeout` seconds for the channel to be connected,
        starting a connection attempt if needed; True once it is. While a
        thread waits here gRPC's I/O for the channel runs: nothing else drives
        a connection attempt that no call waits for, so retry loops should
        wait here rather than sleep and fail fast against a channel in
        backoff."""
        ready = grpc.channel_ready_future(self._raw_channel)
        try:
            ready.result(timeout=timeout)
            return True
        except grpc.FutureTimeoutError:
            ready.cancel()  # ends its subscription to the channel's state
            return False

    def attach(self, request_iterator, metadata=None):
        """The raw PresenceService.Attach stream; see PresenceSession."""
        return self.presence.stub.Attach(request_iterator, metadata=metadata)

    def close(self):
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
