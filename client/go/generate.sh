#!/usr/bin/env bash
# Regenerates gen/quantd/v1 (Go package quantdv1) from proto/quantd/v1 with
# Debian's protoc, protoc-gen-go and protoc-gen-go-grpc. The output is
# committed, so that `go get` users never run protoc; go_client_test
# regenerates into a temp dir and fails when the committed files differ.
#
# The .proto files carry no go_package: the M options below map each file to
# its Go import path, and google/rpc, google/api to Google's genproto.
#
#   client/go/generate.sh [OUT_DIR [PROTO_ROOT [GOOGLEAPIS_ROOT]]]
set -euo pipefail
here="$(dirname "$(readlink -f "$0")")"
out="${1:-$here/gen}"
proto_root="${2:-$here/../../proto}"
googleapis="${3:-/usr/share/gocode/src/github.com/gogo/googleapis}"
module=github.com/quantd/quantd/client/go
protoc=/usr/bin/protoc
for tool in "$protoc" /usr/bin/protoc-gen-go /usr/bin/protoc-gen-go-grpc; do
  if [ ! -x "$tool" ]; then
    echo "generate.sh: $tool is missing (apt-get install protobuf-compiler protoc-gen-go protoc-gen-go-grpc)" >&2
    exit 1
  fi
done
if [ ! -f "$googleapis/google/rpc/status.proto" ]; then
  echo "generate.sh: google/rpc protos not found under $googleapis (apt-get install golang-github-gogo-googleapis-dev)" >&2
  exit 1
fi
# The public API only: worker_service.proto is quantd's internal worker
# protocol and stays out of the client.
protos=(quantd/v1/job.proto quantd/v1/quant_config.proto quantd/v1/quantization_service.proto)
maps=(
  "Mgoogle/rpc/status.proto=google.golang.org/genproto/googleapis/rpc/status"
  "Mgoogle/api/annotations.proto=google.golang.org/genproto/googleapis/api/annotations"
  "Mgoogle/api/http.proto=google.golang.org/genproto/googleapis/api/annotations"
)
for p in "${protos[@]}"; do
  maps+=("M$p=$module/gen/quantd/v1;quantdv1")
done
go_opts=(--go_opt=paths=source_relative)
grpc_opts=(--go-grpc_opt=paths=source_relative)
for m in "${maps[@]}"; do
  go_opts+=("--go_opt=$m")
  grpc_opts+=("--go-grpc_opt=$m")
done
mkdir -p "$out"
(cd "$proto_root" && "$protoc" --proto_path=. --proto_path="$googleapis" \
  --plugin=protoc-gen-go=/usr/bin/protoc-gen-go --plugin=protoc-gen-go-grpc=/usr/bin/protoc-gen-go-grpc \
  --go_out="$out" "${go_opts[@]}" --go-grpc_out="$out" "${grpc_opts[@]}" "${protos[@]}")
