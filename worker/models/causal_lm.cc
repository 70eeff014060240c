#include "worker/models/causal_lm.h"

#include <cmath>

namespace quantd::models {
namespace {

template <typename F>
auto Guard(const std::string& where, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::Error& e) {
    return InternalError(where + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return InternalError(where + ": " + e.what());
  }
}

}  // namespace

at::Tensor Embedding::Forward(const at::Tensor& ids) const {
  if (lookup_) return lookup_->Forward(*this, ids.to(at::kLong));
  return at::embedding(weight_, ids.to(at::kLong).to(weight_.device()));
}

std::vector<std::pair<std::string, at::Tensor*>> EmbeddingStage::NamedTensors() {
  std::vector<std::pair<std::string, at::Tensor*>> out;
  out.emplace_back(token_->name() + ".weight", &token_->weight());
  if (position_) out.emplace_back(position_->name() + ".weight", &position_->weight());
  if (project_in_) out.emplace_back(project_in_->name() + ".weight", &project_in_->weight());
  return out;
}

StatusOr<at::Tensor> EmbeddingStage::Forward(const at::Tensor& ids) const {
  if (!ids.defined() || ids.dim() != 2 || ids.numel() == 0 ||
      !at::isIntegralType(ids.scalar_type(), /*includeBool=*/false)) {
    return InvalidArgumentError("token ids must be a non-empty integer [batch, seq_len] tensor");
  }
  return Guard("embedding", [&]() -> StatusOr<at::Tensor> {
    const int64_t vocab = token_->info().num_embeddings;
    const int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
    if (lo < 0 || hi >= vocab) {
      return InvalidArgumentError("token id " + std::to_string(lo < 0 ? lo : hi) +
                                  " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
    const int64_t t = ids.size(1);
    at::Tensor h = token_->Forward(ids);
    // Gemma multiplies by sqrt(hidden_size) rounded to the hidden dtype.
    if (embed_scale_ > 0) h = h * at::scalar_tensor(embed_scale_, h.options());
    if (project_in_) h = project_in_->Forward(h);
    if (position_) {
      if (t + position_offset_ > position_->info().num_embeddings) {
        return InvalidArgumentError(
            "sequence length " + std::to_string(t) + " exceeds the model's " +
            std::to_string(position_->info().num_embeddings - position_offset_) +
            " learned positions");
      }
      at::Tensor pos =
          at::arange(position_offset_, position_offset_ + t, at::TensorOptions().dtype(at::kLong));
      h = h + position_->Forward(pos).unsqueeze(0);
    }
    return h;
  });
}

std::vector<std::pair<std::string, at::Tensor*>> HeadStage::NamedTensors() {
  std::vector<std::pair<std::string, at::Tensor*>> out;
  if (final_norm_) {
    out.emplace_back(final_norm_->name() + ".weight", &final_norm_->weight());
    if (final_norm_->bias().defined()) {
      out.emplace_back(final_norm_->name() + ".bias", &final_norm_->bias());
    }
  }
  if (project_out_) out.emplace_back(project_out_->name() + ".weight", &project_out_->weight());
  out.emplace_back(lm_head_->name() + ".weight", &lm_head_->weight());
  return out;
}

StatusOr<at::Tensor> HeadStage::Forward(const at::Tensor& hidden) const {
  if (!hidden.defined() || hidden.dim() < 1 || hidden.size(-1) != hidden_size_) {
    return InvalidArgumentError("hidden states must end in dimension " +
                                std::to_string(hidden_size_));
  }
  return Guard("head", [&]() -> StatusOr<at::Tensor> {
    at::Tensor x = hidden.to(lm_head_->weight().defined() ? lm_head_->weight().scalar_type()
                                                          : hidden.scalar_type());
    if (final_norm_) x = final_norm_->Forward(x);
    if (project_out_) x = project_out_->Forward(x);
    at::Tensor logits = lm_head_->Forward(x).to(at::kFloat);
    if (softcap_ > 0) logits = at::tanh(logits / softcap_) * softcap_;
    return logits;
  });
}

CausalLM::CausalLM(ModelConfig config, std::shared_ptr<const io::TensorSource> weights,
                   ModelOptions options, BlockFactory block_factory)
    : config_(std::move(config)),
      layout_(GetModelLayout(config_)),
      weights_(std::move(weights)),
      options_(options),
      block_factory_(std::move(block_factory)) {}

StatusOr<std::unique_ptr<EmbeddingStage>> CausalLM::LoadEmbedding(
    const io::TensorSource& source) const {
  WeightLoader loader(source, layout_, options_);
  std::unique_ptr<EmbeddingStage> e(new EmbeddingStage());
  e->options_ = options_;
  e->position_offset_ = layout_.position_offset;
  if (config_.scale_embeddings)
    e->embed_scale_ = std::sqrt(static_cast<double>(config_.hidden_size));
  const EmbeddingInfo& tok = layout_.token_embedding;
  QD_ASSIGN_OR_RETURN(at::Tensor w,
                      loader.Load(tok.name + ".weight", {tok.num_embeddings, tok.embedding_dim}));
  e->token_ = std::make_unique<Embedding>(tok, std::move(w));
  const EmbeddingInfo& pos = layout_.position_embedding;
  if (!pos.name.empty()) {
    QD_ASSIGN_OR_RETURN(at::Tensor p,
                        loader.Load(pos.name + ".weight", {pos.num_embeddings, pos.embedding_dim}));
    e->position_ = std::make_unique<Embedding>(pos, std::move(p));
  }
  if (!layout_.project_in.name.empty()) {
    QD_ASSIGN_OR_RETURN(auto wb, loader.LoadLinear(layout_.project_in));
    e->project_in_ = std::make_unique<Linear>(layout_.project_in, wb.first, wb.second);
  }
  return e;
}

StatusOr<std::unique_ptr<DecoderBlock>> CausalLM::LoadBlock(int64_t index,
                                                            const io::TensorSource& source) const {
  if (index < 0 || index >= num_blocks()) {
    return OutOfRangeError("block " + std::to_string(index) + " does not exist; the model has " +
                           std::to_string(num_blocks()));
  }
  WeightLoader loader(source, layout_, options_);
  return block_factory_(config_, index, loader);
}

StatusOr<std::unique_ptr<HeadStage>> CausalLM::LoadHead(const io::TensorSource& source) const {
  WeightLoader loader(source, layout_, options_);
  std::unique_ptr<HeadStage> h(new HeadStage());
  h->hidden_size_ = config_.hidden_size;
  h->softcap_ = config_.final_logit_softcapping;
  if (!layout_.final_norm.name.empty()) {
    QD_ASSIGN_OR_RETURN(auto wb, loader.LoadNorm(layout_.final_norm));
    h->final_norm_ =
        std::make_unique<Norm>(layout_.final_norm, wb.first, wb.second, config_.norm_eps);
  }
  if (!layout_.project_out.name.empty()) {
    QD_ASSIGN_OR_RETURN(auto wb, loader.LoadLinear(layout_.project_out));
    h->project_out_ = std::make_unique<Linear>(layout_.project_out, wb.first, wb.second);
  }
  const LinearLayerInfo& head = layout_.lm_head;
  at::Tensor w;
  if (loader.Has(head.name + ".weight") || !config_.tie_word_embeddings) {
    QD_ASSIGN_OR_RETURN(w,
                        loader.Load(head.name + ".weight", {head.out_features, head.in_features}));
  } else {
    const EmbeddingInfo& tok = layout_.token_embedding;
    QD_ASSIGN_OR_RETURN(w,
                        loader.Load(tok.name + ".weight", {tok.num_embeddings, tok.embedding_dim}));
    h->tied_ = true;
  }
  h->lm_head_ = std::make_unique<Linear>(head, std::move(w), at::Tensor());
  return h;
}

StatusOr<at::Tensor> CausalLM::Embed(const at::Tensor& ids) const {
  QD_ASSIGN_OR_RETURN(auto stage, LoadEmbedding());
  return stage->Forward(ids);
}

StatusOr<at::Tensor> CausalLM::Head(const at::Tensor& hidden) const {
  QD_ASSIGN_OR_RETURN(auto stage, LoadHead());
  return stage->Forward(hidden);
}

StatusOr<at::Tensor> CausalLM::Forward(const at::Tensor& ids) const {
  QD_ASSIGN_OR_RETURN(at::Tensor h, Embed(ids));
  for (int64_t i = 0; i < num_blocks(); ++i) {
    QD_ASSIGN_OR_RETURN(auto block, LoadBlock(i));
    QD_ASSIGN_OR_RETURN(h, block->Forward(h));
  }
  return Head(h);
}

}  // namespace quantd::models
