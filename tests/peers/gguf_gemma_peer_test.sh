#!/usr/bin/env bash
# llama.cpp peer check of Gemma 2 and Gemma 3 (sandwich norms that scale by
# 1 + w, embeddings scaled by sqrt(hidden), GeGLU, soft-capping, sliding
# layers, Gemma 3's q/k norms and local rope base, head_dim != hidden /
# heads, GQA), on random checkpoints with Gemma's own tensor names and
# stories260K's tokenizer, through the public CLI (quantd-quantize). The
# sliding window is 32 tokens over 128-token windows, so it matters:
#  1. the F32 file and the Q4_K_M recipe load in llama.cpp (its gemma2 /
#     gemma3 architectures, norms stored as 1 + w) with the job's own
#     perplexity, within 0.5% (gguf_export_peer_check.mjs);
#  2. llama.cpp's own quantizer makes the same Q4_K_M file of quantd's F32
#     GGUF, byte for byte (llama_quantize_check);
#  3. the F32 GGUF given back as --model is read as the checkpoint it came
#     from: its float perplexity is the checkpoint's.
set -euo pipefail
source "$(dirname "$0")/gguf_peer_setup.sh" gguf_gemma_peer

for arch in gemma2 gemma3; do
  # Gemma 3 slides five layers of each six: seven layers hold both kinds.
  layers=2
  if [ "$arch" = gemma3 ]; then layers=7; fi
  dir="$out/$arch-random"
  worker/models/make_random_checkpoint --out="$dir" --arch="$arch" --layers="$layers" \
    --hidden=256 --heads=2 --kv_heads=1 --head_dim=64 --intermediate=768 --vocab=512 \
    --dtype=f32 --tied --sliding_window=32 --seed=11 >/dev/null
  cp models/stories260K/tokenizer.model "$dir/"
  f32_and_q4_k_m "$arch" "$dir"
done

node "$(readlink -f tests/peers/gguf_export_peer_check.mjs)" "$out/manifest.json" 0.005

# 3. Each F32 GGUF as the model of a job.
reads_back gemma2
reads_back gemma3
echo PASS
