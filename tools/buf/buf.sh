#!/usr/bin/env bash
# buf on quantd's public API, offline (no Buf Schema Registry).
#
#   buf.sh lint [PROTO_ROOT]      lint PROTO_ROOT/quantd/v1 (default: proto/)
#   buf.sh breaking [PROTO_ROOT]  PROTO_ROOT/quantd/v1 against the release
#                                 image proto/released/quantd_v1.binpb
#   buf.sh release                rewrite that image from proto/ (at release)
#
# Findings go to stdout in BUF_ERROR_FORMAT (buf's --error-format: text,
# json, ...; default text); the exit status is buf's (100: findings).
# buf resolves imports only inside its workspace, so each run stages one in a
# temporary directory: proto/buf.yaml, PROTO_ROOT/quantd and the Google protos
# quantd imports, from QUANTD_GOOGLEAPIS_DIR (default: Debian's
# golang-github-gogo-googleapis-dev). google/protobuf comes built into buf.
# The buf binary is BUF, or tools/buf/node_modules/.bin/buf (setup.sh).
set -euo pipefail
here="$(dirname "$(readlink -f "$0")")"
repo="$(dirname "$(dirname "$here")")"
: "${QUANTD_PROTO_CONFIG:=$repo/proto/buf.yaml}"
: "${QUANTD_RELEASE_IMAGE:=$repo/proto/released/quantd_v1.binpb}"
: "${QUANTD_GOOGLEAPIS_DIR:=/usr/share/gocode/src/github.com/gogo/googleapis}"
# The Google files quantd.v1 imports (directly or through each other).
google_files=(google/api/annotations.proto google/api/http.proto google/rpc/status.proto)

usage() {
  echo "usage: $0 lint [PROTO_ROOT] | breaking [PROTO_ROOT] | release" >&2
  exit 2
}
[ $# -ge 1 ] || usage
command="$1"
proto_root="${2:-$repo/proto}"
case "$command" in
  lint | breaking) [ $# -le 2 ] || usage ;;
  release) [ $# -eq 1 ] || usage ;;
  *) usage ;;
esac

if [ -z "${BUF:-}" ]; then
  bash "$here/setup.sh"
  BUF="$here/node_modules/.bin/buf"
fi
if [ ! -d "$proto_root/quantd/v1" ]; then
  echo "$0: no quantd/v1 under $proto_root" >&2
  exit 2
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/quantd-buf.XXXXXX")"
trap 'rm -rf "$work"' EXIT
ws="$work/ws"
mkdir -p "$ws"
# Copies, not links: buf sees the same tree from a source checkout and from
# Bazel's runfiles (which are links). All of quantd/, so that a new package
# (quantd/v2) is linted too.
cp "$QUANTD_PROTO_CONFIG" "$ws/buf.yaml"
cp -rL "$proto_root/quantd" "$ws/quantd"
for f in "${google_files[@]}"; do
  mkdir -p "$ws/$(dirname "$f")"
  cp -L "$QUANTD_GOOGLEAPIS_DIR/$f" "$ws/$f"
done
# buf keeps a module cache; nothing is fetched, but it must be writable.
export BUF_CACHE_DIR="${BUF_CACHE_DIR:-$work/cache}"

error_format="${BUF_ERROR_FORMAT:-text}"
cd "$ws"
case "$command" in
  lint)
    "$BUF" lint --path quantd --error-format="$error_format"
    ;;
  breaking)
    "$BUF" breaking --path quantd --error-format="$error_format" --against "$QUANTD_RELEASE_IMAGE"
    ;;
  release)
    # Only quantd's files are the image's own; the Google ones are imports.
    mkdir -p "$(dirname "$QUANTD_RELEASE_IMAGE")"
    "$BUF" build --path quantd --exclude-source-info -o "$work/image.binpb"
    mv "$work/image.binpb" "$QUANTD_RELEASE_IMAGE"
    echo "wrote $QUANTD_RELEASE_IMAGE" >&2
    ;;
esac
