#include "worker/algo/activation_quant.h"

#include <c10/util/Exception.h>

#include <memory>
#include <stdexcept>

#include "worker/common/squared_error.h"
#include "worker/quant/fake_quant.h"
#include "worker/quant/observer.h"

namespace quantd::algo {

void SavedWeights::Restore() {
  for (auto& [linear, w] : saved_) linear->weight() = w;
  saved_.clear();
}

StatusOr<SavedWeights> QuantizeBlockWeights(models::DecoderBlock& block,
                                            const pipeline::LayerPlanner& planner) {
  SavedWeights saved;
  for (models::Linear* l : block.linears()) {
    pipeline::LayerPlan plan = planner(l->name(), l->info().type);
    if (!plan.weight) continue;
    auto qp = quant::ComputeQParams(l->weight(), *plan.weight);
    if (!qp.ok()) {
      saved.Restore();
      return Status(qp.status()).Prepend("layer " + l->name() + ": ");
    }
    auto q = quant::FakeQuantize(l->weight(), *plan.weight, *qp);
    if (!q.ok()) {
      saved.Restore();
      return Status(q.status()).Prepend("layer " + l->name() + ": ");
    }
    saved.saved_.emplace_back(l, l->weight());
    l->weight() = *q;
  }
  return saved;
}

StatusOr<BlockInputQuantizers> BlockInputQuantizers::Calibrate(
    models::DecoderBlock& block, const at::Tensor& hidden, const pipeline::LayerPlanner& planner) {
  BlockInputQuantizers q;
  std::map<std::string, std::unique_ptr<quant::Observer>> observers;
  ScopedHooks hooks;
  for (models::Linear* l : block.linears()) {
    pipeline::LayerPlan plan = planner(l->name(), l->info().type);
    if (!plan.input) continue;
    q.specs_[l->name()] = *plan.input;
    if (plan.input->is_dynamic || quant::IsCastType(plan.input->dtype)) continue;
    auto obs = quant::Observer::Create(*plan.input);
    if (!obs.ok()) return Status(obs.status()).Prepend("input of " + l->name() + ": ");
    quant::Observer* raw = obs->get();
    observers[l->name()] = std::move(*obs);
    hooks.ObserveInput(*l, [raw](const at::Tensor& t) {
      Status s = raw->Observe(t);
      if (!s.ok()) throw std::runtime_error(s.message());
    });
  }
  if (observers.empty()) return q;
  QD_ASSIGN_OR_RETURN(at::Tensor unused, block.Forward(hidden));
  (void)unused;
  hooks.Disarm();
  for (auto& [name, obs] : observers) {
    auto qp = obs->ComputeQParams();
    if (!qp.ok()) return Status(qp.status()).Prepend("input of " + name + ": ");
    q.static_qparams_[name] = *qp;
  }
  return q;
}

Status BlockInputQuantizers::Install(models::DecoderBlock& block, ScopedHooks& hooks) const {
  for (const auto& [name, spec] : specs_) {
    models::Linear* l = block.FindLinear(name);
    if (l == nullptr) return InternalError("block has no linear " + name);
    auto it = static_qparams_.find(name);
    if (it != static_qparams_.end()) {
      quant::QParams qp = it->second;
      quant::QuantSpec s = spec;
      hooks.ReplaceInput(*l, [s, qp](const at::Tensor& t) {
        auto r = quant::FakeQuantize(t, s, qp);
        if (!r.ok()) throw std::runtime_error(r.status().message());
        return *r;
      });
    } else {
      quant::QuantSpec s = spec;
      hooks.ReplaceInput(*l, [s](const at::Tensor& t) {
        auto r = quant::FakeQuantizeDynamic(t, s);
        if (!r.ok()) throw std::runtime_error(r.status().message());
        return *r;
      });
    }
  }
  return OkStatus();
}

double RelativeMse(const at::Tensor& out, const at::Tensor& ref) {
  const SquaredError se = SumSquaredError(out, ref);
  return se.reference > 0 ? se.error / se.reference : se.error;
}

}  // namespace quantd::algo
