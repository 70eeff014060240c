#!/usr/bin/env python3
"""Derives CMake targets from quantd's Bazel BUILD files.

The CMake build compiles exactly what Bazel compiles, so its source lists are
read from the BUILD files at configure time instead of being kept twice by
hand. BUILD files here are plain Starlark calls (cc_library, cc_binary,
quantd_cc_proto, glob, ...), which this script evaluates with Python stubs
that record the rules. Starting from the requested binaries, it walks their
deps and writes one CMake call per target reached:

  quantd_third_party(<name> LINKOPTS ...)          //third_party wrappers
  quantd_proto_library(<name> PROTOS ... ...)      //proto code generation
  quantd_cc_library(<name> SRCS ... HDRS ... DEPS ... COPTS ... )
  quantd_cc_binary(<name> SRCS ... DEPS ...)

The functions are defined in cmake/QuantdBazel.cmake. Target names are the
Bazel label with '/' and ':' turned into '_' ("//worker/quant:spec" ->
"worker_quant_spec"); binaries keep their own name.

usage: bazel_sources.py SOURCE_DIR OUTPUT.cmake //pkg:binary [//pkg:binary ...]
"""

import glob as globlib
import os
import sys


class Rule:
    def __init__(self, kind, package, attrs):
        self.kind = kind
        self.package = package
        self.name = attrs["name"]
        self.attrs = attrs

    @property
    def label(self):
        return "//%s:%s" % (self.package, self.name)


def cmake_name(label):
    pkg, name = label[2:].split(":")
    return (pkg.replace("/", "_") + "_" + name).replace("-", "_")


class BuildFileLoader:
    """Evaluates BUILD files with stub rules; caches one dict per package."""

    def __init__(self, root):
        self.root = root
        self.packages = {}

    def package(self, pkg):
        if pkg not in self.packages:
            self.packages[pkg] = self._load(pkg)
        return self.packages[pkg]

    def _load(self, pkg):
        path = os.path.join(self.root, pkg, "BUILD")
        if not os.path.exists(path):
            path += ".bazel"
        if not os.path.exists(path):
            raise SystemExit("bazel_sources.py: no BUILD file in package //%s" % pkg)
        rules = {}

        def record(kind):
            def fn(**attrs):
                rules[attrs["name"]] = Rule(kind, pkg, attrs)

            return fn

        def ignore(*args, **kwargs):
            return None

        def glob(include, exclude=(), allow_empty=True):
            base = os.path.join(self.root, pkg)
            found = set()
            for pattern in include:
                for f in globlib.glob(os.path.join(base, pattern), recursive=True):
                    if os.path.isfile(f):
                        found.add(os.path.relpath(f, base))
            for pattern in exclude:
                for f in globlib.glob(os.path.join(base, pattern), recursive=True):
                    found.discard(os.path.relpath(f, base))
            return sorted(found)

        env = {
            "load": ignore,
            "package": ignore,
            "exports_files": ignore,
            "licenses": ignore,
            "glob": glob,
            "select": lambda d: d.get("//conditions:default", []),
            "cc_library": record("cc_library"),
            "cc_binary": record("cc_binary"),
            "cc_test": record("cc_test"),
            "quantd_cc_proto": record("quantd_cc_proto"),
            "alias": record("alias"),
            "filegroup": record("filegroup"),
            "sh_test": record("sh_test"),
            "sh_binary": record("sh_binary"),
            "genrule": record("genrule"),
            # Fuzz targets (tools/fuzz/fuzz.bzl) need clang's libFuzzer and
            # are Bazel-only; no binary the CMake build makes depends on one.
            "cc_fuzz_test": ignore,
            "native": None,
        }
        with open(path) as f:
            code = compile(f.read(), path, "exec")
        exec(code, env)
        return rules

    def rule(self, label):
        pkg, name = label[2:].split(":")
        rules = self.package(pkg)
        if name not in rules:
            raise SystemExit("bazel_sources.py: %s is not a rule in //%s/BUILD" % (label, pkg))
        return rules[name]


