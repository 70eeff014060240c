// DecoderBlock: one transformer block of a CausalLM, loaded on its own.
//
// Calibration and the quantization algorithms run a model block by block:
// every sample through block i, then block i+1, with only one block's
// weights resident. A block exposes what those algorithms need: its linear
// layers by full Hugging Face name (with hooks and replaceable kernels, see
// linear.h), the true-sequential groups in which GPTQ/AWQ visit them, its
// norms (mutable, for scale folding and rotation), every parameter by tensor
// name (to write back or export), and Forward over a batch of samples.
// Dropping the block frees its weights.
#ifndef QUANTD_WORKER_MODELS_DECODER_BLOCK_H_
#define QUANTD_WORKER_MODELS_DECODER_BLOCK_H_

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "worker/common/status.h"
#include "worker/models/layer_shapes.h"
#include "worker/models/linear.h"
#include "worker/models/model_config.h"
#include "worker/models/model_options.h"
#include "worker/models/norm.h"
#include "worker/models/transformer_ops.h"
#include "worker/models/weight_loader.h"

namespace quantd::models {

class DecoderBlock {
 public:
  virtual ~DecoderBlock() = default;
  DecoderBlock(const DecoderBlock&) = delete;
  DecoderBlock& operator=(const DecoderBlock&) = delete;

  int64_t index() const { return index_; }
  const BlockLayout& layout() const { return layout_; }
  const ModelConfig& config() const { return config_; }

  // Linear layers in execution order.
  std::vector<Linear*> linears() const;
  // nullptr when the block has no such layer. `name` is the module name,
  // e.g. "model.layers.0.self_attn.q_proj".
  Linear* FindLinear(const std::string& name) const;
  // True-sequential groups ([q,k,v], [o], [gate,up], [down] for Llama).
  const std::vector<LinearGroup>& groups() const { return layout_.groups; }
  std::vector<Norm*> norms() const;
  Norm* FindNorm(const std::string& name) const;

  // Every parameter by tensor name ("...q_proj.weight"), pointing at the live
  // tensors (linear weights in [out, in] layout; see
  // LinearLayerInfo::transposed_in_checkpoint).
  std::vector<std::pair<std::string, at::Tensor*>> NamedTensors();

  // hidden: [B, T, hidden_size], positions 0..T-1 in every sample, causal.
  // Runs whole samples in sub-batches of at most
  // ModelOptions::max_tokens_per_chunk tokens. The output is on the device
  // the block runs on, except for hidden states held in host memory while
  // the block runs on a GPU (activation offload): those are streamed to the
  // device one sub-batch at a time and the output is returned in host
  // memory. INVALID_ARGUMENT for a wrong shape; an exception thrown by
  // LibTorch, a hook or a kernel becomes INTERNAL naming the block.
  StatusOr<at::Tensor> Forward(const at::Tensor& hidden);

  // Forward for a caller that is done with `hidden`: when the block runs in
  // several sub-batches and hidden already has the output's dtype and
  // place, each sub-batch's output is written over its own input once
  // computed, so the calibration loop holds one copy of the activations
  // less (4 GiB at Llama-3-8B shapes with 128 x 2048 tokens). hidden's
  // values are then gone; otherwise it is Forward. Same values as Forward.
  StatusOr<at::Tensor> ForwardInPlace(const at::Tensor& hidden);

  // A mixture-of-experts block: the tokens routed to each expert by the
  // passes since the last call (counted again from zero). Empty for a
  // dense block.
  virtual std::vector<int64_t> TakeExpertTokenCounts() { return {}; }

  // Thrown by a linear's hook to end the current sub-batch's pass once the
  // hook has seen what it needs (RunHooks).
  struct StopPass {};

  // The block over `hidden` for its hooks only, sub-batch by sub-batch as
  // Forward runs it, without building an output. A hook that throws
  // StopPass ends that sub-batch's pass there (GPTQ, once the input of the
  // layer it collects a Hessian for has gone by), and the next sub-batch
  // starts. Errors as Forward's.
  Status RunHooks(const at::Tensor& hidden);

 protected:
  DecoderBlock(const ModelConfig& config, int64_t index, const ModelOptions& options)
      : config_(config), index_(index), options_(options), layout_(GetBlockLayout(config, index)) {}

  // Loads every linear and norm of layout_ (shape-checked).
  Status LoadWeights(const WeightLoader& loader);
  // One sub-batch. May throw.
  virtual at::Tensor ForwardChunk(const at::Tensor& hidden) = 0;

  // The attention of blocks with separate q/k/v projections (Llama, Gemma):
  // q, k, v from `normed` ([B, T, D]) by the linears at these layout
  // positions, the per-head q/k norms when the config has them, the rotary
  // embedding of `rope_config` (tables in `dtype`, the block input's), then
  // CausalSelfAttention with `options`.
  // Returns the heads side by side, [B, T, heads * head_dim], for o_proj.
  struct AttentionLayout {
    size_t q, k, v;
    size_t q_norm = 0, k_norm = 0;  // read when config().qk_norm
  };
  at::Tensor SeparateQkvAttention(const at::Tensor& normed, const AttentionLayout& layout,
                                  const ModelConfig& rope_config, at::ScalarType dtype,
                                  const AttentionOptions& options);

  // x + o_proj(attention(input_layernorm(x))) for a block in Llama's layout
  // (linears q, k, v, o first; norms input_layernorm, post_attention_layernorm,
  // then q_norm and k_norm): the Llama and mixture-of-experts blocks.
  at::Tensor LlamaAttentionResidual(const at::Tensor& x);

  // Layout order.
  Linear& linear(size_t i) { return *linears_[i]; }
  Norm& norm(size_t i) { return *norms_[i]; }
  const ModelOptions& options() const { return options_; }

 private:
  enum class Output { kNew, kOverInput, kNone };
  // Forward (kNew), ForwardInPlace (kOverInput) or RunHooks (kNone: an
  // undefined tensor).
  StatusOr<at::Tensor> Run(const at::Tensor& hidden, Output output);

  ModelConfig config_;
  int64_t index_;
  ModelOptions options_;
  BlockLayout layout_;
  std::vector<std::unique_ptr<Linear>> linears_;
  std::vector<std::unique_ptr<Norm>> norms_;
};

// A `Block` (a DecoderBlock with a (config, index, options) constructor)
// with its weights loaded: what each architecture's Load*Block returns.
template <typename Block>
StatusOr<std::unique_ptr<DecoderBlock>> LoadBlockOf(const ModelConfig& config, int64_t index,
                                                    const WeightLoader& loader) {
  auto block = std::make_unique<Block>(config, index, loader.options());
  QD_RETURN_IF_ERROR(block->LoadWeights(loader));
  return std::unique_ptr<DecoderBlock>(std::move(block));
}

}  // namespace quantd::models

#endif  // QUANTD_WORKER_MODELS_DECODER_BLOCK_H_
