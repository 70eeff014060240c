// GPTQ on a decoder block: the running Hessian of a linear group's inputs,
// collected in a pass that stops once the group's input has gone by, and
// the true-sequential order (q,k,v -> o -> gate,up -> down) in which
// GptqAlgorithm quantizes the block's linears with GptqQuantizeWeight
// (gptq.cc), or with a llama.cpp recipe's block types (gptq_ggml.cc).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "worker/algo/block_hooks.h"
#include "worker/algo/gptq.h"
#include "worker/algo/gptq_ggml.h"
#include "worker/io/gguf/ggml_block_grid.h"
#include "worker/models/matmul_dtype.h"
#include "worker/pipeline/stage_times.h"

namespace quantd::algo {

HessianAccumulator::HessianAccumulator(int64_t columns)
    : h_(at::zeros({columns, columns}, at::kFloat)) {}

Status HessianAccumulator::Add(const at::Tensor& x) {
  const int64_t c = h_.size(0);
  if (!x.defined() || x.dim() < 1 || x.size(-1) != c) {
    return InvalidArgumentError("Hessian input must end in dimension " + std::to_string(c));
  }
  try {
    const int64_t b = x.dim() >= 3 ? x.size(0) : 1;
    if (b == 0 || x.numel() == 0) return OkStatus();
    // The Hessian lives where the activations do (the GPU on a GPU job).
    if (n_ == 0 && h_.device() != x.device()) h_ = h_.to(x.device());
    if (const std::optional<at::ScalarType> product = models::MatmulDtype();
        product && *product != at::kFloat) {
      return AddAsConsumed(x.reshape({-1, c}), b, *product);
    }
    at::Tensor rows = x.reshape({-1, c}).to(h_.device(), at::kFloat);
    // The reference's running mean: rescale what is there, then add the new
    // batch scaled by sqrt(2/n) on both sides.
    h_.mul_(static_cast<double>(n_) / static_cast<double>(n_ + b));
    n_ += b;
    rows_ += rows.size(0);
    rows = rows * static_cast<float>(std::sqrt(2.0 / static_cast<double>(n_)));
    h_.addmm_(rows.t(), rows);
    return OkStatus();
  } catch (const c10::Error& e) {
    return InternalError(std::string("Hessian accumulation: ") + e.what_without_backtrace());
  }
}

namespace {

// Lets cuBLAS run float32 products on TF32 tensor cores while it lives, and
// puts the process's setting back after. The setting is the process's, not
// the thread's: a worker runs one job at a time, and nothing else in it
// multiplies while GPTQ accumulates.
class AllowTf32 {
 public:
  explicit AllowTf32(bool allow) : previous_(at::globalContext().allowTF32CuBLAS()) {
    if (allow) at::globalContext().setAllowTF32CuBLAS(true);
  }
  ~AllowTf32() { at::globalContext().setAllowTF32CuBLAS(previous_); }
  AllowTf32(const AllowTf32&) = delete;
  AllowTf32& operator=(const AllowTf32&) = delete;

 private:
  bool previous_;
};

}  // namespace

// The product consumed x in `product` (bfloat16 calibration): the Hessian is
// of those values, as a bf16 model's is in the reference toolkit, summed in
// float32. Each entry of x^T x is then a product of two 8-bit significands,
// exact in float32 and in TF32's 11 bits, so on a GPU the accumulation runs
// on TF32 tensor cores with nothing rounded but the float32 sums (the
// H100's float32 accumulation took 10.4 s of a 111 s 8B block,
// docs/performance.md). The scale 2/n goes into addmm's alpha, after the
// products, for the same reason.
Status HessianAccumulator::AddAsConsumed(const at::Tensor& rows2d, int64_t b,
                                         at::ScalarType product) {
  const at::Tensor rows = rows2d.to(h_.device(), product).to(at::kFloat);
  const double keep = static_cast<double>(n_) / static_cast<double>(n_ + b);
  n_ += b;
  rows_ += rows.size(0);
  AllowTf32 tf32(rows.is_cuda() && c10::elementSize(product) == 2);
  h_.addmm_(rows.t(), rows, keep, 2.0 / static_cast<double>(n_));
  return OkStatus();
}

namespace {

// A run's stage times, and a layer whose Hessian needed more damping or
// that no damping made factor.
void Report(pipeline::BlockAlgorithmContext& ctx, const std::string& layer, const GptqStats& r) {
  if (ctx.stages != nullptr) {
    ctx.stages->Add("gptq factor", r.factor_seconds);
    ctx.stages->Add("gptq columns", r.loop_seconds);
    ctx.stages->Mark("gptq other");
  }
  if (r.rtn_fallback) {
    ctx.observer.OnLog(pipeline::LogLevel::kWarning, "GPTQ fell back to round-to-nearest for " +
                                                         layer + ": " + r.fallback_reason);
  } else if (r.damp_retries > 0) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.3f", r.damp_percent);
    ctx.observer.OnLog(pipeline::LogLevel::kInfo,
                       "GPTQ on " + layer + " needed damping " + buf +
                           " of mean(diag H) for a positive-definite Hessian");
  }
}

}  // namespace

