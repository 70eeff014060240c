#!/bin/bash
# Runs a fixed set of quantd-quantize jobs on the bundled stories260K (every
# export format, presets, the docs/examples configs with GPTQ, AWQ,
# SmoothQuant and rotation, a refused config) and prints what each printed
# and the sha256 of every file it wrote. Run it with the binaries of two
# revisions and diff the outputs to show that a refactor changed no artifact
# and no message:
#
#   tools/artifact_digests.sh OLD/bazel-bin/worker/cli/quantd-quantize /tmp/a > a.txt
#   tools/artifact_digests.sh bazel-bin/worker/cli/quantd-quantize /tmp/b > b.txt
#   diff a.txt b.txt
#
# The model is copied to one fixed path first: ONNX exports record the
# model's URI, which would otherwise differ between checkouts.
set -u
[ $# -eq 2 ] || { echo "usage: $0 QUANTD_QUANTIZE OUTPUT_DIR" >&2; exit 2; }
Q="$(realpath "$1")"
O="$2"
R="$(cd "$(dirname "$0")/.." && pwd)"
M="${TMPDIR:-/tmp}/quantd-artifact-digests-model"
rm -rf "$O" "$M" && mkdir -p "$O" && cp -r "$R/models/stories260K" "$M"
C="$R/tests/data/tinystories-sample.txt"
common=(--model "$M" --calib "$C" --calib-samples 8 --calib-seq-len 64 --data-dir "$O/data"
  --threads 1)
run() {
  local name=$1 ev=--no-eval
  shift
  case $name in *_eval) ev= ;; esac
  "$Q" "${common[@]}" $ev --output "$O/$name" "$@" >"$O/$name.log" 2>&1
  echo "$name exit $?"
}
run int4g32 --scheme w_int4_per_group_sym --group-size 32 --exclude '*down_proj' \
  --format hf --format hf-quark --format gguf --format onnx
run fp8kv --scheme w_fp8_a_fp8 --fp8-kv-cache --format hf-quark --format onnx
run mxfp4 --scheme w_mxfp4_a_mxfp4 --format hf-quark
run w3_asym_awq --config "$R/docs/examples/w3_asym_awq.json" --format hf
run w4_asym_gptq --config "$R/docs/examples/w4_asym_gptq.json" --format hf-quark --format gguf
run w4_asym_awq --config "$R/docs/examples/w4_asym_awq.json" --format hf-quark
run w8a8_rot --config "$R/docs/examples/w8a8_static_rotation.json" --format hf-quark --format onnx
run w8a8_sq --config "$R/docs/examples/w8a8_static_smoothquant.json" --format hf-quark \
  --format onnx
run w4_rtn_eval --config "$R/docs/examples/w4_asym_rtn.json" --format hf-quark --eval "$C" \
  --eval-windows 4
for f in "$R"/docs/examples/invalid/*.json; do
  run "invalid_$(basename "$f" .json)" --config "$f"
done
# What each job printed, less what changes from run to run (job names, times,
# the progress lines a slow machine prints or skips).
for l in "$O"/*.log; do
  echo "== $(basename "$l")"
  grep -vE '^\[|^block |^(name|created|started|finished|ran for):|stage times|elapsed|took|peak' "$l" |
    sed -E "s#$O#OUT#g; s/[0-9.]+s\b/Ts/g"
done
# Every artifact file, without the job marker that holds the job's name.
(cd "$O" && find . -path ./data -prune -o -type f ! -name '*.log' ! -name .quantd-job -print0 |
  sort -z | xargs -0 sha256sum)
