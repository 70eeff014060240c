#!/usr/bin/env bash
# vLLM conformance of quantd's hf-quark exports (Bazel sh_test, no network).
#
# quantd-quantize exports stories260K with --format hf --format hf-quark for
# every preset (per_group ones with --group-size 4, which divides every width
# of stories260K), for a few extra jobs (FP8 KV cache, a glob --exclude) and
# for the Quark configs in tests/data/quark_configs (--config). The presets
# quantd refuses for hf-quark must be refused naming the export format.
# vllm_quark_check.py then applies vLLM's Quark loading rules to each
# hf_quark/ directory against its hf_fake_quantized/ twin.
#
# Round trip: each hf_quark/ export is then the model of a job with the same
# flags, which must write the same model.safetensors and config.json (the
# job keeps the codes and scales the checkpoint stores).
#
# Each case also runs under --target vllm: quantd must refuse exactly the
# cases whose export the checker fails (VLLM_REFUSALS: case -> a substring of
# quantd's refusal), and for every other case write the same hf_quark files
# that the checker passed, reporting "loads in: vllm". So every export quantd
# accepts under --target vllm is one vLLM loads and decodes as quantd does.
set -uo pipefail
runfiles="${TEST_SRCDIR:-$PWD/..}/${TEST_WORKSPACE:-quantd}"
cd "$runfiles"
BIN="$PWD/worker/cli/quantd-quantize"
TEXT="$PWD/tests/data/tinystories-sample.txt"
CHECK="$(readlink -f tests/peers/vllm_quark_check.py)"
SELFTEST="$(readlink -f tests/peers/vllm_quark_check_selftest.py)"
CONFIGS="$PWD/tests/data/quark_configs"
PY=/usr/bin/python3
TMP="${TEST_TMPDIR:-$(mktemp -d)}/vllm_quark"
mkdir -p "$TMP"
# A real directory: quantd reads the model's shapes at CreateJob only from
# one it need not follow a link out of (the runfiles are links), and
# refuses a shape vLLM cannot hold there rather than at export.
MODEL="$TMP/stories260K"
cp -rL "$PWD/models/stories260K" "$MODEL"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

declare -A VLLM_REFUSALS=(
  # Casts: vLLM's Quark loader has no scheme for a float weight dtype.
  [w_bf16]="has no scheme for bfloat16 weights"
  [w_fp16]="has no scheme for float16 weights"
  # Output quantizers: only the k/v projections' FP8 KV cache is taken.
  [w_fp8_a_fp8_o_fp8]="no kernel for quantized Linear outputs"
  [w_fp8_per_channel_sym]="no kernel for quantized Linear outputs"
  # int4/uint4 per_channel (group_size null): no W4A16 branch matches.
  [w_int4_per_channel_sym]="static per_group only (W4A16)"
  [w_int4_per_channel_asym]="static per_group only (W4A16)"
  [w_uint4_per_channel_sym]="static per_group only (W4A16)"
  [w_uint4_per_channel_asym]="static per_group only (W4A16)"
  # W4A16: the fused gate_up of 2 x 172 outputs is not whole words of 8
  # codes, and vLLM floors the shard offsets.
  [w_int4_per_group_sym]="out_features 172 is not a multiple of 8"
  [w_uint4_per_group_asym]="out_features 172 is not a multiple of 8"
  [int4_g32_exclude_glob]="out_features 172 is not a multiple of 8"
  # W4A16: vLLM XORs nibbles with 8 by `symmetric` alone.
  [w_int4_per_group_asym]="asymmetric int4 would decode wrong"
  [w_uint4_per_group_sym]="symmetric uint4 would decode wrong"
  # Integer schemes without a vLLM kernel.
  [w_int8_per_tensor_sym]="no int8 weight-only scheme"
  [w_int8_per_channel_sym]="no int8 weight-only scheme"
  [w_int8_per_group_sym]="not per_group"
  [w_int8_per_channel_a_int8_per_tensor_sym_dynamic]="dynamic per-token"
  [w_uint8_per_group_asym]="has no scheme for uint8 weights"
  [w_uint8_a_uint8_per_tensor_asym]="has no scheme for uint8 weights"
  [w_uint8_per_tensor_mse]="has no scheme for uint8 weights"
  [w_uint8_per_tensor_percentile]="has no scheme for uint8 weights"
  # MX: weight-only has no scheme; MXFP8 is not OCP MX in vLLM; the
  # 172-wide down_proj is 5 whole blocks and a partial one.
  [w_mxfp4]="no weight-only form"
  [w_mxfp6_e2m3]="no weight-only form"
  [w_mxfp6_e3m2]="no weight-only form"
  [w_mxfp8]="has no scheme for mxfp8_e4m3 weights"
  [w_mxfp8_a_mxfp8]="has no scheme for mxfp8_e4m3 weights"
  [w_mxfp4_a_mxfp4]="in_features 172 is not a multiple of 32"
  [w_mxfp4_a_mxfp6]="in_features 172 is not a multiple of 32"
  [w_mxfp4_a_mxfp6_e2m3]="in_features 172 is not a multiple of 32"
  [w_mxfp6_e2m3_a_mxfp6_e2m3]="in_features 172 is not a multiple of 32"
  [w_mxfp6_e3m2_a_mxfp6_e3m2]="in_features 172 is not a multiple of 32"
)

