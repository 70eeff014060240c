#!/usr/bin/env bash
# llama.cpp peer check of Phi-3 / Phi-4-mini (fused qkv_proj and gate_up_proj,
# partial rotary: 48 of each head's 64 dimensions turn, GQA), on a random
# checkpoint with Phi-3's own tensor names and stories260K's tokenizer,
# through the public CLI (quantd-quantize):
#  1. the F32 file and the Q4_K_M recipe load in llama.cpp (its phi3
#     architecture: attn_qkv, a double-height ffn_up) with the job's own
#     perplexity, within 0.5% (gguf_export_peer_check.mjs);
#  2. llama.cpp's own quantizer makes the same Q4_K_M file of quantd's F32
#     GGUF, byte for byte (llama_quantize_check), so the fused tensors get
#     llama.cpp's types (attn_qkv Q5_K in Q4_K_M);
#  3. the F32 GGUF given back as --model is read as the checkpoint it came
#     from: its float perplexity is the checkpoint's.
set -euo pipefail
source "$(dirname "$0")/gguf_peer_setup.sh" gguf_phi3_peer

# Not named "phi3...": llama.cpp gives the special tokens of a model whose
# general.name contains "phi3" Phi-3's attributes, and stories260K's
# vocabulary has no <|endoftext|> (llama-vocab.cpp throws "_Map_base::at").
phi3="$out/fused-random"
worker/models/make_random_checkpoint --out="$phi3" --arch=phi3 --layers=2 --hidden=256 \
  --heads=4 --kv_heads=2 --intermediate=768 --vocab=512 --dtype=f32 --partial_rotary_factor=0.75 \
  --seed=9 >/dev/null
cp models/stories260K/tokenizer.model "$phi3/"
f32_and_q4_k_m phi3 "$phi3"

node "$(readlink -f tests/peers/gguf_export_peer_check.mjs)" "$out/manifest.json" 0.005

# 3. The F32 GGUF as the model of a job.
reads_back phi3
echo PASS
