#!/usr/bin/env bash
# llama.cpp peer check of quantd's quantized GGUF exports (Bazel sh_test):
# stories260K quantized and exported as F32, Q8_0, Q4_0, Q4_1 and MXFP4, loaded in
# llama.cpp through node-llama-cpp: perplexity within 0.5% of the engine's,
# greedy tokens of the F32 export identical.
set -euo pipefail
runfiles="${TEST_SRCDIR:-$PWD/..}/${TEST_WORKSPACE:-quantd}"
cd "$runfiles"
peers_dir="$(dirname "$(readlink -f tests/peers/package.json)")"
bash "$peers_dir/setup.sh"
out="${TEST_TMPDIR:-$(mktemp -d)}/gguf_export_peer"
mkdir -p "$out"
tests/peers/gguf_export_peer_models "$out"
node "$(readlink -f tests/peers/gguf_export_peer_check.mjs)" "$out/manifest.json" 0.005
