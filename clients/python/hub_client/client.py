"""HubClient: one channel to a hub; every RPC fails with a HubError that
carries the gRPC code and hub's reason code (google.rpc.ErrorInfo, domain
"hub.v1", from the grpc-status-details-bin trailer)."""
import re

import grpc
from google.protobuf import symbol_database

from . import stubs

DEFAULT_DEADLINE = 10.0  # seconds
# Find a dead hub within ~15 s; the hub accepts pings every second or slower.
DEFAULT_CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 10000),
    ("grpc.keepalive_timeout_ms", 5000),
]
_SERVICES = {
    "hub": ("hub", "HubService"),
    "presence": ("presence", "PresenceService"),
    "roles": ("role_service", "RoleService"),
    "messages": ("message", "MessageService"),
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
        def call(request=None, timeout=None, metadata=None, **fields):
            if request is None:
                request = request_class(**fields)
            try:
                return rpc(request, timeout=timeout or self._client.deadline,
                           metadata=metadata)
            except grpc.RpcError as err:
                raise HubError.from_rpc_error(err, self._client.pb) from None
        return call


class HubClient:
    """client = HubClient("127.0.0.1:27889"); client.hub.get_status()."""

    def __init__(self, address, deadline=DEFAULT_DEADLINE, channel_options=None,
                 stubs_dir=None, proto_dir=None, include_dirs=None):
        self.pb = stubs.load(stubs_dir, proto_dir, include_dirs)
        self.address = address
        self.deadline = deadline
        self.channel = grpc.insecure_channel(
            address, options=DEFAULT_CHANNEL_OPTIONS + list(channel_options or []))
        for name, (module, service) in _SERVICES.items():
            setattr(self, name, _Service(self, module, service))

    def attach(self, request_iterator, metadata=None):
        """The raw PresenceService.Attach stream; see PresenceSession."""
        return self.presence.stub.Attach(request_iterator, metadata=metadata)

    def close(self):
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
