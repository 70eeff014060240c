#include "worker/torchscript/batchnorm_fold.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <map>
#include <optional>
#include <set>
#include <utility>

namespace quantd::torchscript {
namespace {

using torch::jit::Graph;
using torch::jit::Module;
using torch::jit::Node;
using torch::jit::Value;

struct Instance {
  std::string name;
  Module module;
};

bool IsBatchNorm2d(const Module& m) {
  const auto n = m.type()->name();
  if (!n) return false;
  const std::string q = n->qualifiedName();
  return q.rfind("__torch__.torch.nn.modules.batchnorm.", 0) == 0 &&
         q.substr(q.rfind('.') + 1) == "BatchNorm2d";
}

Graph& ForwardGraph(const Module& m) {
  return *torch::jit::toGraphFunction(m.get_method("forward").function()).graph();
}

// The attribute name when `v` is self.<name> of the graph's self.
std::optional<std::string> SelfAttribute(const Graph& g, const Value* v) {
  const Node* n = v->node();
  if (n->kind() != torch::jit::prim::GetAttr || n->input(0) != g.inputs()[0]) return std::nullopt;
  return n->s(torch::jit::attr::name);
}

bool IsForwardCall(const Node* n) {
  return n->kind() == torch::jit::prim::CallMethod && n->s(torch::jit::attr::name) == "forward";
}

// The batch norm's eps: a class constant when scripted, the batch_norm
// call's argument when traced.
std::optional<double> BatchNormEps(const Module& bn) {
  const auto& type = bn.type();
  if (type->hasConstant("eps")) return type->getConstant("eps").toScalar().to<double>();
  for (const Node* n : ForwardGraph(bn).nodes()) {
    if (n->kind() == torch::jit::aten::batch_norm && n->inputs().size() > 7) {
      if (auto eps = torch::jit::constant_as<double>(n->input(7))) return *eps;
    }
  }
  return std::nullopt;
}

// Makes conv's forward read self.bias (a traced convolution without bias
// passes None instead). Every instance of the class gets bias = None.
Status EnsureBiasSlot(const Module& conv, const std::vector<Module>& all_modules) {
  Graph& g = ForwardGraph(conv);
  for (const Node* n : g.nodes()) {
    if (SelfAttribute(g, n->output(0)) == std::optional<std::string>("bias")) return OkStatus();
  }
  Node* call = nullptr;
  for (Node* n : g.nodes()) {
    if (n->kind() == torch::jit::aten::_convolution || n->kind() == torch::jit::aten::conv2d) {
      if (call != nullptr) return FailedPreconditionError("its forward has several convolutions");
      call = n;
    }
  }
  if (call == nullptr || call->inputs().size() < 3 ||
      !call->input(2)->type()->isSubtypeOf(*c10::NoneType::get())) {
    return FailedPreconditionError("its forward does not take a bias quantd can set");
  }
  const auto type = conv.type();
  const auto bias_type = c10::OptionalType::create(c10::TensorType::get());
  for (const Module& m : all_modules) {
    if (m.type() == type && !m.hasattr("bias")) {
      Module(m).register_attribute("bias", bias_type, c10::IValue());
    }
  }
  torch::jit::WithInsertPoint before(call);
  call->replaceInput(2, g.insertGetAttr(g.inputs()[0], "bias"));
  return OkStatus();
}

Status FoldOne(Module conv, const Module& bn) {
  auto eps = BatchNormEps(bn);
  if (!eps) return FailedPreconditionError("its eps is not a constant");
  const c10::IValue mean_v = bn.attr("running_mean");
  const c10::IValue var_v = bn.attr("running_var");
  if (!mean_v.isTensor() || !var_v.isTensor()) {
    return FailedPreconditionError("it has no running statistics (track_running_stats=False)");
  }
  const at::Tensor w = conv.attr("weight").toTensor();
  const int64_t out = w.size(0);
  auto channel = [&](const c10::IValue& v, double fill) {
    return v.isTensor() ? v.toTensor().to(at::kDouble) : at::full({out}, fill, at::kDouble);
  };
  const at::Tensor mean = mean_v.toTensor().to(at::kDouble);
  const at::Tensor var = var_v.toTensor().to(at::kDouble);
  if (mean.numel() != out || var.numel() != out) {
    return FailedPreconditionError("its channels differ from the convolution's");
  }
  const at::Tensor gamma = channel(bn.attr("weight"), 1.0);
  const at::Tensor beta = channel(bn.attr("bias"), 0.0);
  const c10::IValue bias_v = conv.hasattr("bias") ? conv.attr("bias") : c10::IValue();
  const at::Tensor bias = channel(bias_v, 0.0);
  const at::Tensor scale = gamma / at::sqrt(var + *eps);
  torch::NoGradGuard no_grad;
  conv.setattr("weight", (w.to(at::kDouble) * scale.view({-1, 1, 1, 1})).to(w.scalar_type()));
  conv.setattr("bias", ((bias - mean) * scale + beta).to(w.scalar_type()));
  return OkStatus();
}

}  // namespace

StatusOr<FoldReport> FoldBatchNorms(ScriptModel& model) {
  if (model.has_run()) {
    return FailedPreconditionError("batch norms are folded before the model's first forward");
  }
  FoldReport report;
  // Classes in the order their first instance appears in the hierarchy.
  std::vector<std::vector<Instance>> by_type;
  std::map<c10::ClassType*, size_t> type_index;
  std::vector<Module> all_modules;
  for (const auto& m : model.module().named_modules()) {
    auto [it, added] = type_index.emplace(m.value.type().get(), by_type.size());
    if (added) by_type.emplace_back();
    by_type[it->second].push_back({m.name, m.value});
    all_modules.push_back(m.value);
  }
  try {
    for (auto& instances : by_type) {
      if (!instances.front().module.find_method("forward")) continue;
      Graph& g = ForwardGraph(instances.front().module);
      std::vector<Node*> bn_calls;
      for (Node* n : g.nodes()) bn_calls.push_back(n);
      bool changed = false;
      for (Node* bn_call : bn_calls) {
        if (!IsForwardCall(bn_call) || bn_call->inputs().size() != 2) continue;
        Value* conv_out = bn_call->input(1);
        Node* conv_call = conv_out->node();
        if (!IsForwardCall(conv_call) || conv_out->uses().size() != 1) continue;
        const auto bn_attr = SelfAttribute(g, bn_call->input(0));
        const auto conv_attr = SelfAttribute(g, conv_call->input(0));
        if (!bn_attr || !conv_attr) continue;
        const Module& first = instances.front().module;
        if (!IsBatchNorm2d(first.attr(*bn_attr).toModule()) ||
            ScriptModel::LayerType(first.attr(*conv_attr).toModule()) != "Conv2d") {
          continue;
        }
        auto pair_name = [&](const Instance& in) {
          const std::string prefix = in.name.empty() ? "" : in.name + ".";
          return prefix + *conv_attr + " <- " + prefix + *bn_attr;
        };
        // The graph is the class's: fold every instance or none.
        Status ok = EnsureBiasSlot(first.attr(*conv_attr).toModule(), all_modules);
        for (size_t i = 0; ok.ok() && i < instances.size(); ++i) {
          const Module& parent = instances[i].module;
          if (!parent.attr(*bn_attr).toModule().attr("running_mean").isTensor()) {
            ok = FailedPreconditionError("it has no running statistics");
          }
        }
        if (!ok.ok()) {
          report.skipped.push_back(pair_name(instances.front()) + ": " + ok.message());
          continue;
        }
        for (const Instance& in : instances) {
          Status s =
              FoldOne(in.module.attr(*conv_attr).toModule(), in.module.attr(*bn_attr).toModule());
          if (!s.ok()) return s.Prepend(pair_name(in) + ": ");
          report.folded.push_back(pair_name(in));
        }
        bn_call->output()->replaceAllUsesWith(conv_out);
        bn_call->destroy();
        changed = true;
      }
      if (changed) torch::jit::EliminateDeadCode(g.block());
    }
  } catch (const std::exception& e) {
    return InvalidArgumentError("folding batch norms: " + FirstLine(e));
  }
  return report;
}

}  // namespace quantd::torchscript
