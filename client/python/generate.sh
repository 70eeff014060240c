#!/usr/bin/env bash
# Generates the Python protobuf and gRPC modules of quantd's API (quantd.v1 and
# the google.rpc error details it uses, and the google.api HTTP rules its
# service carries) with Debian's protoc and grpc_python_plugin, each protobuf
# module with its typed stub (.pyi, for editors and mypy; the gRPC modules get
# none, see mypy/mypy.ini). quantd_client imports them from
# quantd_client/_generated (or $QUANTD_CLIENT_GENERATED), so run this once
# after a checkout or a proto change; Bazel runs it itself for the tests
# (//client/python:generated).
#
#   client/python/generate.sh [OUT_DIR [PROTO_ROOT [GOOGLEAPIS_ROOT]]]
set -euo pipefail
here="$(dirname "$(readlink -f "$0")")"
out="${1:-$here/quantd_client/_generated}"
proto_root="${2:-$here/../../proto}"
googleapis="${3:-/usr/share/gocode/src/github.com/gogo/googleapis}"
protoc=/usr/bin/protoc
plugin=/usr/bin/grpc_python_plugin
for tool in "$protoc" "$plugin"; do
  if [ ! -x "$tool" ]; then
    echo "generate.sh: $tool is missing (apt-get install protobuf-compiler protobuf-compiler-grpc)" >&2
    exit 1
  fi
done
if [ ! -f "$googleapis/google/rpc/status.proto" ]; then
  echo "generate.sh: google/rpc protos not found under $googleapis (apt-get install golang-github-gogo-googleapis-dev)" >&2
  exit 1
fi
mkdir -p "$out"
"$protoc" --proto_path="$proto_root" --proto_path="$googleapis" \
  --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" --plugin=protoc-gen-grpc_python="$plugin" \
  "$proto_root"/quantd/v1/job.proto "$proto_root"/quantd/v1/quant_config.proto \
  "$proto_root"/quantd/v1/quantization_service.proto "$proto_root"/quantd/v1/worker_service.proto
"$protoc" --proto_path="$googleapis" --python_out="$out" --pyi_out="$out" \
  "$googleapis"/google/rpc/status.proto "$googleapis"/google/rpc/error_details.proto \
  "$googleapis"/google/api/annotations.proto "$googleapis"/google/api/http.proto
