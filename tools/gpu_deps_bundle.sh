#!/bin/bash
# gpu_deps_bundle.sh: packs the Debian C++ libraries the engine's CMake build
# needs (Abseil, protobuf + protoc, gRPC + its plugin, re2, ICU, curl,
# sentencepiece, snappy, zstd, zlib (the dataset readers), GoogleTest,
# nlohmann-json headers and the .proto imports)
# into one archive, for a GPU host that has CMake, a compiler and a pip
# LibTorch but none of those packages and no package registry.
#
#   tools/gpu_deps_bundle.sh [OUT.tar.xz]     (default .gpu-deps/deps.tar.xz)
#
# On the GPU host: tools/gpu_check.sh --deps OUT.tar.xz unpacks it into a
# private prefix (never into /) and points the compiler, linker, CMake and
# the loader at it. The libraries are Debian 12's, built with the C++11 ABI
# and glibc 2.36, so they run on any newer glibc (Ubuntu 24.04's 2.39).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/.gpu-deps/deps.tar.xz}"
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
ARCH_LIB=/usr/lib/x86_64-linux-gnu
mkdir -p "$STAGE/include" "$STAGE/lib" "$STAGE/bin" "$STAGE/proto"

# Headers.
for d in absl google/protobuf grpc grpcpp grpc++ re2 nlohmann unicode curl gtest gmock \
         sentencepiece_processor.h sentencepiece_trainer.h \
         snappy-c.h zstd.h zlib.h zconf.h; do  # the last four: worker/io/dataset's codecs
  if [ -e "/usr/include/$d" ]; then
    mkdir -p "$STAGE/include/$(dirname "$d")"
    cp -a "/usr/include/$d" "$STAGE/include/$(dirname "$d")/"
  fi
done
cp -a "$ARCH_LIB/libgtest.a" "$ARCH_LIB/libgtest_main.a" "$ARCH_LIB/libgmock.a" \
      "$ARCH_LIB/libgmock_main.a" "$STAGE/lib/"
# .proto imports for protoc (protobuf's well-known types come with protoc's
# own include folder: google/protobuf/*.proto under /usr/include).
cp -a /usr/share/gocode/src/github.com/gogo/googleapis "$STAGE/proto/googleapis"
cp -a /usr/share/grpc-proto "$STAGE/proto/grpc-proto"
cp -a /usr/bin/protoc "$(readlink -f /usr/bin/grpc_cpp_plugin)" "$STAGE/bin/"
[ -e "$STAGE/bin/grpc_cpp_plugin" ] || mv "$STAGE/bin/$(basename "$(readlink -f /usr/bin/grpc_cpp_plugin)")" "$STAGE/bin/grpc_cpp_plugin"

# Shared libraries: the engine's -l libraries (third_party/BUILD, except
# LibTorch's and the server-only ones) and everything they load, except the
# C and C++ runtimes the host has.
skip='^(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libstdc\+\+|libgcc_s|libresolv)\.so'
declare -A seen
queue=()
ldconfig -p >"$STAGE/ldconfig.txt"
for l in $(grep -o '"-l[a-zA-Z0-9_+.-]*"' "$ROOT/third_party/BUILD" | tr -d '"' | sed 's/^-l//' | sort -u); do
  case "$l" in pthread|pq|sqlite3|benchmark|prometheus-cpp-*|:*) continue ;; esac
  f="$ARCH_LIB/lib$l.so"
  [ -e "$f" ] || { echo "gpu_deps_bundle: missing $f" >&2; exit 1; }
  cp -a "$f" "$STAGE/lib/"          # the link-time name (a symlink)
  real="$(readlink -f "$f")"
  soname="$(readelf -d "$real" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')"
  if [ -n "$soname" ] && [ -z "${seen[$soname]:-}" ]; then
    seen[$soname]=1
    cp -aL "$real" "$STAGE/lib/$soname"  # what the loader opens
  fi
  queue+=("$real")
done
for b in /usr/bin/protoc "$(readlink -f /usr/bin/grpc_cpp_plugin)"; do queue+=("$b"); done
while [ ${#queue[@]} -gt 0 ]; do
  f="${queue[0]}"; queue=("${queue[@]:1}")
  for need in $(readelf -d "$f" 2>/dev/null | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
    [[ "$need" =~ $skip ]] && continue
    [ -n "${seen[$need]:-}" ] && continue
    seen[$need]=1
    path="$(awk -v n="$need" '$1 == n && /x86-64/ {print $NF; exit}' "$STAGE/ldconfig.txt")"
    [ -n "$path" ] || { echo "gpu_deps_bundle: cannot find $need" >&2; exit 1; }
    cp -aL "$path" "$STAGE/lib/$need"
    queue+=("$(readlink -f "$path")")
  done
done
# The link-time symlinks point at sonames that are now in lib/.
for f in "$STAGE"/lib/*.so; do
  [ -L "$f" ] || continue
  target="$(basename "$(readlink "$f")")"
  soname="$(readelf -d "$ARCH_LIB/$target" 2>/dev/null | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')"
  [ -n "$soname" ] && ln -sfn "$soname" "$f"
done

rm "$STAGE/ldconfig.txt"
dangling="$(find "$STAGE/lib" -xtype l)"
[ -z "$dangling" ] || { echo "gpu_deps_bundle: dangling links: $dangling" >&2; exit 1; }
mkdir -p "$(dirname "$OUT")"
tar -C "$STAGE" -cJf "$OUT" .
echo "gpu_deps_bundle: $OUT ($(du -h "$OUT" | cut -f1), $(ls "$STAGE/lib" | wc -l) libraries)"
