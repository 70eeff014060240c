#include "worker/algo/channel_scaling.h"

#include <c10/util/Exception.h>

#include "worker/algo/block_hooks.h"

namespace quantd::algo {

bool CanFoldScales(const models::DecoderBlock& block, const models::LinearGroup& group) {
  if (group.prev_op.empty() || group.linears.empty()) return false;
  return block.FindNorm(group.prev_op) != nullptr || block.FindLinear(group.prev_op) != nullptr;
}

Status FoldChannelScales(models::DecoderBlock& block, const models::LinearGroup& group,
                         const at::Tensor& scales) {
  if (!CanFoldScales(block, group)) {
    return FailedPreconditionError(
        "the group of " + (group.linears.empty() ? std::string("no linear") : group.linears[0]) +
        " has no previous op that can absorb a scale");
  }
  try {
    const int64_t n = scales.numel();
    at::Tensor s = scales.reshape({n}).to(at::kFloat);
    for (const std::string& name : group.linears) {
      models::Linear* l = block.FindLinear(name);
      if (l == nullptr) return InternalError("block has no linear " + name);
      if (l->in_features() != n) {
        return InvalidArgumentError("scales have " + std::to_string(n) + " channels but " + name +
                                    " has " + std::to_string(l->in_features()) + " inputs");
      }
      const at::ScalarType t = l->weight().scalar_type();
      l->weight() = (l->weight().to(at::kFloat) * s.unsqueeze(0)).to(t);
    }
    if (models::Norm* norm = block.FindNorm(group.prev_op)) {
      if (norm->weight().numel() != n) {
        return InvalidArgumentError("scales have " + std::to_string(n) + " channels but " +
                                    norm->name() + " has " +
                                    std::to_string(norm->weight().numel()));
      }
      const at::ScalarType t = norm->weight().scalar_type();
      if (norm->kind() == models::NormKind::kGemmaRmsNorm) {
        // The norm scales by (1 + weight): fold into that.
        norm->weight() = ((1.0 + norm->weight().to(at::kFloat)) / s - 1.0).to(t);
        return OkStatus();
      }
      norm->weight() = (norm->weight().to(at::kFloat) / s).to(t);
      if (norm->bias().defined()) norm->bias() = (norm->bias().to(at::kFloat) / s).to(t);
      return OkStatus();
    }
    models::Linear* prev = block.FindLinear(group.prev_op);
    if (prev->out_features() != n) {
      return InvalidArgumentError("scales have " + std::to_string(n) + " channels but " +
                                  prev->name() + " has " + std::to_string(prev->out_features()) +
                                  " outputs");
    }
    const at::ScalarType t = prev->weight().scalar_type();
    prev->weight() = (prev->weight().to(at::kFloat) / s.unsqueeze(1)).to(t);
    if (prev->bias().defined()) prev->bias() = (prev->bias().to(at::kFloat) / s).to(t);
    return OkStatus();
  } catch (const c10::Error& e) {
    return InternalError(std::string("folding scales: ") + e.what_without_backtrace());
  }
}

StatusOr<LinearCaptures> CaptureLinears(models::DecoderBlock& block, const at::Tensor& hidden,
                                        const std::vector<std::string>& inputs_of,
                                        const std::vector<std::string>& outputs_of) {
  std::map<std::string, std::vector<at::Tensor>> ins, outs;
  ScopedHooks hooks;
  for (const std::string& name : inputs_of) {
    models::Linear* l = block.FindLinear(name);
    if (l == nullptr) return InternalError("block has no linear " + name);
    auto* list = &ins[name];
    hooks.ObserveInput(*l, [list](const at::Tensor& t) {
      list->push_back(t.reshape({-1, t.size(-1)}).to(at::kFloat));
    });
  }
  for (const std::string& name : outputs_of) {
    models::Linear* l = block.FindLinear(name);
    if (l == nullptr) return InternalError("block has no linear " + name);
    auto* list = &outs[name];
    hooks.ObserveOutput(*l, [list](const at::Tensor& t) { list->push_back(t.to(at::kFloat)); });
  }
  LinearCaptures c;
  QD_ASSIGN_OR_RETURN(c.block_output, block.Forward(hidden));
  hooks.Disarm();
  try {
    for (auto& [name, parts] : ins) c.inputs[name] = at::cat(parts, 0);
    for (auto& [name, parts] : outs) c.outputs[name] = at::cat(parts, 0);
  } catch (const c10::Error& e) {
    return InternalError(std::string("capturing activations: ") + e.what_without_backtrace());
  }
  return c;
}

at::Tensor ChannelAbsMax(const at::Tensor& x) {
  return std::get<0>(x.reshape({-1, x.size(-1)}).abs().max(0)).to(at::kFloat);
}

at::Tensor ChannelAbsMean(const at::Tensor& x) {
  return x.reshape({-1, x.size(-1)}).abs().mean(0).to(at::kFloat);
}

}  // namespace quantd::algo
