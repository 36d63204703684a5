"""C++ protobuf + gRPC code generation with Debian's protoc and grpc_cpp_plugin.

No @com_google_protobuf or @com_github_grpc_grpc repositories are needed, and
the generated code always matches the installed headers and libraries:
  /usr/bin/protoc                       (protobuf-compiler 3.21)
  /usr/bin/grpc_cpp_plugin              (protobuf-compiler-grpc 1.51)
  /usr/include/google/protobuf/*.proto  (libprotobuf-dev, well-known types)
The tools are not tracked as Bazel inputs: after upgrading them, change
HUB_SYSDEPS in .bazelrc.
"""

_PROTOC = "/usr/bin/protoc"
_GRPC_PLUGIN = "/usr/bin/grpc_cpp_plugin"

def _outputs(proto_paths, grpc):
    hdrs, srcs = [], []
    for p in proto_paths:
        if not p.endswith(".proto"):
            fail("expected a .proto file, got " + p)
        base = p[:-len(".proto")]
        hdrs.append(base + ".pb.h")
        srcs.append(base + ".pb.cc")
        if grpc:
            hdrs.append(base + ".grpc.pb.h")
            srcs.append(base + ".grpc.pb.cc")
    return hdrs, srcs

def _grpc_flags(out_dir):
    return "--grpc_out=%s --plugin=protoc-gen-grpc=%s" % (out_dir, _GRPC_PLUGIN)

def cc_grpc_proto_library(name, srcs, grpc = True, deps = [], **kwargs):
    """cc_library `name` with messages (and gRPC stubs) for `srcs`.

    The package directory is the proto root: a file `hub/v1/x.proto` in
    package `proto` is imported as "hub/v1/x.proto" and its header included as
    "hub/v1/x.pb.h" (the layout buf expects).

    Args:
      name: the cc_library.
      srcs: .proto files below this package.
      grpc: also generate gRPC service stubs.
      deps: extra cc deps.
      **kwargs: forwarded to cc_library.
    """
    hdrs, cc_srcs = _outputs(srcs, grpc)
    pkg = native.package_name()
    native.genrule(
        name = name + "_codegen",
        srcs = srcs,
        outs = hdrs + cc_srcs,
        cmd = " ".join([
            _PROTOC,
            "--proto_path=" + pkg,
            "--proto_path=/usr/include",
            "--cpp_out=$(GENDIR)/" + pkg,
            _grpc_flags("$(GENDIR)/" + pkg) if grpc else "",
        ] + ["$(location %s)" % s for s in srcs]),
        message = "protoc " + name,
    )
    native.cc_library(
        name = name,
        srcs = cc_srcs,
        hdrs = hdrs,
        includes = ["."],
        deps = deps + ["//third_party:protobuf"] + (["//third_party:grpc++"] if grpc else []),
        **kwargs
    )

def cc_system_proto_library(name, protos, grpc = True, headers_only = False, deps = [], **kwargs):
    """C++ code for .proto files installed outside the workspace.

    Args:
      name: the cc_library.
      protos: dict {import path to generate under: absolute source file}.
      grpc: also generate gRPC stubs.
      headers_only: generate but do not compile the .cc files, because a system
        library already holds the symbols (libgrpc++_reflection holds the
        v1alpha reflection messages; registering them twice aborts at start).
      deps: extra cc deps.
      **kwargs: forwarded to cc_library.
    """
    import_paths = sorted(protos.keys())
    hdrs, cc_srcs = _outputs(import_paths, grpc)
    stage = " && ".join([
        "mkdir -p $$T/%s && cp %s $$T/%s" % (p.rpartition("/")[0] or ".", protos[p], p)
        for p in import_paths
    ])
    native.genrule(
        name = name + "_codegen",
        outs = hdrs + cc_srcs,
        cmd = "T=$$(mktemp -d) && " + stage + " && " + " ".join([
            _PROTOC,
            "--proto_path=$$T",
            "--proto_path=/usr/include",
            "--cpp_out=$(RULEDIR)",
            _grpc_flags("$(RULEDIR)") if grpc else "",
        ] + ["$$T/" + p for p in import_paths]) + " && rm -rf $$T",
        message = "protoc (system) " + ", ".join(import_paths),
    )
    native.cc_library(
        name = name,
        srcs = [] if headers_only else cc_srcs,
        hdrs = hdrs,
        includes = ["."],
        deps = deps + ["//third_party:protobuf"] + (["//third_party:grpc++"] if grpc else []),
        **kwargs
    )
