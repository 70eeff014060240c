#!/usr/bin/env bash
# llama.cpp peer check (Bazel sh_test): quantd's GGUF exports and the official
# stories260K GGUF, loaded in llama.cpp through node-llama-cpp, give the
# engine's next-token probabilities to 1e-3.
set -euo pipefail
runfiles="${TEST_SRCDIR:-$PWD/..}/${TEST_WORKSPACE:-quantd}"
cd "$runfiles"
# node_modules lives in the source tree (ignored by git and Bazel); find it
# through a runfile symlink and install it there when missing.
peers_dir="$(dirname "$(readlink -f tests/peers/package.json)")"
bash "$peers_dir/setup.sh"
out="${TEST_TMPDIR:-$(mktemp -d)}/peer"
mkdir -p "$out"
tests/peers/peer_models "$out"
# Node resolves node-llama-cpp from the script's real directory (beside
# node_modules), so run it through the symlink's target.
node "$(readlink -f tests/peers/gguf_peer_check.mjs)" "$out/manifest.json" 1e-3