# The preset names, from the refusal of an unknown one.
"$BIN" --model "$MODEL" --scheme no_such_scheme --output "$TMP/none" --data-dir "$TMP/data" \
  >"$TMP/presets.log" 2>&1
presets=$(grep -o "known: .*" "$TMP/presets.log" | head -1 | sed 's/^known: //; s/,/ /g')
[ -n "$presets" ] || { cat "$TMP/presets.log"; echo "FAIL: no preset list"; exit 1; }

checked=0 passed=0 refused_vllm=0 refused=0 round_trips=0
# The export as a job's model, re-exported with the same flags: same bytes.
round_trip() {  # name, export dir, quantd-quantize flags...
  local name="$1" export="$2"; shift 2
  local again="$TMP/again/$name"
  "$BIN" --model "$export" --calib "$TEXT" --calib-samples 8 --calib-seq-len 64 --no-eval \
    --threads 1 --data-dir "$TMP/data" --format hf-quark --output "$again" "$@" \
    >"$TMP/$name.again.log" 2>&1 || { tail -3 "$TMP/$name.again.log"; fail "$name: round trip"; return; }
  grep -q "the model is a quantized checkpoint" "$TMP/$name.again.log" ||
    fail "$name: the round trip does not say it read a quantized checkpoint"
  if (cd "$export" && sha256sum model.safetensors config.json) |
      (cd "$again" && sha256sum -c --quiet -); then
    round_trips=$((round_trips + 1))
  else
    fail "$name: re-exporting its own hf-quark export changed the files"
  fi
}

run_case() {  # name, quantd-quantize flags... (the model: $CASE_MODEL, by default $MODEL)
  local name="$1"; shift
  local out="$TMP/out/$name" served="$TMP/vllm/$name"
  local common=(--model "${CASE_MODEL:-$MODEL}" --calib "$TEXT" --calib-samples 8 --calib-seq-len 64 --no-eval
    --threads 1 --data-dir "$TMP/data")
  "$BIN" "${common[@]}" --format hf --format hf-quark --output "$out" "$@" \
    >"$TMP/$name.quantize.log" 2>&1
  local rc=$?
  "$BIN" "${common[@]}" --format hf-quark --target vllm --output "$served" "$@" \
    >"$TMP/$name.vllm.log" 2>&1
  local vrc=$?
  if [ "$rc" -eq 3 ] && grep -q "spec.export.formats\[1\]: .*hf_quark cannot express" \
      "$TMP/$name.quantize.log"; then
    echo "refused for hf-quark: $name: $(grep -o 'hf_quark cannot express.*' \
      "$TMP/$name.quantize.log" | head -1)"
    refused=$((refused + 1))
    [ "$vrc" -eq 3 ] || fail "$name: refused for hf-quark, but accepted under --target vllm"
    [ -z "${VLLM_REFUSALS[$name]+x}" ] || fail "$name: refused for hf-quark, but in VLLM_REFUSALS"
    return
  fi
  if [ "$rc" -ne 0 ]; then
    tail -5 "$TMP/$name.quantize.log"; fail "$name: quantd-quantize exit $rc"; return
  fi
  round_trip "$name" "$out/hf_quark" "$@"
  "$PY" "$CHECK" "$out/hf_quark" --reference "$out/hf_fake_quantized" >"$TMP/$name.check" 2>&1
  rc=$?
  checked=$((checked + 1))
  local summary; summary=$(tail -1 "$TMP/$name.check")
  if [ -n "${VLLM_REFUSALS[$name]+x}" ]; then
    # Refused under --target vllm with the expected reason, and rightly:
    # the export made without the target fails in vLLM.
    if [ "$vrc" -ne 3 ]; then
      fail "$name: listed in VLLM_REFUSALS but --target vllm exits $vrc"
    elif ! grep -qF -- "${VLLM_REFUSALS[$name]}" "$TMP/$name.vllm.log"; then
      head -3 "$TMP/$name.vllm.log"; fail "$name: refused without '${VLLM_REFUSALS[$name]}'"
    elif [ "$rc" -ne 1 ]; then
      fail "$name: refused under --target vllm, but the checker passes its export ($summary)"
    else
      refused_vllm=$((refused_vllm + 1))
      echo "refused for vllm: $name: $(grep -oF -m1 -- "${VLLM_REFUSALS[$name]}" \
        "$TMP/$name.vllm.log"); the checker: $(grep -v '^note:' "$TMP/$name.check" | head -1)"
    fi
  elif [ "$rc" -ne 0 ]; then
    head -5 "$TMP/$name.check"; fail "$name: vLLM check exit $rc ($summary)"
  elif [ "$vrc" -ne 0 ]; then
    tail -3 "$TMP/$name.vllm.log"; fail "$name: the checker passes, but --target vllm exits $vrc"
  elif ! grep -q "HF_QUARK .* loads in: vllm" "$TMP/$name.vllm.log"; then
    fail "$name: the job's artifact does not say it loads in vllm"
  elif ! (cd "$out/hf_quark" && sha256sum model.safetensors config.json) |
      (cd "$served" && sha256sum -c --quiet -); then
    fail "$name: the --target vllm export differs from the checked one"
  else
    passed=$((passed + 1))
    echo "ok: $name: $summary ($(grep -c '^note:' "$TMP/$name.check") notes)"
  fi
}

