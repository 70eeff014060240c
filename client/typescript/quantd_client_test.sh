#!/usr/bin/env bash
# Bazel sh_test: installs, generates and builds the TypeScript client
# (setup.sh, in the source tree where node_modules lives) and runs
# quantd_client_test.mjs against quantd from the runfiles.
set -euo pipefail
export RUNFILES_ROOT="${TEST_SRCDIR:-$PWD/..}/${TEST_WORKSPACE:-quantd}"
cd "$RUNFILES_ROOT"
package_dir="$(dirname "$(readlink -f client/typescript/package.json)")"
bash "$package_dir/setup.sh"
exec node --test-reporter=spec --test "$package_dir/quantd_client_test.mjs"
