#include "worker/algo/smoothquant.h"

#include <c10/util/Exception.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "worker/algo/activation_quant.h"
#include "worker/algo/channel_scaling.h"
#include "worker/common/cancellation.h"
#include "worker/common/name_pattern.h"

namespace quantd::algo {
namespace {

struct SmoothGroup {
  const models::LinearGroup* group = nullptr;
  std::vector<models::Linear*> linears;
};

// Groups with a previous op that can absorb scales and at least one
// quantized linear.
StatusOr<std::vector<SmoothGroup>> SmoothableGroups(const models::DecoderBlock& block,
                                                    const pipeline::LayerPlanner& planner,
                                                    bool linear_prev_ops) {
  std::vector<SmoothGroup> out;
  for (const models::LinearGroup& g : block.groups()) {
    if (!CanFoldScales(block, g)) continue;
    if (!linear_prev_ops && block.FindLinear(g.prev_op) != nullptr) continue;
    SmoothGroup sg;
    sg.group = &g;
    bool quantized = false;
    for (const std::string& name : g.linears) {
      models::Linear* l = block.FindLinear(name);
      if (l == nullptr) return InternalError("block has no linear " + name);
      sg.linears.push_back(l);
      quantized = quantized || planner(name, l->info().type).quantized();
    }
    if (quantized) out.push_back(std::move(sg));
  }
  return out;
}

std::vector<std::string> FirstLinears(const std::vector<SmoothGroup>& groups) {
  std::vector<std::string> names;
  for (const auto& g : groups) names.push_back(g.group->linears[0]);
  return names;
}

std::vector<at::Tensor> WeightsOf(const SmoothGroup& g) {
  std::vector<at::Tensor> w;
  for (models::Linear* l : g.linears) w.push_back(l->weight());
  return w;
}

// Every tensor of a block, to undo trial scalings.
class BlockSnapshot {
 public:
  explicit BlockSnapshot(models::DecoderBlock& block) {
    for (auto& [name, t] : block.NamedTensors()) saved_.emplace_back(t, *t);
  }
  void Restore() const {
    for (const auto& [ptr, t] : saved_) *ptr = t;
  }