for preset in $presets; do
  case "$preset" in
    *per_group*) run_case "$preset" --scheme "$preset" --group-size 4 ;;
    *) run_case "$preset" --scheme "$preset" ;;
  esac
done
run_case fp8_kv_cache --scheme w_fp8_a_fp8 --fp8-kv-cache
run_case int4_g32_exclude_glob --scheme w_int4_per_group_sym --group-size 32 --exclude '*down_proj'
for config in "$CONFIGS"/*.json; do
  run_case "config_$(basename "$config" .json)" --config "$config"
done

# Qwen3 (per-head q/k norms, head_dim 128 x 4 heads != hidden 256): a random
# checkpoint with Qwen3's own tensor names, in two schemes vLLM serves.
QWEN3="$TMP/qwen3"
"$PWD/worker/models/make_random_checkpoint" --out="$QWEN3" --arch=qwen3 --layers=2 \
  --hidden=256 --head_dim=128 --heads=4 --kv_heads=2 --intermediate=768 --vocab=512 \
  --dtype=f32 --seed=9 >/dev/null
cp "$MODEL/tokenizer.model" "$QWEN3/"
CASE_MODEL="$QWEN3" run_case qwen3_w_fp8_a_fp8 --scheme w_fp8_a_fp8
CASE_MODEL="$QWEN3" run_case qwen3_w_uint4_per_group_asym --scheme w_uint4_per_group_asym

# Phi-3 (qkv_proj / gate_up_proj fused on disk, partial rotary): vLLM loads
# each fused tensor without a shard id. FP8 per-tensor and W4A16 load and
# decode as quantd meant; an int8 per-tensor scale reaches the first shard
# only, so quantd refuses it under --target vllm and the checker fails it.
VLLM_REFUSALS[phi3_w_int8_a_int8_per_tensor_sym]="leaves the other shards' scales uninitialized"
PHI3="$TMP/phi3"
"$PWD/worker/models/make_random_checkpoint" --out="$PHI3" --arch=phi3 --layers=2 \
  --hidden=256 --heads=4 --kv_heads=2 --intermediate=768 --vocab=512 --dtype=f32 \
  --partial_rotary_factor=0.75 --seed=9 >/dev/null
cp "$MODEL/tokenizer.model" "$PHI3/"
CASE_MODEL="$PHI3" run_case phi3_w_fp8_a_fp8 --scheme w_fp8_a_fp8
CASE_MODEL="$PHI3" run_case phi3_w_uint4_per_group_asym --scheme w_uint4_per_group_asym
CASE_MODEL="$PHI3" run_case phi3_w_int8_a_int8_per_tensor_sym --scheme w_int8_a_int8_per_tensor_sym

for name in "${!VLLM_REFUSALS[@]}"; do
  [ -f "$TMP/$name.check" ] || fail "VLLM_REFUSALS lists $name, which no case ran"
done

# The checker itself must fail on broken exports (hand-made from passing ones).
"$PY" "$SELFTEST" "$CHECK" "$TMP/selftest" "$TMP/out/w_int8_a_int8_per_tensor_sym" \
  "$TMP/out/config_int4_w4a16_g32_sym" "$TMP/out/config_fp8_w8a8_fp8_kv" \
  || fail "checker self-test"

echo "summary: $checked exports checked: $passed load in vLLM and are accepted under" \
  "--target vllm, $refused_vllm fail in vLLM and are refused under it; $refused presets" \
  "refused for hf-quark; $round_trips exports re-exported identically from themselves;" \
  "$failures failures"
[ "$failures" -eq 0 ]
