#!/usr/bin/env bash
# Runs a fuzz_regression binary: BINARY ITERATIONS CORPUS_FILE...
set -euo pipefail
exec "$@"
