"""Generates and imports the Python stubs of hub's contract, at run time.

Nothing generated is committed: the stubs are compiled from
proto/hub/v1/*.proto (and google/rpc/{status,error_details}.proto for the
error model) with Debian's `protoc` (protobuf-compiler) and
`grpc_python_plugin` (protobuf-compiler-grpc) into a directory keyed by the
protos' content, then imported. Debian's python3-grpc-tools is not used: its
bundled protoc (gRPC 1.14) predates proto3 `optional`, which hub.v1 uses.

Where things are looked up (first match wins):
  hub protos    proto_dir argument, $HUB_PROTO_DIR, <checkout>/proto
  google protos include_dirs argument, $HUB_PROTO_INCLUDE (':'-separated),
                /usr/include, /usr/share/gocode/src/github.com/gogo/googleapis
  output        out_dir argument, $HUB_PY_STUBS_DIR,
                $HUB_CACHE_DIR or ~/.cache/hub, then python-stubs/<hash>
"""
import glob
import hashlib
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import types

DEBIAN_INCLUDE_DIRS = ["/usr/include", "/usr/share/gocode/src/github.com/gogo/googleapis"]
GOOGLE_RPC = ["google/rpc/status.proto", "google/rpc/error_details.proto"]
MODULES = ["hub", "presence", "role", "role_service", "role_activation", "role_candidate",
           "role_key", "message", "agent", "errors", "transport_locator", "job"]

_loaded = {}


def find_proto_dir(proto_dir=None):
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [proto_dir, os.environ.get("HUB_PROTO_DIR"),
                  os.path.normpath(os.path.join(here, "..", "..", "..", "proto"))]
    for d in candidates:
        if d and os.path.isfile(os.path.join(d, "hub", "v1", "presence.proto")):
            return d
    raise RuntimeError("cannot find hub/v1/presence.proto; pass proto_dir or set "
                       "HUB_PROTO_DIR (looked in %s)" % [c for c in candidates if c])


def find_include_dirs(include_dirs=None):
    dirs = list(include_dirs or []) + [
        d for d in os.environ.get("HUB_PROTO_INCLUDE", "").split(":") if d
    ] + DEBIAN_INCLUDE_DIRS
    for needed in ["google/protobuf/timestamp.proto"] + GOOGLE_RPC:
        if not any(os.path.isfile(os.path.join(d, needed)) for d in dirs):
            raise RuntimeError(
                "cannot find %s; install Debian's libprotobuf-dev and "
                "golang-github-gogo-googleapis-dev (tools/setup.sh does) or set "
                "HUB_PROTO_INCLUDE (looked in %s)" % (needed, dirs))
    return dirs


def _default_out_root():
    cache = os.environ.get("HUB_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hub")
    return os.path.join(cache, "python-stubs")


def generate(out_dir=None, proto_dir=None, include_dirs=None):
    """Compiles the stubs (unless already there); returns their directory."""
    proto_dir = find_proto_dir(proto_dir)
    include_dirs = find_include_dirs(include_dirs)
    hub_protos = sorted(glob.glob(os.path.join(proto_dir, "hub", "v1", "*.proto")))
    digest = hashlib.sha256()
    for path in hub_protos:
        digest.update(os.path.relpath(path, proto_dir).encode() + b"\0")
        with open(path, "rb") as f:
            digest.update(f.read())
    if out_dir is None:
        out_dir = os.environ.get("HUB_PY_STUBS_DIR") or os.path.join(
            _default_out_root(), digest.hexdigest()[:16])
    stamp = os.path.join(out_dir, ".hub-stubs-" + digest.hexdigest())
    if os.path.exists(stamp):
        return out_dir
    plugin = shutil.which("grpc_python_plugin")
    protoc = shutil.which("protoc")
    if not plugin or not protoc:
        raise RuntimeError("protoc and grpc_python_plugin are needed (Debian: "
                           "protobuf-compiler, protobuf-compiler-grpc; tools/setup.sh)")
    os.makedirs(os.path.dirname(os.path.abspath(out_dir)), exist_ok=True)
    # Compile into a fresh directory and move it in place, so that concurrent
    # users never import half-written stubs.
    tmp = tempfile.mkdtemp(prefix=".stubs-", dir=os.path.dirname(os.path.abspath(out_dir)))
    cmd = [protoc, "-I" + proto_dir] + ["-I" + d for d in include_dirs] + [
        "--python_out=" + tmp, "--grpc_out=" + tmp, "--plugin=protoc-gen-grpc=" + plugin,
    ] + [os.path.relpath(p, proto_dir) for p in hub_protos] + GOOGLE_RPC
    try:
        subprocess.run(cmd, check=True, cwd=proto_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    open(os.path.join(tmp, os.path.basename(stamp)), "w").close()
    try:
        os.rename(tmp, out_dir)  # also replaces an empty directory
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not os.path.exists(stamp):  # not a concurrent generation of the same
            raise RuntimeError("%s exists and holds something else than these stubs"
                               % out_dir)
    return out_dir


def load(out_dir=None, proto_dir=None, include_dirs=None):
    """Generates (if needed) and imports the stubs. Returns a namespace with
    one attribute per module: ns.presence_pb2, ns.presence_pb2_grpc, ...,
    ns.status_pb2, ns.error_details_pb2."""
    directory = generate(out_dir, proto_dir, include_dirs)
    if directory in _loaded:
        return _loaded[directory]
    if directory not in sys.path:
        sys.path.insert(0, directory)
    ns = types.SimpleNamespace()
    for name in MODULES:
        setattr(ns, name + "_pb2", importlib.import_module("hub.v1.%s_pb2" % name))
        setattr(ns, name + "_pb2_grpc", importlib.import_module("hub.v1.%s_pb2_grpc" % name))
    ns.status_pb2 = importlib.import_module("google.rpc.status_pb2")
    ns.error_details_pb2 = importlib.import_module("google.rpc.error_details_pb2")
    _loaded[directory] = ns
    return ns