Status GptqAlgorithm::Apply(pipeline::BlockAlgorithmContext& ctx) {
  models::DecoderBlock& block = ctx.block;
  for (const models::LinearGroup& group : block.groups()) {
    // The linears of a group read the same input, so one Hessian serves all.
    std::vector<std::pair<models::Linear*, quant::QuantSpec>> targets;
    // A recipe job's linears and the ggml block type each gets.
    std::vector<std::pair<models::Linear*, gguf::GgmlType>> ggml_targets;
    for (const std::string& name : group.linears) {
      models::Linear* linear = block.FindLinear(name);
      if (linear == nullptr) return InternalError("block has no linear " + name);
      if (ctx.ggml_type) {
        // Float types (a recipe's F16 fallback) have no grid: the recipe
        // writes those weights as they are.
        const std::optional<gguf::GgmlType> type = ctx.ggml_type(name);
        if (!type || !gguf::GgmlGridCodes(*type)) continue;
        Status ok = CheckGgmlGptq(*type, linear->in_features(), options_);
        if (!ok.ok()) return ok.Prepend("layer " + name + ": ");
        ggml_targets.emplace_back(linear, *type);
        continue;
      }
      pipeline::LayerPlan plan = ctx.planner(name, linear->info().type);
      if (!plan.weight) continue;
      Status ok = CheckGptqWeightSpec(*plan.weight, linear->out_features(), linear->in_features());
      if (!ok.ok()) return ok.Prepend("layer " + name + ": ");
      targets.emplace_back(linear, *plan.weight);
    }
    if (targets.empty() && ggml_targets.empty()) continue;
    if (ctx.observer.CancelRequested()) return CancelledError("cancelled");

    // One Hessian per input: the group's, or in a mixture-of-experts group
    // each module's (an expert's gate and up share one; each sees only its
    // routed tokens). A dense group's pass stops once its input has been
    // seen: the q/k/v group needs only the input norm, down_proj most of
    // the block; an expert group's runs the whole block.
    std::map<std::string, HessianAccumulator> accs;
    auto input_of = [&group](const models::Linear* l) {
      return group.routed ? l->name().substr(0, l->name().rfind('.')) : std::string();
    };
    {
      ScopedHooks hooks;
      std::vector<models::Linear*> all;
      for (auto& t : ggml_targets) all.push_back(t.first);
      for (auto& t : targets) all.push_back(t.first);
      for (models::Linear* l : all) {
        auto [it, added] = accs.try_emplace(input_of(l), l->in_features());
        if (!added) continue;
        HessianAccumulator* acc = &it->second;
        const bool stop = !group.routed;
        hooks.ObserveInput(*l, [acc, stop, &ctx](const at::Tensor& x) {
          if (ctx.stages != nullptr) ctx.stages->Mark("gptq forward");
          Status s = acc->Add(x);
          if (ctx.stages != nullptr) ctx.stages->Mark("gptq hessian");
          if (!s.ok()) throw std::runtime_error(s.message());
          if (stop) throw models::DecoderBlock::StopPass();
        });
      }
      QD_RETURN_IF_ERROR(block.RunHooks(ctx.inputs));
      if (ctx.stages != nullptr) ctx.stages->Mark("gptq forward");
    }
    // An expert that too few calibration tokens reached keeps its weights
    // for the round-to-nearest that follows (BlockStep::RoundWeights).
    std::set<std::string> warned;
    auto starved = [&](const models::Linear* l) {
      const std::string input = input_of(l);
      const int64_t rows = accs.at(input).num_rows();
      if (!group.routed || !pipeline::BelowExpertFloor(rows, ctx.min_expert_tokens)) return false;
      if (warned.insert(input).second) {
        ctx.observer.OnLog(pipeline::LogLevel::kWarning,
                           "GPTQ left " + input + " to round-to-nearest: " + std::to_string(rows) +
                               " calibration tokens reached it (min_expert_tokens " +
                               std::to_string(ctx.min_expert_tokens) + ")");
      }
      return true;
    };

    for (auto& [linear, type] : ggml_targets) {
      if (ctx.observer.CancelRequested()) return CancelledError("cancelled");
      if (starved(linear)) continue;
      const HessianAccumulator& acc = accs.at(input_of(linear));
      at::Tensor float_weight = linear->weight().clone();
      auto result = GptqQuantizeGgml(float_weight, acc.hessian(), type, options_);
      if (!result.ok()) return Status(result.status()).Prepend("layer " + linear->name() + ": ");
      Report(ctx, linear->name(), *result);
      linear->weight() = result->weight.to(float_weight.options());
      ctx.ggml_blocks[linear->name()] = result->blocks;
      ctx.float_weights[linear->name()] = float_weight;
    }
    for (auto& [linear, spec] : targets) {
      if (ctx.observer.CancelRequested()) return CancelledError("cancelled");
      if (starved(linear)) continue;
      const HessianAccumulator& acc = accs.at(input_of(linear));
      at::Tensor float_weight = linear->weight().clone();
      auto result = GptqQuantizeWeight(float_weight, acc.hessian(), spec, options_);
      if (!result.ok()) return Status(result.status()).Prepend("layer " + linear->name() + ": ");
      Report(ctx, linear->name(), *result);
      linear->weight() = result->weight;
      ctx.quantized_weights[linear->name()] = result->qparams;
      ctx.float_weights[linear->name()] = float_weight;
      if (result->group_index.defined())
        ctx.weight_group_index[linear->name()] = result->group_index;
    }
  }
  return OkStatus();
}

}  // namespace quantd::algo
