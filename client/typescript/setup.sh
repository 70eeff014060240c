#!/usr/bin/env bash
# Installs the TypeScript client's npm packages (exactly package-lock.json,
# with npm ci), generates src/gen from the .proto files (generate.sh) and
# compiles src/ to dist/ with tsc, each only when missing or out of date.
# Idempotent and quiet when everything is there; the suite runs it before
# bazel test (tools/test.sh), and the client's tests run it too, possibly
# at the same time: a lock serializes them.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
exec 9>.setup.lock
flock 9
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error >&2
fi
googleapis=/usr/share/gocode/src/github.com/gogo/googleapis
gen_inputs=(generate.sh node_modules/.package-lock.json ../../proto/quantd/v1
            "$googleapis/google/rpc" "$googleapis/google/api")
if [ ! -f src/gen/.stamp ] || [ -n "$(find "${gen_inputs[@]}" -newer src/gen/.stamp -print -quit)" ]; then
  rm -rf src/gen.tmp
  bash generate.sh src/gen.tmp >&2
  touch src/gen.tmp/.stamp
  rm -rf src/gen
  mv src/gen.tmp src/gen
fi
if [ ! -f dist/index.js ] || [ -n "$(find src tsconfig.json node_modules/.package-lock.json -newer dist/index.js -print -quit)" ]; then
  # Build into a fresh directory and swap it in, so that a test running
  # the client meanwhile never sees half a dist/.
  rm -rf dist.tmp
  node_modules/.bin/tsc -p tsconfig.json --outDir dist.tmp >&2
  rm -rf dist.old
  if [ -d dist ]; then mv dist dist.old; fi
  mv dist.tmp dist
  rm -rf dist.old
fi
