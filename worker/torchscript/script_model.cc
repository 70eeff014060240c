#include "worker/torchscript/script_model.h"

#include <sys/stat.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/library.h>

#include <fstream>
#include <limits>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "worker/common/cancellation.h"

namespace quantd::torchscript {
namespace {

using torch::jit::Block;
using torch::jit::Function;
using torch::jit::Node;

// PyTorch's module classes that quantd quantizes, by their class name.
const std::set<std::string>& QuantizableTypes() {
  static const std::set<std::string> kTypes = {"Linear", "Conv2d", "ConvTranspose2d", "Embedding",
                                               "EmbeddingBag"};
  return kTypes;
}

// Operators a forward may not run: they read files, start threads or talk
// to other processes.
bool Forbidden(const torch::jit::Symbol kind) {
  static const std::set<std::string> kForbidden = {
      "aten::from_file", "prim::fork",       "aten::wait",       "prim::rpc_async",
      "prim::rpc_sync",  "prim::rpc_remote", "aten::_awaitable", "prim::awaitable"};
  if (!kind.is_aten() && !kind.is_prim()) return true;
  return kForbidden.count(kind.toQualString()) > 0;
}

// Walks every function forward reaches (once each), checking operators and
// loops and counting the nodes forward expands to.
class GraphCheck {
 public:
  // Check() walks each function once, so each loop is instrumented once.
  explicit GraphCheck(const ScriptLimits& limits) : limits_(limits) {}

  // The node count of fn with its callees expanded, or an error.
  StatusOr<int64_t> Check(Function& fn) {
    auto it = sizes_.find(&fn);
    if (it != sizes_.end()) return it->second;
    if (!fn.isGraphFunction()) {
      return InvalidArgumentError("forward calls " + fn.qualname().qualifiedName() +
                                  ", which is not TorchScript");
    }
    if (!in_progress_.insert(&fn).second) {
      return InvalidArgumentError("forward calls " + fn.qualname().qualifiedName() +
                                  " recursively");
    }
    int64_t size = 0;
    QD_RETURN_IF_ERROR(CheckBlock(*torch::jit::toGraphFunction(fn).graph()->block(),
                                  fn.qualname().qualifiedName(), size));
    in_progress_.erase(&fn);
    sizes_[&fn] = size;
    return size;
  }

  Status CheckBlock(Block& block, const std::string& where, int64_t& size) {
    for (Node* n : block.nodes()) {
      ++size;
      const std::string op = n->kind().toQualString();
      if (Forbidden(n->kind())) {
        return InvalidArgumentError(where + " uses " + op +
                                    ", which a quantization job does not run (file access, "
                                    "threads, RPC or operators outside aten:: and prim::)");
      }
      if (n->kind() == torch::jit::prim::Loop) loops_.push_back(n);
      Function* callee = nullptr;
      if (n->kind() == torch::jit::prim::CallMethod) {
        auto cls = n->input(0)->type()->cast<c10::ClassType>();
        if (cls == nullptr) {
          return InvalidArgumentError(where + " calls " + n->s(torch::jit::attr::name) +
                                      " through an interface; quantd needs concrete modules");
        }
        callee = &cls->getMethod(n->s(torch::jit::attr::name));
      } else if (n->kind() == torch::jit::prim::CallFunction) {
        auto fn = n->input(0)->type()->cast<c10::FunctionType>();
        if (fn == nullptr) return InvalidArgumentError(where + " calls a function value");
        callee = fn->function();
      }
      if (callee != nullptr) {
        QD_ASSIGN_OR_RETURN(int64_t callee_size, Check(*callee));
        size += callee_size;
      }
      if (size > limits_.max_graph_nodes) {
        return InvalidArgumentError("forward expands to more than " +
                                    std::to_string(limits_.max_graph_nodes) + " operators");
      }
      for (Block* b : n->blocks()) QD_RETURN_IF_ERROR(CheckBlock(*b, where, size));
    }
    return OkStatus();
  }

  // Gives every loop body a quantd::loop_tick (after the whole check, so
  // that a model calling quantd:: operators itself is refused).
  std::vector<Node*> InstrumentLoops() {
    const auto tick = c10::Symbol::fromQualString("quantd::loop_tick");
    std::vector<Node*> ticks;
    for (Node* loop : loops_) {
      Block* body = loop->blocks().at(0);
      // Graph::insert would return a None constant for an operator without
      // outputs; the node itself is what RemoveLoopChecks takes out.
      Node* n = loop->owningGraph()->create(tick, /*num_outputs=*/0);
      n->insertBefore(body->param_node()->next());
      ticks.push_back(n);
    }
    return ticks;
  }

