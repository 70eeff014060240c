#!/usr/bin/env bash
# Installs what is missing and runs quantd's whole test suite (unit, end-to-end,
# peer checks). This is README command 2 and what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install_deps.sh
# npm packages of the peer checks (llama.cpp, onnxruntime) and the TypeScript
# SDK, from their package-lock.json files.
for setup in tests/peers/setup.sh client/typescript/setup.sh tools/buf/setup.sh; do
  if [ -f "$setup" ]; then bash "$setup"; fi
done

# bazel test builds everything the tests need, including the binaries the
# end-to-end tests start as real processes.
bazel build //...
bazel test --test_output=errors --test_summary=terse //...