def absolute(label, package):
    """Normalises ':x', 'x', '//pkg' and '//pkg:x' to '//pkg:x'."""
    if label.startswith("@"):
        return label
    if label.startswith(":"):
        return "//%s%s" % (package, label)
    if label.startswith("//"):
        return label if ":" in label else "%s:%s" % (label, label.rsplit("/", 1)[-1])
    return "//%s:%s" % (package, label)


def quote(items):
    return " ".join('"%s"' % i.replace("\\", "\\\\").replace('"', '\\"') for i in items)


def main(argv):
    if len(argv) < 4:
        raise SystemExit(__doc__)
    root, out_path, roots = argv[1], argv[2], argv[3:]
    loader = BuildFileLoader(root)

    def deps_of(rule):
        deps = list(rule.attrs.get("deps", []))
        if rule.kind == "quantd_cc_proto":
            # The macro's cc_library adds these (proto/cc_proto.bzl).
            deps += ["//third_party:protobuf", "//third_party:grpc"]
        return deps
    order, seen = [], set()

    def visit(label):
        if label in seen:
            return
        seen.add(label)
        rule = loader.rule(label)
        if rule.kind == "alias":
            if not rule.attrs["actual"].startswith("@"):
                visit(absolute(rule.attrs["actual"], rule.package))
        elif rule.kind in ("cc_library", "cc_binary", "cc_test", "quantd_cc_proto"):
            for d in deps_of(rule):
                if d.startswith("@"):
                    raise SystemExit("bazel_sources.py: %s depends on external %s" % (label, d))
                visit(absolute(d, rule.package))
            if rule.attrs.get("alwayslink"):
                raise SystemExit(
                    "bazel_sources.py: %s is alwayslink, which the CMake build does not model" % label)
        else:
            raise SystemExit("bazel_sources.py: %s is a %s, not a C++ target" % (label, rule.kind))
        order.append(label)  # post-order: dependencies first

    for r in roots:
        visit(absolute(r, ""))

    lines = [
        "# Generated by cmake/bazel_sources.py from the BUILD files; do not edit.",
        "# Roots: %s" % " ".join(roots),
    ]
    for label in order:
        rule = loader.rule(label)
        pkg = rule.package
        deps = [cmake_name(absolute(d, pkg)) for d in deps_of(rule)]
        name = cmake_name(label)
        if rule.kind == "alias":
            actual = rule.attrs["actual"]
            if actual == "@libtorch//:libtorch":
                lines.append("quantd_third_party_torch(%s)" % name)
            else:
                lines.append("quantd_alias(%s %s)" % (name, cmake_name(absolute(actual, pkg))))
        elif rule.kind == "quantd_cc_proto":
            lines.append(
                "quantd_proto_library(%s%s\n  PROTO_PATHS %s\n  PROTOS %s\n  DEPS %s)"
                % (name, " GRPC" if rule.attrs.get("grpc") else "",
                   quote(rule.attrs["proto_paths"]), quote(rule.attrs["protos"]), quote(deps)))
        elif pkg == "third_party":
            lines.append("quantd_third_party(%s\n  LINKOPTS %s\n  DEPS %s)"
                         % (name, quote(rule.attrs.get("linkopts", [])), quote(deps)))
        else:
            # A cc_test is built as a plain binary; gpu_check.sh runs it.
            binary = rule.kind in ("cc_binary", "cc_test")
            func = "quantd_cc_binary" if binary else "quantd_cc_library"
            target = rule.name if binary else name
            src = lambda fs: [os.path.join(pkg, f) for f in fs]
            lines.append(
                "%s(%s\n  SRCS %s\n  HDRS %s\n  DEPS %s\n  COPTS %s\n  DEFINES %s\n  LINKOPTS %s)"
                % (func, target, quote(src(rule.attrs.get("srcs", []))),
                   quote(src(rule.attrs.get("hdrs", []))), quote(deps),
                   quote(rule.attrs.get("copts", [])), quote(rule.attrs.get("defines", [])),
                   quote(rule.attrs.get("linkopts", []))))
    text = "\n".join(lines) + "\n"
    # Rewrite only on change, so a re-configure does not rebuild everything.
    if not os.path.exists(out_path) or open(out_path).read() != text:
        with open(out_path, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main(sys.argv)
