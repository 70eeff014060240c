// CausalLM: a decoder-only language model executed one piece at a time.
//
// A CausalLM holds only its config and a TensorSource; every piece is loaded
// on demand and freed when dropped, so a model far larger than memory runs
// with one block resident:
//
//   auto model = OpenCausalLM("/models/llama");        // registry.h
//   QD_ASSIGN_OR_RETURN(at::Tensor h, (*model)->Embed(ids));       // [B,T,D]
//   for (int64_t i = 0; i < (*model)->num_blocks(); ++i) {
//     QD_ASSIGN_OR_RETURN(auto block, (*model)->LoadBlock(i));
//     ... install hooks on block->linears() ...
//     QD_ASSIGN_OR_RETURN(h, block->Forward(h));
//   }                                                  // block freed here
//   QD_ASSIGN_OR_RETURN(at::Tensor logits, (*model)->Head(h));
//
// Every Load* also takes an explicit TensorSource, so the pipeline can run a
// block from an overlay holding its quantized weights. The embedding and the
// head are objects too, exposing their named tensors (rotation, quantized
// embeddings, untying).
#ifndef QUANTD_WORKER_MODELS_CAUSAL_LM_H_
#define QUANTD_WORKER_MODELS_CAUSAL_LM_H_

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/tensor_source.h"
#include "worker/models/decoder_block.h"
#include "worker/models/layer_shapes.h"
#include "worker/models/linear.h"
#include "worker/models/model_config.h"
#include "worker/models/model_options.h"
#include "worker/models/norm.h"

namespace quantd::models {

class Embedding;

// Replaces an embedding's row lookup (a frozen, real-quantized table
// dequantizes the rows it looks up). May throw c10::Error.
class EmbeddingLookup {
 public:
  virtual ~EmbeddingLookup() = default;
  virtual at::Tensor Forward(const Embedding& embedding, const at::Tensor& ids) const = 0;
};

// A named lookup table ("model.embed_tokens" with weight [num, dim]).
class Embedding {
 public:
  Embedding(EmbeddingInfo info, at::Tensor weight)
      : info_(std::move(info)), weight_(std::move(weight)) {}
  const EmbeddingInfo& info() const { return info_; }
  const std::string& name() const { return info_.name; }
  at::Tensor& weight() { return weight_; }
  const at::Tensor& weight() const { return weight_; }
  // ids: int64 of any shape, each in [0, num_embeddings).
  at::Tensor Forward(const at::Tensor& ids) const;
  // Looks rows up through `lookup` instead of the weight (which may then be
  // dropped).
  void SetLookup(std::shared_ptr<const EmbeddingLookup> lookup) { lookup_ = std::move(lookup); }

 private:
  EmbeddingInfo info_;
  at::Tensor weight_;
  std::shared_ptr<const EmbeddingLookup> lookup_;
};

// ids -> the hidden states block 0 reads: token embedding, then OPT's
// project_in, plus learned positions (GPT-2, OPT).
class EmbeddingStage {
 public:
  Embedding& token_embedding() { return *token_; }
  // nullptr when the architecture has none.
  Embedding* position_embedding() { return position_.get(); }
  Linear* project_in() { return project_in_.get(); }
  // Every parameter by tensor name.
  std::vector<std::pair<std::string, at::Tensor*>> NamedTensors();

  // ids: [B, T] integer token ids. INVALID_ARGUMENT for ids outside the
  // vocabulary or T beyond the learned positions.
  StatusOr<at::Tensor> Forward(const at::Tensor& ids) const;

 private:
  friend class CausalLM;
  EmbeddingStage() = default;
  ModelOptions options_;
  int64_t position_offset_ = 0;
  double embed_scale_ = 0;  // Gemma: sqrt(hidden_size), in the hidden dtype
  std::unique_ptr<Embedding> token_;
  std::unique_ptr<Embedding> position_;
  std::unique_ptr<Linear> project_in_;
};

// Final hidden states -> logits: final norm, OPT's project_out, lm_head,
// Gemma 2's soft-capping.
class HeadStage {
 public:
  Norm* final_norm() { return final_norm_.get(); }
  Linear* project_out() { return project_out_.get(); }
  Linear& lm_head() { return *lm_head_; }
  // True when lm_head's weight was read from the token embedding (tied and
  // the source has no lm_head.weight).
  bool tied() const { return tied_; }
  std::vector<std::pair<std::string, at::Tensor*>> NamedTensors();

  // hidden: [..., hidden_size] -> logits [..., vocab_size] in float32.
  StatusOr<at::Tensor> Forward(const at::Tensor& hidden) const;

 private:
  friend class CausalLM;
  HeadStage() = default;
  std::unique_ptr<Norm> final_norm_;
  std::unique_ptr<Linear> project_out_;
  std::unique_ptr<Linear> lm_head_;
  bool tied_ = false;
  int64_t hidden_size_ = 0;
  double softcap_ = 0;  // Gemma 2's final_logit_softcapping
};

// Builds block `index` of an architecture family from `loader`.
using BlockFactory = std::function<StatusOr<std::unique_ptr<DecoderBlock>>(
    const ModelConfig& config, int64_t index, const WeightLoader& loader)>;

class CausalLM {
 public:
  // Use LoadCausalLM / OpenCausalLM (registry.h), which pick the factory.
  CausalLM(ModelConfig config, std::shared_ptr<const io::TensorSource> weights,
           ModelOptions options, BlockFactory block_factory);

  const ModelConfig& config() const { return config_; }
  const ModelLayout& layout() const { return layout_; }
  const ModelOptions& options() const { return options_; }
  const io::TensorSource& weights() const { return *weights_; }
  std::shared_ptr<const io::TensorSource> shared_weights() const { return weights_; }
  int64_t num_blocks() const { return config_.num_hidden_layers; }

  // Pieces read from `source` (which may overlay the model's own weights).
  StatusOr<std::unique_ptr<EmbeddingStage>> LoadEmbedding(const io::TensorSource& source) const;
  StatusOr<std::unique_ptr<DecoderBlock>> LoadBlock(int64_t index,
                                                    const io::TensorSource& source) const;
  StatusOr<std::unique_ptr<HeadStage>> LoadHead(const io::TensorSource& source) const;

  // The same, from the model's own weights.
  StatusOr<std::unique_ptr<EmbeddingStage>> LoadEmbedding() const {
    return LoadEmbedding(*weights_);
  }
  StatusOr<std::unique_ptr<DecoderBlock>> LoadBlock(int64_t index) const {
    return LoadBlock(index, *weights_);
  }
  StatusOr<std::unique_ptr<HeadStage>> LoadHead() const { return LoadHead(*weights_); }

  // Load, run and drop in one call.
  StatusOr<at::Tensor> Embed(const at::Tensor& ids) const;
  StatusOr<at::Tensor> Head(const at::Tensor& hidden) const;
  // The whole model, block by block: ids [B, T] -> logits [B, T, vocab].
  StatusOr<at::Tensor> Forward(const at::Tensor& ids) const;

 private:
  ModelConfig config_;
  ModelLayout layout_;
  std::shared_ptr<const io::TensorSource> weights_;
  ModelOptions options_;
  BlockFactory block_factory_;
};

}  // namespace quantd::models

#endif  // QUANTD_WORKER_MODELS_CAUSAL_LM_H_
