#include "worker/algo/awq.h"

#include <c10/util/Exception.h>

#include <cmath>
#include <limits>
#include <memory>

#include "worker/algo/awq_layout.h"
#include "worker/algo/block_hooks.h"
#include "worker/algo/channel_scaling.h"
#include "worker/common/cancellation.h"
#include "worker/common/squared_error.h"
#include "worker/quant/fake_quant.h"

namespace quantd::algo {
namespace {

bool UsesAwqRule(const quant::QuantSpec& spec) {
  return quant::IsIntType(spec.dtype) && !spec.symmetric && !spec.is_dynamic &&
         spec.zero_point_type == quant::ZeroPointType::kInt32;
}

// Min and max per parameter slot of a 2-D weight, in the QParams shape.
StatusOr<std::pair<at::Tensor, at::Tensor>> SlotMinMax(const at::Tensor& w,
                                                       const quant::QuantSpec& spec) {
  if (w.dim() != 2) return InvalidArgumentError("AWQ quantizes 2-D weights");
  QD_RETURN_IF_ERROR(quant::KernelShapeFor(w.sizes().vec(), spec).status());
  switch (spec.qscheme) {
    case quant::QScheme::kPerTensor:
      return std::make_pair(w.min(), w.max());
    case quant::QScheme::kPerChannel: {
      const int axis = quant::EffectiveChAxis(spec) < 0 ? quant::EffectiveChAxis(spec) + 2
                                                        : quant::EffectiveChAxis(spec);
      const int other = 1 - axis;
      return std::make_pair(w.amin(other), w.amax(other));
    }
    case quant::QScheme::kPerGroup: {
      const int axis = quant::EffectiveChAxis(spec);
      if (axis != -1 && axis != 1) {
        return InvalidArgumentError("AWQ quantizes weight groups along the input axis");
      }
      int64_t g = quant::EffectiveGroupSize(spec);
      if (g <= 0) g = w.size(1);
      at::Tensor v = w.reshape({w.size(0), w.size(1) / g, g});
      return std::make_pair(v.amin(-1), v.amax(-1));
    }
  }
  return InternalError("unknown qscheme");
}

// Computes AWQ's loss for scales `s` on one linear: ||x (Q(W s)/s - W)^T||^2.
StatusOr<double> ScaledQuantError(const at::Tensor& x, const at::Tensor& w,
                                  const quant::QuantSpec& spec, const at::Tensor& s) {
  QD_ASSIGN_OR_RETURN(at::Tensor q, AwqFakeQuantize(w * s.unsqueeze(0), spec));
  at::Tensor d = at::matmul(x, (q / s.unsqueeze(0) - w).t());
  return SumOfSquares(d);
}

at::Tensor GridScales(const at::Tensor& xbar, double alpha) {
  at::Tensor s = xbar.pow(alpha).clamp_min(1e-4);
  return s / (s.max() * s.min()).sqrt();
}

// Replaces a linear's y = x W^T + b by zeros of the right shape: the layers
// after the inspected one need not run during a search.
class ZeroKernel final : public models::LinearKernel {
 public:
  at::Tensor Forward(const models::Linear& layer, const at::Tensor& x) const override {
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes.back() = layer.out_features();
    return at::zeros(sizes, x.options());
  }
};

bool SkipsClip(const std::string& module) {
  // The reference does not clip the query and key projections: their error
  // is amplified by the q.k product in a way the output MSE does not see.
  const std::string last = module.substr(module.rfind('.') + 1);
  for (const char* s : {"q_", "k_", "query", "key", "Wqkv"})
    if (last.find(s) != std::string::npos) return true;
  return false;
}

struct GroupWork {
  const models::LinearGroup* group = nullptr;
  std::vector<models::Linear*> targets;
  std::vector<quant::QuantSpec> specs;
  bool scale = false;
  // Empty: the group's own outputs are inspected.
  std::string inspect;
  at::Tensor scales;
  double alpha = -1;
};

}  // namespace

StatusOr<at::Tensor> AwqFakeQuantize(const at::Tensor& weight, const quant::QuantSpec& spec,
                                     quant::QParams* used) {
  try {
    at::Tensor w = weight.to(at::kFloat);
    quant::QParams qp;
    if (!UsesAwqRule(spec)) {
      QD_ASSIGN_OR_RETURN(qp, quant::ComputeQParams(w, spec));
    } else {
      QD_ASSIGN_OR_RETURN(auto mm, SlotMinMax(w, spec));
      const quant::IntRange r = quant::IntRangeOf(spec.dtype);
      const double range = r.qmax - r.qmin;
      // Rounded on the host (a scalar rule per element), then back to w's device.
      at::Tensor scale = ((mm.second - mm.first).clamp_min(1e-5) / range).cpu().contiguous();
      const quant::ScaleRounding rounding = quant::ScaleRoundingFor(spec, at::kFloat);
      if (rounding != quant::ScaleRounding::kNone) {
        float* p = scale.data_ptr<float>();
        for (int64_t i = 0; i < scale.numel(); ++i) p[i] = quant::RoundScale(p[i], rounding);
      }
      scale = scale.to(mm.first.device());
      at::Tensor zero = (-(mm.first / scale).round()).clamp(0, range) + r.qmin;
      qp.scale = scale;
      qp.zero_point = zero.to(at::kInt).contiguous();
    }
    QD_ASSIGN_OR_RETURN(at::Tensor q, quant::FakeQuantize(w, spec, qp));
    if (used != nullptr) *used = qp;
    return q.to(weight.scalar_type());
  } catch (const c10::Error& e) {
    return InternalError(std::string("AWQ quantizer: ") + e.what_without_backtrace());
  }
}

StatusOr<at::Tensor> AwqSearchScales(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                     const std::vector<quant::QuantSpec>& specs,
                                     const AwqOptions& options, double* best_alpha) {
  if (weights.empty() || weights.size() != specs.size()) {
    return InvalidArgumentError("AWQ scale search needs one spec per weight");
  }
  try {
    at::Tensor xf = x.reshape({-1, x.size(-1)}).to(at::kFloat);
    const at::Tensor xbar = ChannelAbsMean(xf);
    int64_t numel = 0;
    for (const auto& w : weights) numel += xf.size(0) * w.size(0);
    double best = std::numeric_limits<double>::infinity();
    at::Tensor best_scales;
    for (int k = 0; k < options.grid; ++k) {
      if (StopRequested()) return CancelledStatus("searching AWQ scales");
      const double alpha = static_cast<double>(k) / options.grid;
      at::Tensor s = GridScales(xbar, alpha);
      double total = 0;
      for (size_t i = 0; i < weights.size(); ++i) {
        QD_ASSIGN_OR_RETURN(double e, ScaledQuantError(xf, weights[i].to(at::kFloat), specs[i], s));
        total += e;
      }
      const double loss = total / static_cast<double>(numel);
      if (loss < best) {
        best = loss;
        best_scales = s;
        if (best_alpha != nullptr) *best_alpha = alpha;
      }
    }
    if (!best_scales.defined()) {
      return InternalError("AWQ scale search found no finite loss (NaN or Inf activations?)");
    }
    return best_scales;
  } catch (const c10::Error& e) {
    return InternalError(std::string("AWQ scale search: ") + e.what_without_backtrace());
  }
}

StatusOr<at::Tensor> AwqSearchClip(const at::Tensor& x, const at::Tensor& w,
                                   const quant::QuantSpec& spec, const AwqOptions& options) {
  if (w.dim() != 2 || x.size(-1) != w.size(1)) {
    return InvalidArgumentError("AWQ clip search: inputs and weight do not match");
  }
  try {
    const int64_t rows = w.size(0), cols = w.size(1);
    int64_t gs = cols;
    if (spec.qscheme == quant::QScheme::kPerGroup || quant::IsMxType(spec.dtype)) {
      gs = quant::EffectiveGroupSize(spec);
      if (gs <= 0) gs = cols;
    }
    if (cols % gs != 0) {
      return InvalidArgumentError("AWQ clip search needs whole groups (" + std::to_string(cols) +
                                  " columns, groups of " + std::to_string(gs) + ")");
    }
    const int64_t groups = cols / gs;
    at::Tensor xf = x.reshape({-1, cols}).to(at::kFloat);
    const int64_t n = xf.size(0);
    const int64_t n_sample = std::min<int64_t>(n, std::max<int64_t>(1, options.clip_max_tokens));
    const int64_t stride = std::max<int64_t>(1, n / n_sample);
    at::Tensor xs = xf.slice(0, 0, n, stride).narrow(0, 0, n_sample);
    at::Tensor xg = xs.reshape({n_sample, groups, gs}).permute({1, 0, 2}).contiguous();
    const int64_t chunk = rows % 256 == 0 ? 256 : 64;
    const int steps = static_cast<int>(options.max_shrink * options.clip_grid);
    at::Tensor wf = w.to(at::kFloat);
    std::vector<at::Tensor> bests;
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      if (StopRequested()) return CancelledStatus("searching AWQ clipping ranges");
      const int64_t c = std::min(chunk, rows - r0);
      at::Tensor wg = wf.narrow(0, r0, c).reshape({c, groups, gs});
      at::Tensor org_max = wg.abs().amax(-1, /*keepdim=*/true);  // [c, G, 1]
      at::Tensor best = org_max.clone();
      at::Tensor min_err =
          at::full({c, groups, 1}, std::numeric_limits<float>::infinity(), org_max.options());
      for (int i = 0; i < steps; ++i) {
        at::Tensor max_val = org_max * (1.0 - static_cast<double>(i) / options.clip_grid);
        at::Tensor cur = at::max(at::min(wg, max_val), -max_val);
        QD_ASSIGN_OR_RETURN(at::Tensor q, AwqFakeQuantize(cur.reshape({c, cols}), spec));
        // The change of each group's partial outputs, x_g (q_g - w_g)^T: the
        // reference's cur_out - org_out without the cancellation.
        at::Tensor delta = (q.reshape({c, groups, gs}) - wg).permute({1, 2, 0});
        at::Tensor err = at::bmm(xg, delta).pow(2).mean(1).t().unsqueeze(-1);  // [c, G, 1]
        at::Tensor better = err < min_err;
        min_err = at::where(better, err, min_err);
        best = at::where(better, max_val, best);
      }
      bests.push_back(best.squeeze(-1));
    }
    return at::cat(bests, 0);
  } catch (const c10::Error& e) {
    return InternalError(std::string("AWQ clip search: ") + e.what_without_backtrace());
  }
}

