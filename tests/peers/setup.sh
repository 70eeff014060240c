#!/usr/bin/env bash
# Installs the peer-check npm packages (package-lock.json) into
# tests/peers/node_modules when they are missing. The suite runs it before the
# peer tests; it is idempotent and quiet when everything is there.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
if [ -f node_modules/node-llama-cpp/package.json ] &&
   [ node_modules/.package-lock.json -nt package-lock.json ]; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error >&2
