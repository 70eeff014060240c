#!/bin/bash
# compressed-tensors exports of stories260K checked the way vLLM loads them:
# every preset the format accepts is quantized by quantd-quantize with
# --format hf --format compressed-tensors and vllm_ct_check.py compares the
# export with vLLM's rules and the dequantized weights with the hf export;
# every other preset is refused with its message; the checker fails on
# broken copies of a good export. Each export is also the model of a job
# with the same flags, which must write the same files (round_trip).
set -u
R="${TEST_SRCDIR}/quantd"
BIN="$R/worker/cli/quantd-quantize"
TEXT="$R/tests/data/tinystories-sample.txt"
CHECK="$R/tests/peers/vllm_ct_check.py"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
# A real directory, so that quantd reads the model's shapes at CreateJob
# (the runfiles are links it does not follow out of a directory).
MODEL="$TMP/stories260K"
cp -rL "$R/models/stories260K" "$MODEL"
PY=/usr/bin/python3
fail() { echo "FAIL: $*" >&2; exit 1; }

quantize() {  # NAME FLAGS... (the model: $CASE_MODEL, by default $MODEL)
  local name="$1"; shift
  "$BIN" --model "${CASE_MODEL:-$MODEL}" --calib "$TEXT" --calib-samples 4 --calib-seq-len 32 --no-eval \
    --threads 1 --output "$TMP/$name" --data-dir "$TMP/data" "$@" >"$TMP/$name.log" 2>&1
}

# The export DIR as a job's model, re-exported with the same FLAGS: the same
# model.safetensors and config.json, the stored codes and scales kept.
round_trip() {  # NAME DIR FLAGS...
  local name="$1" export="$2"; shift 2
  "$BIN" --model "$export" --calib "$TEXT" --calib-samples 4 --calib-seq-len 32 --no-eval \
    --threads 1 --output "$TMP/$name-again" --data-dir "$TMP/data" \
    --format compressed-tensors "$@" >"$TMP/$name-again.log" 2>&1 ||
    { cat "$TMP/$name-again.log"; fail "$name: round trip exit $?"; }
  grep -q "the model is a quantized checkpoint" "$TMP/$name-again.log" ||
    fail "$name: the round trip does not say it read a quantized checkpoint"
  (cd "$export" && sha256sum -- *.safetensors config.json) |
    (cd "$TMP/$name-again" && sha256sum -c --quiet -) ||
    fail "$name: re-exporting its own compressed-tensors export changed the files"
}

# 1. Accepted presets. 4-bit weights pack 8 per word: down_proj's 172 inputs
#    do not, nor (asymmetric: zero points packed along the outputs) the 172
#    outputs of gate_proj / up_proj; those stay in float (listed in ignore).
NO_DOWN=(--exclude '*down_proj')
NO_MLP=(--exclude '*down_proj' --exclude '*gate_proj' --exclude '*up_proj')
accepted=(
  "w_int4_per_channel_sym ${NO_DOWN[*]}"
  "w_int4_per_channel_asym ${NO_MLP[*]}"
  "w_uint4_per_channel_sym ${NO_DOWN[*]}"
  "w_uint4_per_channel_asym ${NO_MLP[*]}"
  "w_int4_per_group_sym --group-size 32 ${NO_DOWN[*]}"
  "w_int4_per_group_asym --group-size 32 ${NO_MLP[*]}"
  "w_uint4_per_group_sym --group-size 32 ${NO_DOWN[*]}"
  "w_uint4_per_group_asym --group-size 32 ${NO_MLP[*]}"
  "w_int8_per_group_sym --group-size 4"
  "w_uint8_per_group_asym --group-size 4"
  "w_int8_per_channel_sym"
  "w_int8_a_int8_per_tensor_sym"
  "w_int8_a_int8_per_token_dynamic"
  "w_int8_per_tensor_percentile"
  "w_int8_per_tensor_mse"
  "w_uint8_per_tensor_percentile"
  "w_uint8_per_tensor_mse"
  "w_fp8_a_fp8"
  "w_fp8_a_fp8 --fp8-kv-cache"
  "w_fp8_per_channel_a_fp8_per_token_dynamic"
)
i=0
for entry in "${accepted[@]}"; do
  read -r -a args <<<"$entry"
  name="ok$i-${args[0]}"
  i=$((i + 1))
  # The globs reach quantd-quantize unexpanded: read -a does not glob.
  quantize "$name" --scheme "${args[@]}" --format hf --format compressed-tensors ||
    { cat "$TMP/$name.log"; fail "$entry: quantd-quantize exit $?"; }
  "$PY" "$CHECK" "$TMP/$name/compressed_tensors" "$TMP/$name/hf_fake_quantized" \
    >"$TMP/$name.check" 2>&1 || { cat "$TMP/$name.check"; fail "$entry: vLLM conformance"; }
  echo "$entry: $(tail -n 1 "$TMP/$name.check")"
  # Under --target vllm the same job is accepted, says where it loads, and
  # writes the bytes the checker passed.
  quantize "$name-vllm" --scheme "${args[@]}" --format compressed-tensors --target vllm ||
    { cat "$TMP/$name-vllm.log"; fail "$entry: refused under --target vllm"; }
  grep -q "COMPRESSED_TENSORS .* loads in: vllm" "$TMP/$name-vllm.log" ||
    fail "$entry: the artifact does not say it loads in vllm"
  (cd "$TMP/$name/compressed_tensors" && sha256sum -- *.safetensors config.json) |
    (cd "$TMP/$name-vllm" && sha256sum -c --quiet -) || fail "$entry: --target vllm bytes differ"
  round_trip "$name" "$TMP/$name-vllm" --scheme "${args[@]}"
