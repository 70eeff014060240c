#include "worker/pipeline/activation_quantizers.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "worker/quant/fake_quant.h"
#include "worker/quant/observer.h"

namespace quantd::pipeline {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsStatic(const std::optional<quant::QuantSpec>& spec) {
  return spec && !spec->is_dynamic && !quant::IsCastType(spec->dtype);
}

void Record(const std::shared_ptr<Status>& error, Status s) {
  if (error && error->ok() && !s.ok()) *error = std::move(s);
}

// The hook fake-quantizing one tensor with `spec`: fixed parameters when
// `qp` is set, else computed from each tensor.
models::LinearHook QuantizeHook(const std::string& what, quant::QuantSpec spec,
                                std::optional<quant::QParams> qp, std::shared_ptr<Status> error) {
  return [what, spec, qp, error](const models::Linear&, const at::Tensor& t) -> at::Tensor {
    auto r = qp ? quant::FakeQuantize(t, spec, *qp) : quant::FakeQuantizeDynamic(t, spec);
    if (!r.ok()) {
      Record(error, Status(r.status()).Prepend(what + ": "));
      return t;
    }
    return *r;
  };
}

struct PendingObserver {
  std::string module;
  bool output = false;
  std::unique_ptr<quant::Observer> observer;
  double min = INFINITY, max = -INFINITY;
  int64_t rows = 0;  // tokens observed
};

// "model.layers.3.mlp.experts.17.down_proj" -> "model.layers.3.mlp.experts.*.down_proj";
// empty for a module outside an expert.
std::string ExpertPeerKey(const std::string& module) {
  const std::string tag = ".experts.";
  const size_t at = module.find(tag);
  if (at == std::string::npos) return "";
  const size_t end = module.find('.', at + tag.size());
  if (end == std::string::npos) return "";
  return module.substr(0, at + tag.size()) + "*" + module.substr(end);
}

}  // namespace

bool NeedsActivationCalibration(const std::map<std::string, LayerPlan>& plans) {
  for (const auto& [name, plan] : plans)
    if (IsStatic(plan.input) || IsStatic(plan.output)) return true;
  return false;
}

bool HasActivationQuantization(const std::map<std::string, LayerPlan>& plans) {
  for (const auto& [name, plan] : plans)
    if (plan.input || plan.output) return true;
  return false;
}