Status AwqAlgorithm::Apply(pipeline::BlockAlgorithmContext& ctx) {
  models::DecoderBlock& block = ctx.block;
  const auto& groups = block.groups();
  // The config's scaling_layers (checked at submit against config.json).
  QD_ASSIGN_OR_RETURN(const std::vector<bool> chosen,
                      AwqGroupSelection(options_, block.layout(), "awq"));
  std::vector<GroupWork> work;
  std::vector<std::string> inputs_of, outputs_of;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    if (!chosen[gi]) continue;  // left to the pipeline's quantizer
    // A mixture-of-experts group: its linears see different tokens and no
    // one module's output shows the effect of a scale on all of them.
    if (groups[gi].routed) continue;
    GroupWork w;
    w.group = &groups[gi];
    for (const std::string& name : groups[gi].linears) {
      models::Linear* l = block.FindLinear(name);
      if (l == nullptr) return InternalError("block has no linear " + name);
      pipeline::LayerPlan plan = ctx.planner(name, l->info().type);
      if (!plan.weight) continue;
      if (quant::IsCastType(plan.weight->dtype) || plan.weight->is_dynamic) {
        return UnimplementedError("AWQ needs a static integer, FP8 or MX weight spec; layer " +
                                  name + " has " + quant::DescribeSpec(*plan.weight));
      }
      QD_RETURN_IF_ERROR(quant::KernelShapeFor({l->out_features(), l->in_features()}, *plan.weight)
                             .status()
                             .Prepend("layer " + name + ": "));
      w.targets.push_back(l);
      w.specs.push_back(*plan.weight);
    }
    if (w.targets.empty()) continue;
    w.scale = CanFoldScales(block, groups[gi]);
    if (w.scale && groups[gi].linears.size() > 1 && gi + 1 < groups.size()) {
      w.inspect = groups[gi + 1].linears[0];
      outputs_of.push_back(w.inspect);
    }
    inputs_of.push_back(groups[gi].linears[0]);
    work.push_back(std::move(w));
  }
  if (work.empty()) return OkStatus();
  if (ctx.observer.CancelRequested()) return CancelledError("cancelled");
  QD_ASSIGN_OR_RETURN(LinearCaptures caps,
                      CaptureLinears(block, ctx.inputs, inputs_of, outputs_of));

  try {
    // [STEP 1] scale search for every group, on the float block.
    for (GroupWork& w : work) {
      if (!w.scale) continue;
      if (ctx.observer.CancelRequested()) return CancelledError("cancelled");
      const at::Tensor& x = caps.inputs.at(w.group->linears[0]);
      if (w.inspect.empty()) {
        std::vector<at::Tensor> weights;
        for (models::Linear* l : w.targets) weights.push_back(l->weight());
        QD_ASSIGN_OR_RETURN(w.scales, AwqSearchScales(x, weights, w.specs, options_, &w.alpha));
        continue;
      }
      // The inspected module's output through the block: the group's
      // weights replaced by Q(W s)/s, everything after the inspected linear
      // skipped.
      const at::Tensor& ref = caps.outputs.at(w.inspect);
      const at::Tensor xbar = ChannelAbsMean(x);
      std::vector<at::Tensor> originals;
      for (models::Linear* l : w.targets) originals.push_back(l->weight());
      std::vector<models::Linear*> skipped;
      bool after = false;
      for (models::Linear* l : block.linears()) {
        if (after && l->kernel() == nullptr) {
          l->SetKernel(std::make_shared<ZeroKernel>());
          skipped.push_back(l);
        }
        if (l->name() == w.inspect) after = true;
      }
      double best = std::numeric_limits<double>::infinity();
      Status failed;
      for (int k = 0; k < options_.grid && failed.ok(); ++k) {
        // Each grid point runs the block: a cancel stops between them.
        if (StopRequested()) {
          failed = CancelledStatus("searching AWQ scales for " + w.group->linears[0]);
          break;
        }
        const double alpha = static_cast<double>(k) / options_.grid;
        at::Tensor s = GridScales(xbar, alpha);
        for (size_t i = 0; i < w.targets.size() && failed.ok(); ++i) {
          auto q = AwqFakeQuantize(originals[i].to(at::kFloat) * s.unsqueeze(0), w.specs[i]);
          if (!q.ok()) {
            failed = q.status();
            break;
          }
          w.targets[i]->weight() = (*q / s.unsqueeze(0)).to(originals[i].scalar_type());
        }
        if (!failed.ok()) break;
        std::vector<at::Tensor> parts;
        {
          ScopedHooks hooks;
          hooks.ObserveOutput(*block.FindLinear(w.inspect),
                              [&parts](const at::Tensor& t) { parts.push_back(t.to(at::kFloat)); });
          auto out = block.Forward(ctx.inputs);
          if (!out.ok()) {
            failed = out.status();
            break;
          }
        }
        const double loss =
            SumSquaredError(at::cat(parts, 0), ref).error / static_cast<double>(ref.numel());
        if (loss < best) {
          best = loss;
          w.scales = s;
          w.alpha = alpha;
        }
      }
      for (size_t i = 0; i < w.targets.size(); ++i) w.targets[i]->weight() = originals[i];
      for (models::Linear* l : skipped) l->SetKernel(nullptr);
      QD_RETURN_IF_ERROR(failed);
      if (!w.scales.defined()) {
        return InternalError("AWQ scale search for " + w.group->linears[0] +
                             " found no finite loss (NaN or Inf activations?)");
      }
    }

    // [STEP 2] fold the scales; the captured inputs follow.
    for (GroupWork& w : work) {
      if (!w.scale) continue;
      QD_RETURN_IF_ERROR(FoldChannelScales(block, *w.group, w.scales));
      at::Tensor& x = caps.inputs.at(w.group->linears[0]);
      x = x / w.scales.unsqueeze(0);
      char buf[96];
      std::snprintf(buf, sizeof(buf), "AWQ %s: alpha %.2f", w.group->linears[0].c_str(), w.alpha);
      ctx.observer.OnLog(pipeline::LogLevel::kInfo, buf);
    }

    // [STEP 3] clip, [STEP 4] quantize.
    for (GroupWork& w : work) {
      if (ctx.observer.CancelRequested()) return CancelledError("cancelled");
      const at::Tensor& x = caps.inputs.at(w.group->linears[0]);
      for (size_t i = 0; i < w.targets.size(); ++i) {
        if (StopRequested()) return CancelledStatus("clipping " + w.targets[i]->name());
        models::Linear* l = w.targets[i];
        const at::ScalarType t = l->weight().scalar_type();
        at::Tensor weight = l->weight().to(at::kFloat);
        const at::Tensor before_clip = l->weight().clone();
        if (options_.clip && !SkipsClip(l->name())) {
          QD_ASSIGN_OR_RETURN(at::Tensor max_val, AwqSearchClip(x, weight, w.specs[i], options_));
          const int64_t g = max_val.size(1);
          at::Tensor mv = max_val.unsqueeze(-1);
          at::Tensor v = weight.reshape({weight.size(0), g, -1});
          weight = at::max(at::min(v, mv), -mv).reshape(weight.sizes());
        }
        if (options_.quantize_weights) {
          quant::QParams qp;
          QD_ASSIGN_OR_RETURN(at::Tensor q, AwqFakeQuantize(weight, w.specs[i], &qp));
          l->weight() = q.to(t);
          ctx.quantized_weights[l->name()] = qp;
          ctx.float_weights[l->name()] = before_clip;
        } else {
          l->weight() = weight.to(t);
        }
      }
    }
  } catch (const c10::Error& e) {
    return InternalError(std::string("AWQ: ") + e.what_without_backtrace());
  }
  return OkStatus();
}

}  // namespace quantd::algo