done
# A width vLLM's WNA16 scheme cannot pack (down_proj's 172 inputs) is
# refused at submit under --target vllm, naming the presets that serve.
quantize shape-vllm --scheme w_int4_per_group_sym --group-size 32 --format compressed-tensors \
  --target vllm
rc=$?
[ "$rc" -eq 3 ] || { cat "$TMP/shape-vllm.log"; fail "shape: exit $rc, not 3"; }
grep -q "spec.quantization.scheme: target vllm: vLLM cannot serve this as compressed_tensors: model.layers.0.mlp.down_proj (and 4 more): in_features 172 is not a multiple of 8" \
  "$TMP/shape-vllm.log" || { cat "$TMP/shape-vllm.log"; fail "shape: message"; }
grep -q "presets vLLM serves for this model as compressed_tensors: .*w_int8_per_channel_sym" \
  "$TMP/shape-vllm.log" || { cat "$TMP/shape-vllm.log"; fail "shape: presets"; }
grep -q "W8A8Fp8 x35" "$TMP"/ok18-*.check || fail "fp8 kv: expected 35 W8A8Fp8 Linears"
"$PY" - "$TMP/ok18-w_fp8_a_fp8/compressed_tensors/config.json" <<'PYEOF' || fail "kv config"
import json, sys
q = json.load(open(sys.argv[1]))["quantization_config"]
assert q["kv_cache_scheme"]["type"] == "float" and q["kv_cache_scheme"]["num_bits"] == 8, q
assert q["format"] == "float-quantized" and q["config_groups"]["group_0"]["targets"] == ["Linear"]
PYEOF

# Configs beyond the presets: W8A8 with asymmetric uint8 inputs
# (input_zero_point), and mixed precision (int4 attention, FP8 W8A8 MLP:
# two config groups with exact targets and their own formats).
spec() {  # DTYPE QSCHEME SYMMETRIC [GROUP]
  echo "{\"dtype\": \"$1\", \"qscheme\": \"$2\", \"symmetric\": $3, \"is_dynamic\": false,
    \"round_method\": \"half_even\", \"scale_type\": \"float\", \"group_size\": ${4:-null},
    \"ch_axis\": $([ "$2" = per_group ] && echo 1 || echo 0)}"
}
cat >"$TMP/w8a8_asym_in.json" <<JSON
{"quant_method": "quark", "exclude": ["lm_head"], "layer_type_quant_config": {},
 "layer_quant_config": {},
 "global_quant_config": {"weight": $(spec int8 per_channel true),
                         "input_tensors": $(spec uint8 per_tensor false)}}