 private:
  std::vector<std::pair<at::Tensor*, at::Tensor>> saved_;
};

// The block fake-quantized as planned: relative output error against the
// float block's output.
StatusOr<double> QuantizedBlockError(models::DecoderBlock& block, const at::Tensor& samples,
                                     const pipeline::LayerPlanner& planner,
                                     const at::Tensor& float_out) {
  QD_ASSIGN_OR_RETURN(SavedWeights saved, QuantizeBlockWeights(block, planner));
  auto calib = BlockInputQuantizers::Calibrate(block, samples, planner);
  if (!calib.ok()) {
    saved.Restore();
    return calib.status();
  }
  StatusOr<at::Tensor> out = InternalError("not run");
  {
    ScopedHooks hooks;
    Status s = calib->Install(block, hooks);
    if (!s.ok()) {
      saved.Restore();
      return s;
    }
    out = block.Forward(samples);
  }
  saved.Restore();
  if (!out.ok()) return out.status();
  return RelativeMse(*out, float_out);
}

}  // namespace

double SmoothQuantAlpha(const SmoothQuantOptions& o, const std::vector<std::string>& modules) {
  for (const auto& [glob, alpha] : o.alpha_overrides)
    for (const std::string& name : modules)
      if (GlobMatch(glob, name)) return alpha;
  return o.alpha;
}

StatusOr<at::Tensor> SmoothQuantScales(const at::Tensor& act_absmax,
                                       const std::vector<at::Tensor>& weights, double alpha,
                                       double scale_clamp_min) {
  if (weights.empty()) return InvalidArgumentError("SmoothQuant needs the group's weights");
  try {
    const int64_t n = act_absmax.numel();
    at::Tensor wmax;
    for (const at::Tensor& w : weights) {
      if (w.dim() != 2 || w.size(1) != n) {
        return InvalidArgumentError("SmoothQuant: weights must be [out, " + std::to_string(n) +
                                    "]");
      }
      at::Tensor m = w.to(at::kFloat).abs().amax(0);
      wmax = wmax.defined() ? at::max(wmax, m) : m;
    }
    wmax = wmax.clamp_min(1e-5);
    at::Tensor s = (act_absmax.reshape({n}).to(at::kFloat).pow(alpha) / wmax.pow(1.0 - alpha))
                       .clamp_min(scale_clamp_min);
    if (!at::isfinite(s).all().item<bool>()) {
      return InvalidArgumentError(
          "SmoothQuant scales are not finite (NaN or Inf in the calibration activations)");
    }
    return s;
  } catch (const c10::Error& e) {
    return InternalError(std::string("SmoothQuant: ") + e.what_without_backtrace());
  }
}

Status SmoothQuantAlgorithm::Apply(pipeline::BlockAlgorithmContext& ctx) {
  QD_ASSIGN_OR_RETURN(std::vector<SmoothGroup> groups,
                      SmoothableGroups(ctx.block, ctx.planner, options_.smooth_linear_prev_ops));
  if (groups.empty()) return OkStatus();
  if (ctx.observer.CancelRequested()) return CancelledError("cancelled");
  QD_ASSIGN_OR_RETURN(LinearCaptures caps,
                      CaptureLinears(ctx.block, ctx.inputs, FirstLinears(groups), {}));
  // All scales from the unscaled block, then all folds, as the reference.
  std::vector<at::Tensor> scales;
  for (const SmoothGroup& g : groups) {
    const double alpha = SmoothQuantAlpha(options_, g.group->linears);
    auto s = SmoothQuantScales(ChannelAbsMax(caps.inputs.at(g.group->linears[0])), WeightsOf(g),
                               alpha, options_.scale_clamp_min);
    if (!s.ok()) return Status(s.status()).Prepend("group of " + g.group->linears[0] + ": ");
    scales.push_back(*s);
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    QD_RETURN_IF_ERROR(FoldChannelScales(ctx.block, *groups[i].group, scales[i]));
  }
  return OkStatus();
}

Status AutoSmoothQuantAlgorithm::Apply(pipeline::BlockAlgorithmContext& ctx) {
  chosen_.clear();
  if (!(options_.alpha_step > 0) || options_.alpha_max < options_.alpha_min) {
    return InvalidArgumentError("AutoSmoothQuant needs alpha_step > 0 and alpha_min <= alpha_max");
  }
  QD_ASSIGN_OR_RETURN(std::vector<SmoothGroup> groups,
                      SmoothableGroups(ctx.block, ctx.planner, options_.smooth_linear_prev_ops));
  if (groups.empty()) return OkStatus();
  at::Tensor samples = ctx.inputs;
  if (options_.max_search_samples > 0 && samples.size(0) > options_.max_search_samples) {
    samples = samples.narrow(0, 0, options_.max_search_samples);
  }
  QD_ASSIGN_OR_RETURN(LinearCaptures caps,
                      CaptureLinears(ctx.block, samples, FirstLinears(groups), {}));
  std::vector<double> alphas;
  for (int k = 0;; ++k) {
    const double a = options_.alpha_min + k * options_.alpha_step;
    if (a > options_.alpha_max + 1e-9) break;
    alphas.push_back(a);
  }
  for (const SmoothGroup& g : groups) {
    if (ctx.observer.CancelRequested()) return CancelledError("cancelled");
    // Smoothing keeps the float function, so the group's float input (its
    // maximum) is as captured, whatever the earlier groups chose.
    const at::Tensor absmax = ChannelAbsMax(caps.inputs.at(g.group->linears[0]));
    BlockSnapshot before(ctx.block);
    double best = std::numeric_limits<double>::infinity();
    double best_alpha = -1;
    at::Tensor best_scales;
    for (double alpha : alphas) {
      before.Restore();
      // Each alpha runs the quantized block: a cancel stops between them.
      if (StopRequested()) {
        return CancelledStatus("searching AutoSmoothQuant alphas for " + g.group->linears[0]);
      }
      auto s = SmoothQuantScales(absmax, WeightsOf(g), alpha, options_.scale_clamp_min);
      if (!s.ok()) return Status(s.status()).Prepend("group of " + g.group->linears[0] + ": ");
      QD_RETURN_IF_ERROR(FoldChannelScales(ctx.block, *g.group, *s));
      auto err = QuantizedBlockError(ctx.block, samples, ctx.planner, caps.block_output);
      if (!err.ok()) {
        before.Restore();
        return Status(err.status()).Prepend("AutoSmoothQuant search: ");
      }
      if (*err < best) {
        best = *err;
        best_alpha = alpha;
        best_scales = *s;
      }
    }
    before.Restore();
    if (!best_scales.defined()) {
      return InternalError("AutoSmoothQuant found no finite block error for the group of " +
                           g.group->linears[0]);
    }
    QD_RETURN_IF_ERROR(FoldChannelScales(ctx.block, *g.group, best_scales));
    chosen_.emplace_back(g.group->linears[0], best_alpha);
    char buf[192];
    std::snprintf(buf, sizeof(buf), "AutoSmoothQuant %s: alpha %.2f (block output rel. MSE %.3g)",
                  g.group->linears[0].c_str(), best_alpha, best);
    ctx.observer.OnLog(pipeline::LogLevel::kInfo, buf);
  }
  return OkStatus();
}

}  // namespace quantd::algo
