#!/usr/bin/env bash
# Installs the peer-check npm packages (package-lock.json) into
# tests/peers/node_modules when they are missing or were installed from
# another lock file (a stamp holds the sha256 of the lock they came from).
# The suite runs it before each peer test; peer tests run in parallel, so a
# lock serializes the install. It is idempotent and quiet when everything is
# there. onnxruntime-node's CPU library ships inside the package; its install
# script (a GPU download) is skipped.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
stamp=node_modules/.quantd-lock-sha256
exec 9>"/tmp/quantd-peers-setup-$(pwd | sha256sum | cut -c1-16).lock"
flock 9
if [ -f node_modules/node-llama-cpp/package.json ] &&
   [ -f node_modules/onnxruntime-node/package.json ] &&
   [ -f node_modules/@huggingface/tokenizers/package.json ] &&
   [ -f node_modules/s3rver/package.json ] &&
   [ -f node_modules/@aws-sdk/client-s3/package.json ] &&
   [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --loglevel=error >&2
echo "$want" > "$stamp"