JSON
cat >"$TMP/mixed.json" <<JSON
{"quant_method": "quark", "exclude": ["lm_head"], "layer_type_quant_config": {},
 "global_quant_config": {"weight": $(spec int4 per_group true 32)},
 "layer_quant_config": {
   "*mlp*": {"weight": $(spec fp8_e4m3 per_tensor true), "input_tensors": $(spec fp8_e4m3 per_tensor true)}}}
JSON
# GPTQ with act_order and without static_groups: groups of permuted columns,
# written as weight_g_idx with actorder "group" (the down_proj's 172 inputs
# are not whole words of 8 int4 codes, so it stays in float).
cat >"$TMP/gptq_act_order.json" <<JSON
{"quant_method": "quark", "exclude": ["lm_head", "*down_proj"], "layer_type_quant_config": {},
 "layer_quant_config": {}, "global_quant_config": {"weight": $(spec int4 per_group true 32)},
 "algo_config": [{"name": "gptq", "desc_act": true, "static_groups": false}]}
JSON
for cfg in w8a8_asym_in mixed gptq_act_order; do
  quantize "cfg-$cfg" --config "$TMP/$cfg.json" --format hf --format compressed-tensors ||
    { cat "$TMP/cfg-$cfg.log"; fail "$cfg: quantd-quantize exit $?"; }
  "$PY" "$CHECK" "$TMP/cfg-$cfg/compressed_tensors" "$TMP/cfg-$cfg/hf_fake_quantized" \
    >"$TMP/cfg-$cfg.check" 2>&1 || { cat "$TMP/cfg-$cfg.check"; fail "$cfg: vLLM conformance"; }
  echo "config $cfg: $(tail -n 1 "$TMP/cfg-$cfg.check")"
