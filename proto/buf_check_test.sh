#!/usr/bin/env bash
# Bazel sh_test: `buf.sh lint` or `buf.sh breaking` (the first argument) on
# the protos, config and release image in the runfiles. The buf CLI comes from
# tools/buf/node_modules in the source tree (setup.sh installs it there).
set -euo pipefail
export RUNFILES_ROOT="${TEST_SRCDIR:-$PWD/..}/${TEST_WORKSPACE:-quantd}"
cd "$RUNFILES_ROOT"
tools_dir="$(dirname "$(readlink -f tools/buf/package.json)")"
bash "$tools_dir/setup.sh"
export BUF="$tools_dir/node_modules/.bin/buf"
export QUANTD_PROTO_CONFIG="$RUNFILES_ROOT/proto/buf.yaml"
export QUANTD_RELEASE_IMAGE="$RUNFILES_ROOT/proto/released/quantd_v1.binpb"
export QUANTD_GOOGLEAPIS_DIR="$RUNFILES_ROOT/external/googleapis_protos"
export TMPDIR="${TEST_TMPDIR:-${TMPDIR:-/tmp}}"
exec bash tools/buf/buf.sh "$1" "$RUNFILES_ROOT/proto"