 private:
  const ScriptLimits& limits_;
  std::unordered_map<Function*, int64_t> sizes_;
  std::set<Function*> in_progress_;
  std::vector<Node*> loops_;
};

struct LoopBudget {
  int64_t left = 0;
  bool exhausted = false;
};
thread_local LoopBudget loop_budget;

void LoopTick() {
  if (StopRequested()) throw std::runtime_error("cancelled");
  if (--loop_budget.left < 0) {
    loop_budget.exhausted = true;
    throw std::runtime_error("loop budget exhausted");
  }
}

TORCH_LIBRARY_FRAGMENT(quantd, m) {
  // CONSERVATIVE: a side effect, so no pass removes it.
  m.def(torch::schema("loop_tick() -> ()", c10::AliasAnalysisKind::CONSERVATIVE), &LoopTick);
}

std::string ClassName(const torch::jit::Module& m) {
  const auto name = m.type()->name();
  return name ? name->qualifiedName() : "";
}

}  // namespace

std::string FirstLine(const std::exception& e) {
  const std::string what = e.what();
  return what.substr(0, what.find('\n'));
}

std::string ScriptModel::ShortClassName(const torch::jit::Module& m) {
  const std::string q = ClassName(m);
  return q.substr(q.rfind('.') + 1);
}

std::string ScriptModel::LayerType(const torch::jit::Module& m) {
  // "__torch__.torch.nn.modules.conv.___torch_mangle_0.Conv2d": a class of
  // torch.nn (the mangle only tells instances with different constants apart).
  static const std::string kPrefix = "__torch__.torch.nn.modules.";
  if (ClassName(m).compare(0, kPrefix.size(), kPrefix) != 0) return "";
  const std::string last = ShortClassName(m);
  return QuantizableTypes().count(last) ? last : "";
}

bool ScriptModel::LooksLikeScript(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  return f.read(magic, 4) && magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4;
}

StatusOr<ScriptModel> ScriptModel::Load(const std::string& path, const ScriptLimits& limits) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return NotFoundError(path + " does not exist");
  if (!S_ISREG(st.st_mode)) return InvalidArgumentError(path + " is not a file");
  if (st.st_size > limits.max_file_bytes) {
    return InvalidArgumentError(path + " is " + std::to_string(st.st_size) +
                                " bytes, over the TorchScript limit of " +
                                std::to_string(limits.max_file_bytes));
  }
  if (!LooksLikeScript(path)) {
    return InvalidArgumentError(path +
                                " is not a TorchScript archive (torch.jit.save writes a "
                                "zip file)");
  }
  ScriptModel model;
  try {
    model.module_ = torch::jit::load(path, c10::Device(c10::kCPU));
    model.module_.eval();
  } catch (const std::exception& e) {
    const std::string what = FirstLine(e);
    return InvalidArgumentError(path + " is not a loadable TorchScript module: " + what);
  }
  int64_t modules = 0;
  for (const auto& m : model.module_.named_modules()) {
    (void)m;
    if (++modules > limits.max_modules) {
      return InvalidArgumentError(path + " has more than " + std::to_string(limits.max_modules) +
                                  " submodules");
    }
  }
  auto forward = model.module_.find_method("forward");
  if (!forward) return InvalidArgumentError(path + " has no forward method");
  GraphCheck check(limits);
  auto checked = check.Check(forward->function());
  if (!checked.ok()) return Status(checked.status()).Prepend(path + ": ");
  model.loop_ticks_ = check.InstrumentLoops();
  model.max_loop_iterations_ = limits.max_loop_iterations;
  const auto& schema = forward->function().getSchema();
  for (size_t i = 1; i < schema.arguments().size(); ++i) {
    const auto& arg = schema.arguments()[i];
    if (arg.default_value()) continue;  // left at its default
    if (!arg.type()->isSubtypeOf(*c10::TensorType::get())) {
      return InvalidArgumentError(path + ": forward's argument '" + arg.name() + "' is " +
                                  arg.type()->repr_str() +
                                  "; quantd feeds tensors (a tensor dataset's input.<i>)");
    }
    ++model.num_inputs_;
  }
  if (model.num_inputs_ == 0) {
    return InvalidArgumentError(path + ": forward takes no tensor argument");
  }
  return model;
}

void ScriptModel::RemoveLoopChecks() {
  for (torch::jit::Node* tick : loop_ticks_) tick->destroy();
  loop_ticks_.clear();
}

std::vector<ScriptLayer> ScriptModel::Layers() const {
  std::vector<ScriptLayer> layers;
  for (const auto& m : module_.named_modules()) {
    const std::string type = LayerType(m.value);
    if (!type.empty()) layers.push_back({m.name, type, m.value});
  }
  return layers;
}

StatusOr<at::Tensor> ScriptModel::Forward(const std::vector<at::Tensor>& inputs, bool gradients) {
  if (static_cast<int>(inputs.size()) != num_inputs_) {
    return InvalidArgumentError("forward takes " + std::to_string(num_inputs_) +
                                " tensors, given " + std::to_string(inputs.size()));
  }
  loop_budget = {max_loop_iterations_, false};
  has_run_ = true;
  try {
    torch::AutoGradMode grad_mode(gradients);
    std::vector<c10::IValue> args(inputs.begin(), inputs.end());
    c10::IValue out = module_.forward(args);
    if (out.isTuple()) out = out.toTupleRef().elements().at(0);
    if (out.isList()) out = out.toListRef().at(0);
    if (!out.isTensor()) {
      return InvalidArgumentError("forward returned " + out.tagKind() +
                                  "; quantd compares tensor outputs");
    }
    return out.toTensor();
  } catch (const std::exception& e) {
    if (StopRequested()) return CancelledStatus("running the model's forward");
    if (loop_budget.exhausted) {
      return InvalidArgumentError("forward ran more than " + std::to_string(max_loop_iterations_) +
                                  " loop iterations; quantd stopped it");
    }
    return InvalidArgumentError("forward failed: " + FirstLine(e));
  }
}

}  // namespace quantd::torchscript
