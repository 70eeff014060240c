// Rotation (QuaRot): an orthogonal change of basis of a Llama-style model's
// hidden states that keeps the float function and spreads outlier channels
// over all channels, so weights and activations quantize better.
//
// As a pipeline::ModelTransform it changes every piece as it is loaded:
//  - every RMSNorm weight γ is fused into the linears it feeds (q/k/v take
//    input_layernorm's, gate/up post_attention_layernorm's, lm_head the final
//    norm's) and set to ones, so RMSNorm commutes with the rotation;
//  - R1, a random Hadamard matrix of hidden_size (seeded), rotates the
//    residual stream: embedding E <- E R1; q/k/v/gate/up W <- W R1 (their
//    input is rotated); o_proj/down_proj W <- R1^T W, b <- b R1 (their
//    output is); lm_head W <- W diag(γ_final) R1;
//  - R2, a random Hadamard matrix of head_dim, rotates each head's values:
//    v_proj's rows of every KV head W_h <- R2^T W_h (and its bias), o_proj's
//    columns of every attention head W_h <- W_h R2;
//  - optionally R4, a plain Hadamard matrix of intermediate_size, on
//    down_proj's input: W <- W H, and an online x <- x H before down_proj.
// R1 and R2 are exact (Sylvester or Paley Hadamard, or a seeded orthogonal
// factor for orders without a construction, see hadamard.h), so float
// logits stay the same up to rounding (max abs diff < 1e-4 on stories260K).
//
// The online R4 hook is installed by TransformBlock itself (the pipeline runs
// the block, and GPTQ captures down_proj's input, before it calls
// InstallOnline), and InstallOnline replaces that hook on the same block, or
// installs it on a block loaded already transformed (evaluation, export).
//
// Tied embeddings become untied: the head's lm_head.weight is E diag(γ) R1,
// the embedding E R1. An export of a rotated model must write
// lm_head.weight and set tie_word_embeddings to false.
//
// Only Llama-style blocks (RMSNorm, q/k/v/o and gate/up/down, no learned
// positions or OPT projections) are supported; others are UNIMPLEMENTED.
#ifndef QUANTD_WORKER_ALGO_ROTATION_H_
#define QUANTD_WORKER_ALGO_ROTATION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "worker/algo/hadamard.h"
#include "worker/common/status.h"
#include "worker/config/algorithm_options.h"
#include "worker/pipeline/block_algorithm.h"

namespace quantd::algo {

using config::RotationOptions;

class RotationTransform final : public pipeline::ModelTransform {
 public:
  explicit RotationTransform(RotationOptions options = {}) : options_(options) {}
  const char* name() const override { return "rotation"; }

  Status TransformEmbedding(models::EmbeddingStage& embedding) override;
  Status TransformBlock(models::DecoderBlock& block) override;
  Status TransformHead(models::HeadStage& head) override;
  Status InstallOnline(models::DecoderBlock& block) override;

  const RotationOptions& options() const { return options_; }

 private:
  enum class Kind { kR1, kR2, kR4 };
  // The rotation of `kind` and size n, built once.
  StatusOr<const Rotation*> Get(Kind kind, int64_t n);

  RotationOptions options_;
  std::mutex mu_;
  std::map<std::pair<int, int64_t>, std::unique_ptr<Rotation>> rotations_;
  // down_proj of the block TransformBlock last hooked, with the switch of
  // that hook: InstallOnline on the same layer turns it off before adding
  // its own, so exactly one R4 runs whatever the order of calls.
  const models::Linear* pending_linear_ = nullptr;
  std::shared_ptr<bool> pending_armed_;
};

}  // namespace quantd::algo

#endif  // QUANTD_WORKER_ALGO_ROTATION_H_
