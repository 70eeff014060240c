#include "worker/torchscript/activation_hooks.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/library.h>

#include <set>
#include <stdexcept>
#include <string>

namespace quantd::torchscript {
namespace {

constexpr const char* kSlotAttribute = "_quantd_slot";

struct ThreadHooks {
  HookTable* table = nullptr;
  Status status;
};
thread_local ThreadHooks current;

at::Tensor ActivationOp(const at::Tensor& x, int64_t slot, int64_t side) {
  if (current.table == nullptr) return x;
  auto out = current.table->OnActivation(slot, static_cast<HookSide>(side), x);
  if (out.ok()) return *std::move(out);
  if (current.status.ok()) current.status = out.status();
  // Unwinds the interpreter; HookScope::status says why.
  throw std::runtime_error(out.status().message());
}

TORCH_LIBRARY_FRAGMENT(quantd, m) {
  // CONSERVATIVE: the operator observes (a side effect), so the JIT may not
  // merge or drop calls.
  m.def(torch::schema("activation(Tensor x, int slot, int side) -> Tensor",
                      c10::AliasAnalysisKind::CONSERVATIVE),
        &ActivationOp);
}

Status HookGraph(torch::jit::Graph& g, bool hook_input) {
  if (g.inputs().size() < 2 || g.outputs().size() != 1) {
    return InvalidArgumentError(
        "a layer's forward does not take (self, input) or return one value");
  }
  const auto op = c10::Symbol::fromQualString("quantd::activation");
  torch::jit::Value* self = g.inputs()[0];
  {
    torch::jit::WithInsertPoint at_start(g.block()->nodes().front());
    torch::jit::Value* slot = g.insertGetAttr(self, kSlotAttribute);
    if (hook_input) {
      torch::jit::Value* x = g.inputs()[1];
      torch::jit::Value* side = g.insertConstant(static_cast<int64_t>(HookSide::kInput));
      torch::jit::Value* q = g.insert(op, {x, slot, side});
      x->replaceAllUsesAfterNodeWith(q->node(), q);
    }
    torch::jit::WithInsertPoint at_return(g.return_node());
    torch::jit::Value* side = g.insertConstant(static_cast<int64_t>(HookSide::kOutput));
    torch::jit::Value* out = g.insert(op, {g.outputs()[0], slot, side});
    g.return_node()->replaceInput(0, out);
  }
  return OkStatus();
}

}  // namespace

HookScope::HookScope(HookTable* table) {
  current.table = table;
  current.status = OkStatus();
}
HookScope::~HookScope() { current.table = nullptr; }
const Status& HookScope::status() const { return current.status; }

bool HasFloatInput(const std::string& layer_type) {
  return layer_type != "Embedding" && layer_type != "EmbeddingBag";
}

Status InstallActivationHooks(const ScriptModel& model, std::vector<ScriptLayer>& layers) {
  if (model.has_run()) {
    return FailedPreconditionError("quantizers go into a model before its first forward");
  }
  std::set<torch::jit::Function*> hooked;
  for (size_t i = 0; i < layers.size(); ++i) {
    ScriptLayer& layer = layers[i];
    try {
      layer.module.register_attribute(kSlotAttribute, c10::IntType::get(), static_cast<int64_t>(i));
      torch::jit::Function& fn = layer.module.get_method("forward").function();
      if (!hooked.insert(&fn).second) continue;
      auto& graph = *torch::jit::toGraphFunction(fn).graph();
      Status s = HookGraph(graph, HasFloatInput(layer.type));
      if (!s.ok()) return s.Prepend(layer.name + ": ");
    } catch (const std::exception& e) {
      return InvalidArgumentError(layer.name + ": cannot insert the quantizers: " + FirstLine(e));
    }
  }
  return OkStatus();
}

}  // namespace quantd::torchscript
