#!/usr/bin/env bash
# Installs the pinned API tools (the buf CLI, the OpenAPI 3.0 JSON Schema)
# exactly as package-lock.json says, with npm ci, only when node_modules is
# missing or older than the lock file. Idempotent and quiet when they are
# there; the suite runs it before bazel test (tools/test.sh), and the buf
# and OpenAPI tests run it too.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
# Several tests run this at once; npm ci first deletes node_modules, so one
# installs while the others wait (the lock is on the lock file itself).
exec 9<package-lock.json
flock 9
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error >&2
fi
