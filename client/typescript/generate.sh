#!/usr/bin/env bash
# Generates the TypeScript types and schemas of quantd's API (quantd.v1, the
# google.rpc error details and the google.api HTTP rules the service imports)
# with Debian's protoc and the pinned @bufbuild/protoc-gen-es from
# node_modules. setup.sh runs it when a .proto or the plugin changes; the
# output (src/gen) is never committed.
#
#   client/typescript/generate.sh [OUT_DIR [PROTO_ROOT [GOOGLEAPIS_ROOT]]]
set -euo pipefail
here="$(dirname "$(readlink -f "$0")")"
out="${1:-$here/src/gen}"
proto_root="${2:-$here/../../proto}"
googleapis="${3:-/usr/share/gocode/src/github.com/gogo/googleapis}"
protoc=/usr/bin/protoc
plugin="$here/node_modules/.bin/protoc-gen-es"
if [ ! -x "$protoc" ]; then
  echo "generate.sh: $protoc is missing (apt-get install protobuf-compiler)" >&2
  exit 1
fi
if [ ! -x "$plugin" ]; then
  echo "generate.sh: $plugin is missing (run npm ci in $here)" >&2
  exit 1
fi
if [ ! -f "$googleapis/google/rpc/status.proto" ]; then
  echo "generate.sh: google/rpc protos not found under $googleapis (apt-get install golang-github-gogo-googleapis-dev)" >&2
  exit 1
fi
mkdir -p "$out"
# import_extension=js: tsconfig's NodeNext resolution needs explicit ".js".
# json_types=true: JobSpecJson etc., the typed proto3 JSON that submit() takes.
"$protoc" --proto_path="$proto_root" --proto_path="$googleapis" \
  --plugin=protoc-gen-es="$plugin" --es_out="$out" \
  --es_opt=target=ts,import_extension=js,json_types=true \
  quantd/v1/job.proto quantd/v1/quant_config.proto \
  quantd/v1/quantization_service.proto quantd/v1/worker_service.proto \
  google/rpc/status.proto google/rpc/error_details.proto \
  google/api/annotations.proto google/api/http.proto
