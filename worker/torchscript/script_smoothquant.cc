#include "worker/torchscript/script_smoothquant.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "worker/algo/smoothquant.h"
#include "worker/torchscript/activation_hooks.h"

namespace quantd::torchscript {
namespace {

// Relative tolerance of the path test (header): float rounding through a
// few layers is around 1e-6 of the largest magnitude; a wrong path misses
// by a factor between 0.5 and 2.
constexpr double kPathTolerance = 1e-4;
// The whole model after every fold: the errors of several folds add up.
constexpr double kModelTolerance = 1e-3;
// Producers tried per layer.
constexpr size_t kMaxCandidates = 6;

bool IsConv(const std::string& type) { return type == "Conv2d" || type == "ConvTranspose2d"; }

int64_t Groups(const torch::jit::Module& m) {
  if (!m.hasattr("groups")) return 1;
  const c10::IValue g = m.attr("groups");
  return g.isInt() ? g.toInt() : 1;
}

int64_t ChannelAxis(const at::Tensor& x, bool conv) { return conv ? 1 : x.dim() - 1; }

// r [C] shaped to broadcast along x's channel axis.
at::Tensor AlongAxis(const at::Tensor& r, const at::Tensor& x, bool conv) {
  std::vector<int64_t> shape(x.dim(), 1);
  shape[ChannelAxis(x, conv)] = r.numel();
  return r.to(x.scalar_type()).reshape(shape);
}

bool HasChannels(const at::Tensor& x, bool conv, int64_t channels) {
  if (x.dim() < (conv ? 3 : 1)) return false;
  return x.size(ChannelAxis(x, conv)) == channels;
}

// The path test's factors: 2^u with u spread over [-1, 1), no generator.
at::Tensor PathFactors(int64_t channels) {
  at::Tensor c = at::arange(1, channels + 1, at::kDouble);
  at::Tensor frac = at::frac(c * 0.6180339887498949);
  return at::pow(2.0, 2 * frac - 1).to(at::kFloat);
}

double MaxAbs(const at::Tensor& x) { return x.abs().max().item<double>(); }

bool Close(const at::Tensor& got, const at::Tensor& want, double tolerance) {
  if (!got.sizes().equals(want.sizes())) return false;
  const double scale = std::max(MaxAbs(want), 1e-30);
  return MaxAbs(got.to(at::kDouble) - want.to(at::kDouble)) <= tolerance * scale;
}

std::string Short(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

struct Role {
  size_t slot = 0;
  std::string name;
  std::string type;
  bool conv = false;
  int64_t in_channels = -1;   // a layer to smooth
  int64_t out_channels = -1;  // a producer
};

// The hooks of the passes: a producer's output times r and a layer's input
// divided by r (the path test), inputs recorded, per-channel input maxima.
class SmoothHooks : public HookTable {
 public:
  const Role* producer = nullptr;
  const Role* target = nullptr;
  at::Tensor r;
  std::map<size_t, const Role*> record;
  std::map<size_t, at::Tensor> recorded;
  std::map<size_t, const Role*> absmax_of;
  std::map<size_t, at::Tensor> absmax;

  StatusOr<at::Tensor> OnActivation(int64_t slot64, HookSide side, const at::Tensor& x) override {
    const size_t slot = static_cast<size_t>(slot64);
    if (side == HookSide::kOutput) {
      if (producer != nullptr && slot == producer->slot &&
          HasChannels(x, producer->conv, r.numel())) {
        return x * AlongAxis(r, x, producer->conv);
      }
      return x;
    }
    if (record.count(slot)) recorded[slot] = x.detach().clone();
    const auto a = absmax_of.find(slot);
    if (a != absmax_of.end()) {
      const Role& role = *a->second;
      if (!HasChannels(x, role.conv, role.in_channels)) {
        return InternalError(role.name + ": its input changed channel count");
      }
      const at::Tensor m = x.detach()
                               .to(at::kFloat)
                               .abs()
                               .transpose(ChannelAxis(x, role.conv), 0)
                               .reshape({role.in_channels, -1})
                               .amax(1);
      at::Tensor& acc = absmax[slot];
      acc = acc.defined() ? at::max(acc, m) : m;
    }
    if (target != nullptr && slot == target->slot && HasChannels(x, target->conv, r.numel())) {
      return x / AlongAxis(r, x, target->conv);
    }
    return x;
  }
};

StatusOr<at::Tensor> RunForward(ScriptQuantizer& quantizer, SmoothHooks& hooks,
                                const std::vector<at::Tensor>& inputs) {
  QD_RETURN_IF_ERROR(quantizer.UseFloatWeights());
  HookScope scope(&hooks);
  auto out = quantizer.model().Forward(inputs);
  if (!scope.status().ok()) return scope.status();
  return out;
}

// The layer's weight with input channels as columns: [*, in].
at::Tensor InputColumns(const at::Tensor& w, const std::string& type) {
  if (type == "Linear") return w;
  if (type == "Conv2d") return w.transpose(0, 1).reshape({w.size(1), -1}).t();
  return w.reshape({w.size(0), -1}).t();  // ConvTranspose2d [in, out, kh, kw]
}

// `s` [C] laid along `axis` of a weight of w's rank.
at::Tensor OnAxis(const at::Tensor& s, const at::Tensor& w, int64_t axis) {
  std::vector<int64_t> shape(w.dim(), 1);
  shape[axis] = s.numel();
  return s.to(at::kDouble).reshape(shape);
}

}  // namespace

StatusOr<ScriptSmoothQuantReport> RunScriptSmoothQuant(ScriptQuantizer& quantizer,
                                                       const TensorDataset& data,
                                                       const ScriptSmoothQuantOptions& options) {
  ScriptSmoothQuantReport report;
  const std::vector<QuantizedLayer>& layers = quantizer.layers();
  std::vector<Role> roles(layers.size());
  std::vector<const Role*> targets;
  for (size_t i = 0; i < layers.size(); ++i) {
    const QuantizedLayer& l = layers[i];
    Role& r = roles[i];
    r.slot = i;
    r.name = l.layer.name;
    r.type = l.layer.type;
    r.conv = IsConv(r.type);
    const at::Tensor& w = l.float_weight;
    const int64_t groups = Groups(l.layer.module);
    if (r.type == "Linear" || r.type == "Conv2d") r.out_channels = w.size(0);
    if (r.type == "ConvTranspose2d" && groups == 1) r.out_channels = w.size(1);
    if (!l.plan.weight || !l.input.enabled() || !(r.type == "Linear" || r.conv)) continue;
    if (groups != 1) {
      report.skipped.push_back(r.name + ": a grouped " + r.type + " (groups " +
                               std::to_string(groups) +
                               "): an input channel is not one column of its weight");
      continue;
    }
    r.in_channels = r.type == "ConvTranspose2d" ? w.size(0) : w.size(1);
    targets.push_back(&r);
  }
  if (targets.empty() && report.skipped.empty()) {
    return FailedPreconditionError(
        "smoothquant moves range from input activations into weights: no quantized layer "
        "of this config quantizes its input (choose a scheme with input_tensors)");
  }
  const int64_t n = std::min<int64_t>(data.size(), std::max<int64_t>(1, options.samples));
  const int64_t batch = std::max(1, options.batch_size);
  const std::vector<at::Tensor> first = data.Batch(0, std::min(n, batch));

  // The float model's output and the inputs of the layers to smooth.
  SmoothHooks hooks;
  for (const Role* t : targets) hooks.record[t->slot] = t;
  QD_ASSIGN_OR_RETURN(const at::Tensor out0, RunForward(quantizer, hooks, first));
  const std::map<size_t, at::Tensor> inputs0 = std::move(hooks.recorded);
  hooks.record.clear();

  // A producer for each layer, tested on the first batch.
  std::vector<std::pair<const Role*, const Role*>> pairs;  // (producer, layer)
  std::set<size_t> used;
  for (const Role* t : targets) {
    const auto x0 = inputs0.find(t->slot);
    if (x0 == inputs0.end()) {
      report.skipped.push_back(t->name + ": forward did not run it on the calibration data");
      continue;
    }
    std::vector<const Role*> candidates;
    for (const Role& p : roles) {
      if (p.slot != t->slot && p.out_channels == t->in_channels && !used.count(p.slot))
        candidates.push_back(&p);
    }
    std::stable_sort(candidates.begin(), candidates.end(), [&](const Role* a, const Role* b) {
      const bool ea = a->slot < t->slot, eb = b->slot < t->slot;
      if (ea != eb) return ea;
      return ea ? a->slot > b->slot : a->slot < b->slot;
    });
    if (candidates.size() > kMaxCandidates) candidates.resize(kMaxCandidates);
    const Role* found = nullptr;
    std::vector<std::string> tried;
    for (const Role* p : candidates) {
      hooks.producer = p;
      hooks.target = t;
      hooks.r = PathFactors(t->in_channels);
      hooks.record = {{t->slot, t}};
      hooks.recorded.clear();
      QD_ASSIGN_OR_RETURN(const at::Tensor out, RunForward(quantizer, hooks, first));
      const auto x = hooks.recorded.find(t->slot);
      const bool path =
          x != hooks.recorded.end() &&
          Close(x->second, x0->second * AlongAxis(hooks.r, x0->second, t->conv), kPathTolerance) &&
          Close(out, out0, kPathTolerance);
      if (path) {
        found = p;
        break;
      }
      tried.push_back(p->name);
    }
    hooks.producer = hooks.target = nullptr;
    hooks.record.clear();
    if (found == nullptr) {
      std::string why = t->name + ": no layer with " + std::to_string(t->in_channels) +
                        " output channels feeds it through operators that commute with a "
                        "per-channel scale";
      if (!tried.empty()) {
        why += " (tried";
        for (const std::string& name : tried) why += " " + name;
        why += ")";
      }
      report.skipped.push_back(why);
      continue;
    }
    used.insert(found->slot);
    pairs.emplace_back(found, t);
  }
  if (pairs.empty()) {
    std::string msg =
        "smoothquant found no layer whose input scale it can fold into the layer "
        "before it";
    for (const std::string& s : report.skipped) msg += "; " + s;
    return FailedPreconditionError(msg);
  }

  // max|x_j| of each paired layer's input over the calibration samples.
  for (const auto& [p, t] : pairs) hooks.absmax_of[t->slot] = t;
  for (int64_t begin = 0; begin < n; begin += batch) {
    QD_RETURN_IF_ERROR(
        RunForward(quantizer, hooks, data.Batch(begin, std::min(n, begin + batch))).status());
  }

  for (const auto& [p, t] : pairs) {
    const QuantizedLayer& tl = layers[t->slot];
    const double alpha = algo::SmoothQuantAlpha(options.smoothquant, {t->name});
    QD_ASSIGN_OR_RETURN(
        at::Tensor s,
        algo::SmoothQuantScales(hooks.absmax[t->slot], {InputColumns(tl.float_weight, t->type)},
                                alpha, options.smoothquant.scale_clamp_min));
    const at::Tensor& wt = tl.float_weight;
    const int64_t t_axis = t->type == "ConvTranspose2d" ? 0 : 1;
    QD_RETURN_IF_ERROR(quantizer.SetFloatWeight(
        t->slot, (wt.to(at::kDouble) * OnAxis(s, wt, t_axis)).to(wt.scalar_type()), at::Tensor()));
    const QuantizedLayer& pl = layers[p->slot];
    const at::Tensor& wp = pl.float_weight;
    const int64_t p_axis = p->type == "ConvTranspose2d" ? 1 : 0;
    at::Tensor bp;
    if (pl.float_bias.isTensor()) {
      const at::Tensor b = pl.float_bias.toTensor();
      bp = (b.to(at::kDouble) / s.to(at::kDouble)).to(b.scalar_type());
    }
    QD_RETURN_IF_ERROR(quantizer.SetFloatWeight(
        p->slot, (wp.to(at::kDouble) / OnAxis(s, wp, p_axis)).to(wp.scalar_type()), bp));
    report.smoothed.push_back(t->name + " <- " + p->name + ": alpha " + Short(alpha) + ", scales " +
                              Short(s.min().item<double>()) + " to " +
                              Short(s.max().item<double>()));
  }

  // The folded model must compute what the float model did.
  SmoothHooks none;
  QD_ASSIGN_OR_RETURN(const at::Tensor out1, RunForward(quantizer, none, first));
  if (!Close(out1, out0, kModelTolerance)) {
    return InternalError("smoothquant changed the float model's output by " +
                         Short(MaxAbs(out1.to(at::kDouble) - out0.to(at::kDouble))) +
                         " (its largest magnitude " + Short(MaxAbs(out0)) + ")");
  }
  return report;
}

}  // namespace quantd::torchscript
