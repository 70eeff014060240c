"""C++ protobuf/gRPC code generation with the system protoc.

Bazel 4's proto rules would download protobuf; quantd instead runs Debian's
/usr/bin/protoc and grpc_cpp_plugin in a genrule. Sources are given relative
to a proto root (this package for our own protos, an external repository for
google/rpc and grpc health), and the generated files land under this package
so that `#include "quantd/v1/job.pb.h"` works with includes = ["."].
"""

def quantd_cc_proto(name, protos, proto_paths, srcs_labels, grpc = False, deps = []):
    """Generates <proto>.pb.{h,cc} (and .grpc.pb.{h,cc}) and a cc_library.

    Args:
      name: cc_library name.
      protos: proto paths relative to their import root, e.g. "quantd/v1/job.proto".
      proto_paths: execroot-relative import roots (this package is "proto";
        external repositories are "external/<name>").
      srcs_labels: labels of the .proto files (for dependency tracking).
      grpc: also run grpc_cpp_plugin.
      deps: cc_library deps (other generated libraries).
    """
    outs = []
    for p in protos:
        base = p[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
        if grpc:
            outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    grpc_flags = ""
    if grpc:
        grpc_flags = "--grpc_out=$(GENDIR)/proto --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin "
    native.genrule(
        name = name + "_gen",
        srcs = srcs_labels,
        outs = outs,
        cmd = ("/usr/bin/protoc " + " ".join(["--proto_path=" + p for p in proto_paths]) + " " +
               "--cpp_out=$(GENDIR)/proto " + grpc_flags + " ".join(protos)),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = ["."],
        copts = ["-Wno-unused-parameter"],
        deps = deps + ["//third_party:protobuf", "//third_party:grpc"],
        visibility = ["//visibility:public"],
    )
