#!/usr/bin/env bash
# llama.cpp peer check of Qwen3 (per-head q/k RMSNorms, head_dim 128 x 4
# heads != hidden 256), on a random checkpoint with Qwen3's own tensor names
# and stories260K's tokenizer, through the public CLI (quantd-quantize):
#  1. the F32 file, the Q4_K_M recipe and GPTQ on the Q4_K_M recipe load in
#     llama.cpp (its qwen3 architecture) with the job's own perplexity,
#     within 0.5% (gguf_export_peer_check.mjs);
#  2. llama.cpp's own quantizer makes the same Q4_K_M file of quantd's F32
#     GGUF, byte for byte (llama_quantize_check);
#  3. the F32 GGUF given back as --model is read as the checkpoint it came
#     from: its float perplexity is the checkpoint's.
set -euo pipefail
source "$(dirname "$0")/gguf_peer_setup.sh" gguf_qwen3_peer

qwen3="$out/qwen3-random"
worker/models/make_random_checkpoint --out="$qwen3" --arch=qwen3 --layers=2 --hidden=256 \
  --head_dim=128 --heads=4 --kv_heads=2 --intermediate=768 --vocab=512 --dtype=f32 \
  --seed=9 >/dev/null
cp models/stories260K/tokenizer.model "$qwen3/"
mkdir -p "$out/qwen3"
tests/peers/eval_windows "$qwen3" "$TEXT" 128 8 >"$out/qwen3/windows.json"

run_job() {  # name recipe [gptq]
  local args=(--model "$qwen3" --gguf-type "$2" --format gguf --output "$out/qwen3/$1"
              --data-dir "$out/data" --threads 2 -o json --eval "$TEXT" --n-ctx 128
              --eval-windows 8)
  [ "${3:-}" = gptq ] &&
    args+=(--calib "$CALIB" --calib-samples 32 --calib-seq-len 128 --algorithm gptq)
  "$BIN" "${args[@]}" >"$out/qwen3/$1.json" 2>"$out/qwen3/$1.err" ||
    { cat "$out/qwen3/$1.err"; fail "qwen3 $1 job"; }
}
run_job F32 F32
run_job Q4_K_M Q4_K_M
run_job Q4_K_M-gptq Q4_K_M gptq
for name in F32 Q4_K_M Q4_K_M-gptq; do add_to_manifest qwen3 "$name"; done

echo "== qwen3 Q4_K_M: llama_model_quantize of quantd's F32 GGUF vs quantd's Q4_K_M"
tests/peers/llama_quantize_check "$libs" "$out/qwen3/F32/model.gguf" 15 \
  "$out/qwen3/Q4_K_M/model.gguf" "$out/qwen3/llama-Q4_K_M.gguf" 2>"$out/qwen3/llama.log" ||
  { cat "$out/qwen3/llama.log"; fail "qwen3 Q4_K_M differs from llama.cpp's"; }

node "$(readlink -f tests/peers/gguf_export_peer_check.mjs)" "$out/manifest.json" 0.005

# 3. The F32 GGUF as the model of a job.
"$BIN" --model "$out/qwen3/F32/model.gguf" --scheme w_int8_per_channel_sym --eval "$TEXT" \
  --n-ctx 128 --eval-windows 8 --output "$out/qwen3/from-gguf" --data-dir "$out/data" \
  --threads 2 -o json >"$out/qwen3/from-gguf.json" 2>"$out/qwen3/from-gguf.err" ||
  { cat "$out/qwen3/from-gguf.err"; fail "qwen3 GGUF as the model"; }
"$PY" - "$out/qwen3/F32.json" "$out/qwen3/from-gguf.json" <<'PYEOF'
import json, sys
def job(path):
    return json.loads([l for l in open(path).read().splitlines() if l.strip()][-1])
checkpoint, gguf = job(sys.argv[1]), job(sys.argv[2])
a = checkpoint["result"]["metrics"]["floatPerplexity"]["perplexity"]
b = gguf["result"]["metrics"]["floatPerplexity"]["perplexity"]
print("qwen3 float perplexity: checkpoint %.6f, its F32 GGUF as the model %.6f" % (a, b))
assert abs(b / a - 1) < 1e-5, (a, b)
PYEOF
echo PASS
