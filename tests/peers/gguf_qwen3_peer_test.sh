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
#     from: its float perplexity is the checkpoint's;
#  4. with YaRN in config.json, the F32 file (llama.cpp's rope.scaling keys)
#     scores the job's perplexity in llama.cpp and reads back the same.
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

# YaRN (factor 4 over a pretrained context of 64 positions, so the ramp
# spans dims 0-17 of each head's 64 frequencies): the F32 file carries
# llama.cpp's rope.scaling keys and scores the job's perplexity there (4.).
yarn="$out/qwen3-yarn"
cp -r "$qwen3" "$yarn"
"$PY" - "$yarn/config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
json.dump(c, open(sys.argv[1], "w"))
PYEOF
mkdir -p "$out/qwen3yarn"
"$BIN" --model "$yarn" --gguf-type F32 --format gguf --output "$out/qwen3yarn/F32" \
  --data-dir "$out/data" --threads 2 -o json --eval "$TEXT" --n-ctx 128 --eval-windows 8 \
  >"$out/qwen3yarn/F32.json" 2>"$out/qwen3yarn/F32.err" ||
  { cat "$out/qwen3yarn/F32.err"; fail "qwen3 yarn F32 job"; }
add_to_manifest qwen3yarn F32 "$out/qwen3/windows.json"

echo "== qwen3 Q4_K_M: llama_model_quantize of quantd's F32 GGUF vs quantd's Q4_K_M"
tests/peers/llama_quantize_check "$libs" "$out/qwen3/F32/model.gguf" 15 \
  "$out/qwen3/Q4_K_M/model.gguf" "$out/qwen3/llama-Q4_K_M.gguf" 2>"$out/qwen3/llama.log" ||
  { cat "$out/qwen3/llama.log"; fail "qwen3 Q4_K_M differs from llama.cpp's"; }

node "$(readlink -f tests/peers/gguf_export_peer_check.mjs)" "$out/manifest.json" 0.005

# 3. The F32 GGUFs as the model: the same frequencies, the same perplexity
#    (and YaRN's is not the plain checkpoint's).
reads_back qwen3
reads_back qwen3yarn
"$PY" - "$out/qwen3/F32.json" "$out/qwen3yarn/F32.json" <<'PYEOF'
import json, sys
def ppl(path):
    job = json.loads([l for l in open(path).read().splitlines() if l.strip()][-1])
    return job["result"]["metrics"]["floatPerplexity"]["perplexity"]
plain, yarn = ppl(sys.argv[1]), ppl(sys.argv[2])
assert abs(yarn / plain - 1) > 0.01, (plain, yarn)
PYEOF
echo PASS
