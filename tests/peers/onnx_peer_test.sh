#!/usr/bin/env bash
# onnxruntime peer check of quantd's ONNX QDQ exports (Bazel sh_test):
# stories260K quantized int8 W8A8 static, FP8 W8A8 with an FP8 KV cache and
# uint4 per-group(4), exported to ONNX and run in onnxruntime-node; logits within
# 1e-3 (relative to the largest logit) of the engine's fake-quantized logits
# (int8 static: at 75% of the positions, all within 2e-2; see the .mjs).
set -euo pipefail
runfiles="${TEST_SRCDIR:-$PWD/..}/${TEST_WORKSPACE:-quantd}"
cd "$runfiles"
peers_dir="$(dirname "$(readlink -f tests/peers/package.json)")"
bash "$peers_dir/setup.sh"
out="${TEST_TMPDIR:-$(mktemp -d)}/onnx_peer"
mkdir -p "$out"
tests/peers/onnx_export_peer_models "$out"
node "$(readlink -f tests/peers/onnx_peer_check.mjs)" "$out/manifest.json"
