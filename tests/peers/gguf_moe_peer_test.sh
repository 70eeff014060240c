#!/usr/bin/env bash
# llama.cpp peer check of the mixture-of-experts models (Mixtral as
# llama.cpp's llama with experts, Qwen2-MoE with its shared expert as
# qwen2moe, Qwen3-MoE with its q/k norms as qwen3moe, OLMoE with its
# whole-width q/k norms as olmoe), on random
# checkpoints with their real tensor names, 256-multiple widths (so the
# K-quants apply) and stories260K's tokenizer, through the public CLI
# (quantd-quantize). Each expert's weights go into llama.cpp's stacked
# blk.N.ffn_{gate,up,down}_exps tensors:
#  1. the F32 file and the Q4_K_M recipe load in llama.cpp with the job's
#     own perplexity, within 0.5% (gguf_export_peer_check.mjs): llama.cpp's
#     routing, an independent implementation, agrees with quantd's;
#  2. llama.cpp's own quantizer makes the same Q4_K_M file of quantd's F32
#     GGUF, byte for byte (llama_quantize_check).
set -euo pipefail
source "$(dirname "$0")/gguf_peer_setup.sh" gguf_moe_peer

for arch in mixtral qwen2_moe qwen3_moe olmoe; do
  dir="$out/$arch-random"
  kv_heads=2
  # llama.cpp's olmoe has no grouped-query attention (its k_norm is
  # hidden_size wide).
  if [ "$arch" = olmoe ]; then kv_heads=4; fi
  worker/models/make_random_checkpoint --out="$dir" --arch="$arch" --layers=2 \
    --hidden=256 --heads=4 --kv_heads="$kv_heads" --intermediate=512 --vocab=512 --experts=4 \
    --experts_per_tok=2 --moe_intermediate=256 --dtype=f32 --seed=13 >/dev/null
  cp models/stories260K/tokenizer.model "$dir/"
  f32_and_q4_k_m "$arch" "$dir"
done

node "$(readlink -f tests/peers/gguf_export_peer_check.mjs)" "$out/manifest.json" 0.005
echo PASS
