#!/usr/bin/env bash
# Runs one of deploy/tests/*.py (first argument) on the source tree with the
# Bazel-built quantd, quantd-worker and quantd-health-probe (the next three).
# The checks read files across the repository (docs, BUILD files, the store
# schema), so the tests are tagged external and always run; the runfiles
# symlinks lead back to the source tree.
set -euo pipefail
runfiles="${TEST_SRCDIR}/${TEST_WORKSPACE}"
repo="$(dirname "$(dirname "$(readlink -f "${runfiles}/deploy/.yamllint")")")"
for tool in kubectl yamllint readelf ldd dpkg; do
  if ! command -v "$tool" >/dev/null; then
    echo "deploy_test: $tool is missing; run tools/install_deps.sh" >&2
    exit 1
  fi
done
# Further arguments are runfiles paths given to the script as --NAME=PATH.
script="$1"
binaries=(--binary "quantd=${runfiles}/$2" --binary "quantd-worker=${runfiles}/$3"
  --binary "quantd-health-probe=${runfiles}/$4")
shift 4
extra=()
for a in "$@"; do extra+=("${a%%=*}=${runfiles}/${a#*=}"); done
exec /usr/bin/python3 "${runfiles}/deploy/tests/${script}" --repo "$repo" "${binaries[@]}" \
  "${extra[@]}"
