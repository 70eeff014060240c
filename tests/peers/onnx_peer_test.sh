#!/usr/bin/env bash
# onnxruntime peer check of quantd's ONNX QDQ exports (Bazel sh_test):
# stories260K in float, int8 W8A8 static, FP8 W8A8 with an FP8 KV cache,
# uint4 per-group(4) and uint4 per-group(32) (MatMulNBits), exported to ONNX
# and run in onnxruntime-node. At level "basic", every activation code
# pinned to onnxruntime's: the quantizers' inputs and the logits within 1e-3
# of the engine's (relative to the largest magnitude), onnxruntime's
# quantizers bit-identical to the engine's on the same inputs; six mutated
# int8 exports must fail. At the default level: logits against "basic",
# greedy generation with the cache against the engine's choices, a padded
# batch against each prompt alone. See onnx_export_peer_models.cc.
set -euo pipefail
runfiles="${TEST_SRCDIR:-$PWD/..}/${TEST_WORKSPACE:-quantd}"
cd "$runfiles"
peers_dir="$(dirname "$(readlink -f tests/peers/package.json)")"
bash "$peers_dir/setup.sh"
out="${TEST_TMPDIR:-$(mktemp -d)}/onnx_peer"
mkdir -p "$out"
# Node resolves onnxruntime-node from the script's real directory (beside
# node_modules), so it runs through the symlink's target.
tests/peers/onnx_export_peer_models "$out" "$(readlink -f tests/peers/onnx_peer_run.mjs)"
