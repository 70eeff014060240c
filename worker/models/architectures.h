// Block factories of the implemented architecture families. registry.cc maps
// config.json "architectures" values onto them; nothing else should need
// these directly.
#ifndef QUANTD_WORKER_MODELS_ARCHITECTURES_H_
#define QUANTD_WORKER_MODELS_ARCHITECTURES_H_

#include <memory>

#include "worker/common/status.h"
#include "worker/models/decoder_block.h"
#include "worker/models/model_config.h"
#include "worker/models/weight_loader.h"

namespace quantd::models {

// Llama 2/3, Mistral, Qwen2, Qwen3: RMSNorm, rotary positions, GQA, SwiGLU
// MLP; Qwen3 adds per-head q/k RMSNorms.
StatusOr<std::unique_ptr<DecoderBlock>> LoadLlamaBlock(const ModelConfig& config, int64_t index,
                                                       const WeightLoader& loader);
// Mixtral, Qwen2-MoE, Qwen3-MoE: the Llama block with a mixture-of-experts
// MLP on the config's sparse layers (a Llama block on the others).
StatusOr<std::unique_ptr<DecoderBlock>> LoadMoeBlock(const ModelConfig& config, int64_t index,
                                                     const WeightLoader& loader);
// Phi-3 / Phi-4: the Llama block with fused qkv_proj and gate_up_proj,
// partial rotary dimensions, a sliding window on every layer.
StatusOr<std::unique_ptr<DecoderBlock>> LoadPhi3Block(const ModelConfig& config, int64_t index,
                                                      const WeightLoader& loader);
// Gemma 2 / Gemma 3: (1 + weight) sandwich norms, soft-capped attention,
// sliding layers, Gemma 3's q/k norms and local rope base.
StatusOr<std::unique_ptr<DecoderBlock>> LoadGemmaBlock(const ModelConfig& config, int64_t index,
                                                       const WeightLoader& loader);
// GPT-2: LayerNorm, fused c_attn, GELU MLP.
StatusOr<std::unique_ptr<DecoderBlock>> LoadGpt2Block(const ModelConfig& config, int64_t index,
                                                      const WeightLoader& loader);
// OPT: LayerNorm before or after (do_layer_norm_before), ReLU MLP.
StatusOr<std::unique_ptr<DecoderBlock>> LoadOptBlock(const ModelConfig& config, int64_t index,
                                                     const WeightLoader& loader);

}  // namespace quantd::models

#endif  // QUANTD_WORKER_MODELS_ARCHITECTURES_H_
