#include "worker/models/decoder_block.h"

#include <algorithm>
#include <cmath>

#include "worker/common/cancellation.h"

namespace quantd::models {

std::vector<Linear*> DecoderBlock::linears() const {
  std::vector<Linear*> out;
  for (const auto& l : linears_) out.push_back(l.get());
  return out;
}

Linear* DecoderBlock::FindLinear(const std::string& name) const {
  for (const auto& l : linears_) {
    if (l->name() == name) return l.get();
  }
  return nullptr;
}

std::vector<Norm*> DecoderBlock::norms() const {
  std::vector<Norm*> out;
  for (const auto& n : norms_) out.push_back(n.get());
  return out;
}

Norm* DecoderBlock::FindNorm(const std::string& name) const {
  for (const auto& n : norms_) {
    if (n->name() == name) return n.get();
  }
  return nullptr;
}

std::vector<std::pair<std::string, at::Tensor*>> DecoderBlock::NamedTensors() {
  std::vector<std::pair<std::string, at::Tensor*>> out;
  for (auto& l : linears_) {
    out.emplace_back(l->name() + ".weight", &l->weight());
    if (l->bias().defined()) out.emplace_back(l->name() + ".bias", &l->bias());
  }
  for (auto& n : norms_) {
    out.emplace_back(n->name() + ".weight", &n->weight());
    if (n->bias().defined()) out.emplace_back(n->name() + ".bias", &n->bias());
  }
  return out;
}

Status DecoderBlock::LoadWeights(const WeightLoader& loader) {
  for (const auto& info : layout_.linears) {
    QD_ASSIGN_OR_RETURN(auto wb, loader.LoadLinear(info));
    linears_.push_back(std::make_unique<Linear>(info, std::move(wb.first), std::move(wb.second)));
  }
  for (const auto& info : layout_.norms) {
    QD_ASSIGN_OR_RETURN(auto wb, loader.LoadNorm(info));
    norms_.push_back(
        std::make_unique<Norm>(info, std::move(wb.first), std::move(wb.second), config_.norm_eps));
  }
  return OkStatus();
}

StatusOr<at::Tensor> DecoderBlock::Forward(const at::Tensor& hidden) {
  return Run(hidden, Output::kNew);
}

StatusOr<at::Tensor> DecoderBlock::ForwardInPlace(const at::Tensor& hidden) {
  return Run(hidden, Output::kOverInput);
}

Status DecoderBlock::RunHooks(const at::Tensor& hidden) {
  return Run(hidden, Output::kNone).status();
}

StatusOr<at::Tensor> DecoderBlock::Run(const at::Tensor& hidden, Output output) {
  const std::string where = "block " + std::to_string(index_) + ": ";
  if (!hidden.defined() || hidden.dim() != 3 || hidden.size(2) != config_.hidden_size ||
      hidden.size(0) == 0 || hidden.size(1) == 0) {
    return InvalidArgumentError(
        where + "hidden states must be [batch, seq_len, " + std::to_string(config_.hidden_size) +
        "], got " + (hidden.defined() ? c10::str(hidden.sizes()) : std::string("undefined")));
  }
  try {
    const bool keep_output = output != Output::kNone;
    const int64_t b = hidden.size(0), t = hidden.size(1);
    const int64_t per_chunk = options_.SamplesPerChunk(t);
    // Activations kept in host memory while the block runs on a GPU
    // (pipeline/activation_placement.h): one sub-batch at a time goes to the
    // device, and its output comes back to the host.
    const bool streamed = hidden.device().is_cpu() && !options_.device.is_cpu();
    at::Tensor x = hidden;
    if (!streamed && (x.scalar_type() != options_.dtype || x.device() != options_.device)) {
      x = x.to(options_.device, options_.dtype);
    }
    if (keep_output && !streamed && per_chunk >= b) return ForwardChunk(x);
    // The output is written sub-batch by sub-batch into one tensor (no
    // list of parts and concatenation, which held it twice).
    at::Tensor out;
    if (output == Output::kOverInput && hidden.scalar_type() == options_.dtype &&
        (streamed || hidden.device() == options_.device)) {
      // A sub-batch's input is read in full before its output is copied
      // over it (the copy follows its kernels on the same stream).
      out = hidden;
    } else if (keep_output && streamed) {
      out = at::empty(hidden.sizes(),
                      hidden.options().dtype(options_.dtype).pinned_memory(hidden.is_pinned()));
    }
    for (int64_t i = 0; i < b; i += per_chunk) {
      // A block over a large calibration set runs for minutes: a job's
      // cancel or lost lease stops it between sub-batches.
      if (StopRequested()) {
        return CancelledStatus("running " + where.substr(0, where.size() - 2) + " (sub-batch " +
                               std::to_string(i / per_chunk + 1) + " of " +
                               std::to_string((b + per_chunk - 1) / per_chunk) + ")");
      }
      const int64_t n = std::min(per_chunk, b - i);
      at::Tensor part = x.narrow(0, i, n);
      if (streamed) part = part.to(options_.device, options_.dtype, /*non_blocking=*/true);
      at::Tensor y;
      try {
        y = ForwardChunk(part);
      } catch (const StopPass&) {
        if (keep_output) return InternalError(where + "a hook stopped a forward pass");
        continue;
      }
      if (!keep_output) continue;
      if (!out.defined()) out = at::empty({b, t, y.size(2)}, y.options());
      out.narrow(0, i, n).copy_(y);
    }
    return out;
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    // LibTorch reports allocation failure (memory or address-space limit)
    // as a generic c10::Error.
    if (what.find("can't allocate memory") != std::string::npos) {
      return ResourceExhaustedError(where + what);
    }
    return InternalError(where + what);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError(where + "out of memory");
  } catch (const std::exception& e) {
    return InternalError(where + e.what());
  }
}

at::Tensor DecoderBlock::LlamaAttentionResidual(const at::Tensor& x) {
  const ModelConfig& c = config();
  AttentionOptions ao;
  ao.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  ao.sliding_window = SlidingWindowAt(c, index());
  ao.max_score_elements = options().max_attention_elements;
  at::Tensor normed = norm(0).Forward(x);
  at::Tensor attn = SeparateQkvAttention(normed, {0, 1, 2, 2, 3}, c, x.scalar_type(), ao);
  return x + linear(3).Forward(attn);
}

at::Tensor DecoderBlock::SeparateQkvAttention(const at::Tensor& normed,
                                              const AttentionLayout& layout,
                                              const ModelConfig& rope_config, at::ScalarType dtype,
                                              const AttentionOptions& options) {
  const ModelConfig& c = config();
  const int64_t b = normed.size(0), t = normed.size(1), hd = c.head_dim;
  const int64_t h = c.num_attention_heads, kvh = c.num_key_value_heads;
  at::Tensor q = linear(layout.q).Forward(normed);
  at::Tensor k = linear(layout.k).Forward(normed);
  // OLMoE (modeling_olmoe.py): the norms span all heads, then clip_qkv.
  if (c.qk_norm && c.qk_norm_full_width) {
    q = norm(layout.q_norm).Forward(q);
    k = norm(layout.k_norm).Forward(k);
  }
  if (c.clip_qkv > 0) {
    q = q.clamp(-c.clip_qkv, c.clip_qkv);
    k = k.clamp(-c.clip_qkv, c.clip_qkv);
  }
  q = q.view({b, t, h, hd});
  k = k.view({b, t, kvh, hd});
  if (c.qk_norm && !c.qk_norm_full_width) {
    q = norm(layout.q_norm).Forward(q);
    k = norm(layout.k_norm).Forward(k);
  }
  q = q.transpose(1, 2);
  k = k.transpose(1, 2);
  at::Tensor v = linear(layout.v).Forward(normed);
  if (c.clip_qkv > 0) v = v.clamp(-c.clip_qkv, c.clip_qkv);
  v = v.view({b, t, kvh, hd}).transpose(1, 2);
  const RotaryTables rope = MakeRotaryTables(rope_config, t, dtype, normed.device());
  q = ApplyRotary(q, rope);
  k = ApplyRotary(k, rope);
  return CausalSelfAttention(q, k, v, options).transpose(1, 2).reshape({b, t, h * hd});
}

}  // namespace quantd::models
