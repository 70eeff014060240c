#!/usr/bin/env bash
# Runs a go command on this module offline, in GOPATH mode against Debian's
# Go packages (/usr/share/gocode): Go modules cannot be downloaded here, and
# go.mod stays what `go get` users need. A GOPATH under $QUANTD_GO_WORK
# (default: $TMPDIR/quantd-go-$UID) links the module in at its import path.
#
#   client/go/offline.sh go test ./...
#   client/go/offline.sh go build -o /tmp/sdk-scenario ./cmd/sdk-scenario
set -euo pipefail
# The directory itself, not where a symlinked offline.sh points: in Bazel's
# runfiles the files are links into the source tree.
here="$(cd "$(dirname "$0")" && pwd)"
work="${QUANTD_GO_WORK:-${TMPDIR:-/tmp}/quantd-go-$(id -u)}"
module=github.com/quantd/quantd/client/go
link="$work/gopath/src/$module"
mkdir -p "$(dirname "$link")" "$work/cache"
if [ "$(readlink "$link" 2>/dev/null)" != "$here" ]; then
  rm -f "$link"
  ln -s "$here" "$link"
fi
export GO111MODULE=off GOPATH="$work/gopath:/usr/share/gocode" GOCACHE="$work/cache"
export GOFLAGS= GOPROXY=off GOTOOLCHAIN=local
# Inside the link, so that ./... names packages by their import paths.
cd "$link"
exec "$@"