StatusOr<ActivationParams> CalibrateBlockActivations(models::DecoderBlock& block,
                                                     const at::Tensor& hidden,
                                                     const std::map<std::string, LayerPlan>& plans,
                                                     const KvCacheOptions& kv,
                                                     int64_t min_expert_tokens) {
  ActivationParams out;
  std::vector<std::unique_ptr<PendingObserver>> pending;
  auto error = std::make_shared<Status>();
  // The observing hooks stay in the linears (which cannot remove one hook
  // alone) but turn into pass-throughs when this call returns.
  auto armed = std::make_shared<bool>(true);
  struct Disarm {
    std::shared_ptr<bool> armed;
    ~Disarm() { *armed = false; }
  } disarm{armed};
  for (models::Linear* l : block.linears()) {
    auto it = plans.find(l->name());
    if (it == plans.end()) continue;
    for (bool output : {false, true}) {
      const auto& spec = output ? it->second.output : it->second.input;
      if (!IsStatic(spec)) continue;
      const std::string what = (output ? "output of " : "input of ") + l->name();
      auto obs = quant::Observer::Create(*spec);
      if (!obs.ok()) return Status(obs.status()).Prepend(what + ": ");
      pending.push_back(std::make_unique<PendingObserver>());
      PendingObserver* p = pending.back().get();
      p->module = l->name();
      p->output = output;
      p->observer = std::move(*obs);
      models::LinearHook hook = [p, what, error, armed](const models::Linear&,
                                                        const at::Tensor& t) {
        if (!*armed) return t;
        Record(error, Status(p->observer->Observe(t)).Prepend(what + ": "));
        p->rows += t.numel() / std::max<int64_t>(t.size(-1), 1);
        if (!p->output) {
          p->min = std::min(p->min, t.min().item<double>());
          p->max = std::max(p->max, t.max().item<double>());
        }
        return t;
      };
      if (output)
        l->AddOutputHook(std::move(hook));
      else
        l->AddInputHook(std::move(hook));
    }
  }
  if (pending.empty()) return out;
  if (!hidden.defined())
    return InvalidArgumentError(
        "static activation quantization needs calibration data (spec.calibration.dataset_uri)");
  auto forward = block.Forward(hidden);
  if (!forward.ok()) return forward.status();
  if (!error->ok()) return *error;

  // Experts the router starved wait for their peers' parameters.
  std::vector<PendingObserver*> starved;
  std::map<std::pair<std::string, bool>, quant::QParams> widest;  // (peer key, output)
  for (auto& p : pending) {
    const std::string peer = ExpertPeerKey(p->module);
    if (!peer.empty() && BelowExpertFloor(p->rows, min_expert_tokens)) {
      starved.push_back(p.get());
      continue;
    }
    auto qp = p->observer->ComputeQParams();
    if (!qp.ok())
      return Status(qp.status())
          .Prepend((p->output ? "output of " : "input of ") + p->module + ": ");
    (p->output ? out.outputs : out.inputs)[p->module] = *qp;
    if (!p->output) out.input_ranges[p->module] = {p->min, p->max};
    if (peer.empty()) continue;
    auto [it, added] = widest.try_emplace({peer, p->output}, *qp);
    if (!added && qp->scale.max().item<double>() > it->second.scale.max().item<double>())
      it->second = *qp;
  }
  for (PendingObserver* p : starved) {
    auto it = widest.find({ExpertPeerKey(p->module), p->output});
    if (it == widest.end()) {
      return FailedPreconditionError(
          (p->output ? "output of " : "input of ") + p->module + ": " + std::to_string(p->rows) +
          " calibration tokens reached it and no other expert of the block reached " +
          std::to_string(std::max<int64_t>(min_expert_tokens, 1)) +
          "; calibrate on more samples or lower min_expert_tokens");
    }
    (p->output ? out.outputs : out.inputs)[p->module] = it->second;
  }

  // One cache scale per block: max over its k and v projections, floored.
  std::vector<std::string> kv_modules;
  for (const auto& [name, qp] : out.outputs)
    if (EndsWith(name, kv.key_suffix) || EndsWith(name, kv.value_suffix))
      kv_modules.push_back(name);
  if (!kv_modules.empty()) {
    float unified = kv.min_kv_scale;
    for (const auto& name : kv_modules) {
      const at::Tensor& s = out.outputs[name].scale;
      if (s.numel() != 1)
        return InvalidArgumentError("KV cache scale of " + name +
                                    " must be per tensor to be unified");
      unified = std::max(unified, s.item<float>());
    }
    for (const auto& name : kv_modules) {
      quant::QParams& qp = out.outputs[name];
      qp.scale = at::full_like(qp.scale, unified);
    }
  }
  return out;
}

Status InstallActivationQuantizers(models::DecoderBlock& block,
                                   const std::map<std::string, LayerPlan>& plans,
                                   const ActivationParams& params, std::shared_ptr<Status> error) {
  for (models::Linear* l : block.linears()) {
    auto it = plans.find(l->name());
    if (it == plans.end()) continue;
    for (bool output : {false, true}) {
      const auto& spec = output ? it->second.output : it->second.input;
      if (!spec) continue;
      const std::string what = (output ? "output of " : "input of ") + l->name();
      std::optional<quant::QParams> qp;
      if (IsStatic(spec)) {
        const auto& table = output ? params.outputs : params.inputs;
        auto p = table.find(l->name());
        if (p == table.end())
          return FailedPreconditionError(what + " has a static spec but was not calibrated");
        qp = p->second;
      }
      auto hook = QuantizeHook(what, *spec, qp, error);
      if (output)
        l->AddOutputHook(std::move(hook));
      else
        l->AddInputHook(std::move(hook));
    }
  }
  return OkStatus();
}

}  // namespace quantd::pipeline