done
grep -q "W8A8Fp8 x15, WNA16 x20" "$TMP/cfg-mixed.check" || fail "mixed: expected 15 FP8 + 20 WNA16"
grep -q '"mixed-precision"' "$TMP/cfg-mixed/compressed_tensors/config.json" || fail "mixed format"
"$PY" - "$TMP/cfg-gptq_act_order/compressed_tensors" <<'PYEOF' || fail "gptq act_order: g_idx"
import json, struct, sys
d = sys.argv[1]
q = json.load(open(d + "/config.json"))["quantization_config"]
assert q["config_groups"]["group_0"]["weights"]["actorder"] == "group", q
with open(d + "/model.safetensors", "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    base = 8 + struct.unpack("<Q", open(d + "/model.safetensors", "rb").read(8))[0]
    g = [k for k in header if k.endswith(".weight_g_idx")]
    assert len(g) == 30, g  # q, k, v, o, gate, up of 5 blocks
    # The groups are permuted columns, not c // 32 (else the test proves nothing).
    permuted = 0
    for k in g:
        begin, end = header[k]["data_offsets"]
        f.seek(base + begin)
        idx = struct.unpack("<%di" % ((end - begin) // 4), f.read(end - begin))
        permuted += any(v != c // 32 for c, v in enumerate(idx))
    assert permuted == 30, permuted
PYEOF
grep -q "WNA16 x30" "$TMP/cfg-gptq_act_order.check" || fail "gptq act_order: expected 30 WNA16"
round_trip cfg-w8a8_asym_in "$TMP/cfg-w8a8_asym_in/compressed_tensors" --config "$TMP/w8a8_asym_in.json"
round_trip cfg-mixed "$TMP/cfg-mixed/compressed_tensors" --config "$TMP/mixed.json"
# GPTQ's result is in the stored codes: re-exported with its scheme alone,
# the permuted groups and weight_g_idx come back as they were.
round_trip cfg-gptq_act_order "$TMP/cfg-gptq_act_order/compressed_tensors" \
  --scheme w_int4_per_group_sym --group-size 32 --exclude '*down_proj'
grep -q "keeps the stored parameters of 30 weights" "$TMP/cfg-gptq_act_order-again.log" ||
  fail "gptq act_order round trip: expected 30 kept weights"
# Run again with GPTQ, the job says it quantizes the stored weights afresh.
"$BIN" --model "$TMP/cfg-gptq_act_order/compressed_tensors" --calib "$TEXT" --calib-samples 4 \
  --calib-seq-len 32 --no-eval --threads 1 --output "$TMP/gptq-again" --data-dir "$TMP/data" \
  --config "$TMP/gptq_act_order.json" --format compressed-tensors >"$TMP/gptq-again.log" 2>&1 ||
  fail "gptq act_order with GPTQ again: exit $?"
grep -q "30 stored weights are quantized afresh .*the job's algorithms change the weights" \
  "$TMP/gptq-again.log" || { cat "$TMP/gptq-again.log"; fail "gptq again: no afresh warning"; }

# Qwen3 (per-head q/k norms, head_dim 128 x 4 heads != hidden 256): a random
# checkpoint with Qwen3's own tensor names; vLLM's Qwen3 loads its linears as
# Qwen2 does and its q_norm / k_norm as float weights.
QWEN3="$TMP/qwen3"
"$R/worker/models/make_random_checkpoint" --out="$QWEN3" --arch=qwen3 --layers=2 --hidden=256 \
  --head_dim=128 --heads=4 --kv_heads=2 --intermediate=768 --vocab=512 --dtype=f32 \
  --seed=9 >/dev/null
cp "$MODEL/tokenizer.model" "$QWEN3/"
for scheme in w_uint4_per_group_asym w_fp8_a_fp8; do
  name="qwen3-$scheme"
  CASE_MODEL="$QWEN3" quantize "$name" --scheme "$scheme" --format hf --format compressed-tensors ||
    { cat "$TMP/$name.log"; fail "$name: quantd-quantize exit $?"; }
  "$PY" "$CHECK" "$TMP/$name/compressed_tensors" "$TMP/$name/hf_fake_quantized" \
    >"$TMP/$name.check" 2>&1 || { cat "$TMP/$name.check"; fail "$name: vLLM conformance"; }
  echo "$name: $(tail -n 1 "$TMP/$name.check")"
done

# Phi-3 (qkv_proj / gate_up_proj fused on disk, partial rotary): vLLM loads
# each fused tensor without a shard id. W4A16 and FP8 decode as stored; an
# int8 per-tensor weight_scale reaches shard 0 only, so the checker fails
# that export and quantd refuses it under --target vllm.
PHI3="$TMP/phi3"
"$R/worker/models/make_random_checkpoint" --out="$PHI3" --arch=phi3 --layers=2 --hidden=256 \
  --heads=4 --kv_heads=2 --intermediate=768 --vocab=512 --dtype=f32 \
  --partial_rotary_factor=0.75 --seed=9 >/dev/null
cp "$MODEL/tokenizer.model" "$PHI3/"
for scheme in w_uint4_per_group_asym w_fp8_a_fp8 w_int8_a_int8_per_tensor_sym; do
  name="phi3-$scheme"
  CASE_MODEL="$PHI3" quantize "$name" --scheme "$scheme" --format hf --format compressed-tensors ||
    { cat "$TMP/$name.log"; fail "$name: quantd-quantize exit $?"; }
  "$PY" "$CHECK" "$TMP/$name/compressed_tensors" "$TMP/$name/hf_fake_quantized" \
    >"$TMP/$name.check" 2>&1
  rc=$?
  echo "$name: $(tail -n 1 "$TMP/$name.check")"
  if [ "$scheme" = w_int8_a_int8_per_tensor_sym ]; then
    [ "$rc" -eq 1 ] && grep -q "loads into shard 0 only" "$TMP/$name.check" ||
      { cat "$TMP/$name.check"; fail "$name: the checker should fail it"; }
    CASE_MODEL="$PHI3" quantize "$name-vllm" --scheme "$scheme" --format compressed-tensors \
      --target vllm && fail "$name: accepted under --target vllm"
    grep -q "leaves the other shards' scales uninitialized" "$TMP/$name-vllm.log" ||
      { cat "$TMP/$name-vllm.log"; fail "$name: refused without the reason"; }
  else
    [ "$rc" -eq 0 ] || { cat "$TMP/$name.check"; fail "$name: vLLM conformance"; }
  fi
done

# 2. Refused presets, with what they cannot express.
refused=(
  "w_int2_per_group_asym|4- and 8-bit integers only"
  "w_int8_per_tensor_sym|per-channel or per-group scales"
  "w_int8_a_int8_per_tensor_sym_dynamic|a weight quantizer cannot be dynamic"
  "w_int8_per_channel_a_int8_per_tensor_sym_dynamic|quantize dynamic inputs per token only"
  "w_uint8_a_uint8_per_tensor_asym|symmetric per-tensor or per-channel weights"
  "w_fp8_a_fp8_o_fp8|only k_proj / v_proj outputs"
  "w_fp8_per_channel_sym|only k_proj / v_proj outputs"
  "w_mxfp4|no compressed-tensors MX layout"
  "w_mxfp6_e2m3_a_mxfp6_e2m3|no compressed-tensors MX layout"
  "w_mxint8|no compressed-tensors MX layout"
  "w_bf16|no float16 / bfloat16 cast scheme"
  "w_int4_per_channel_sym|in_features is 172"
)
for entry in "${refused[@]}"; do
  scheme="${entry%%|*}"
  want="${entry#*|}"
  quantize "no-$scheme" --scheme "$scheme" --format compressed-tensors &&
    fail "$scheme: accepted, expected a refusal"
  grep -qF "compressed_tensors" "$TMP/no-$scheme.log" && grep -qF "$want" "$TMP/no-$scheme.log" ||
    { cat "$TMP/no-$scheme.log"; fail "$scheme: refusal does not say '$want'"; }
  echo "$scheme: refused ($want)"
done

# 3. The checker fails on broken copies of a good export.
GOOD="$TMP/ok5-w_int4_per_group_asym/compressed_tensors"
HF="$TMP/ok5-w_int4_per_group_asym/hf_fake_quantized"
broken() {  # NAME EXPECTED-EXIT EXPECTED-TEXT PYTHON-EDIT
  local dir="$TMP/broken-$1"
  rm -rf "$dir" && cp -r "$GOOD" "$dir"
  "$PY" - "$dir" <<<"$4" || fail "broken $1: edit failed"
  "$PY" "$CHECK" "$dir" "$HF" >"$dir.out" 2>&1
  local rc=$?
  [ "$rc" -eq "$2" ] || { cat "$dir.out"; fail "broken $1: checker exit $rc, expected $2"; }
  grep -qF "$3" "$dir.out" || { cat "$dir.out"; fail "broken $1: no '$3'"; }
  echo "broken $1: exit $rc ($3)"
}
EDIT_TENSOR='
import json, struct, sys
p = sys.argv[1] + "/model.safetensors"
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
'
broken flipped-nibble 1 "dequantized weights differ" "$EDIT_TENSOR
o = 8 + n + h['model.layers.1.self_attn.o_proj.weight_packed']['data_offsets'][0]
b[o] ^= 0x01
open(p, 'wb').write(b)"
broken flipped-zero-point 1 "dequantized weights differ" "$EDIT_TENSOR
o = 8 + n + h['model.layers.0.self_attn.o_proj.weight_zero_point']['data_offsets'][0]
b[o] ^= 0x10
open(p, 'wb').write(b)"
broken glob-ignore 1 "is a glob" '
import json, sys
p = sys.argv[1] + "/config.json"
c = json.load(open(p))
c["quantization_config"]["ignore"] = ["lm_head", "*down_proj"]
json.dump(c, open(p, "w"))'
broken wrong-format 1 "without input_activations needs float weights" '
import json, sys
p = sys.argv[1] + "/config.json"
c = json.load(open(p))
c["quantization_config"]["format"] = "naive-quantized"
for g in c["quantization_config"]["config_groups"].values(): g["format"] = "naive-quantized"
json.dump(c, open(p, "w"))'
broken renamed-tensor 1 "missing" "$EDIT_TENSOR
raw = json.dumps(h).replace('layers.2.self_attn.q_proj.weight_shape', 'layers.2.self_attn.q_proj.weight_shap_')
b = struct.pack('<Q', len(raw)) + raw.encode() + b[8 + n:]
open(p, 'wb').write(b)"
broken truncated 2 "UNREADABLE" '
import os, sys
p = sys.argv[1] + "/model.safetensors"
os.truncate(p, os.path.getsize(p) - 100)'
broken huge-header 2 "UNREADABLE" '
import struct, sys
p = sys.argv[1] + "/model.safetensors"
b = bytearray(open(p, "rb").read())
b[:8] = struct.pack("<Q", 1 << 40)
open(p, "wb").write(b)'
echo PASS
