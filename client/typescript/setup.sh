#!/usr/bin/env bash
# Installs the TypeScript client's npm packages (exactly package-lock.json,
# with npm ci) and compiles src/ to dist/ with tsc, each only when missing or
# out of date. Idempotent and quiet when everything is there; the suite runs
# it before bazel test (tools/test.sh), and the client's test runs it too.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error >&2
fi
stale=0
if [ ! -f dist/index.js ]; then
  stale=1
else
  for f in src/*.ts tsconfig.json node_modules/.package-lock.json; do
    if [ "$f" -nt dist/index.js ]; then stale=1; fi
  done
fi
if [ "$stale" -eq 1 ]; then
  # Build into a fresh directory and swap it in, so that a test running
  # the client meanwhile never sees half a dist/.
  rm -rf dist.tmp
  node_modules/.bin/tsc -p tsconfig.json --outDir dist.tmp >&2
  rm -rf dist.old
  if [ -d dist ]; then mv dist dist.old; fi
  mv dist.tmp dist
  rm -rf dist.old
fi
