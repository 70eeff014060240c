// Activation hooks: the C++ counterpart of the reference toolkit's eager-mode
// module replacement for a TorchScript model. Each quantizable layer's
// forward graph gets the operator quantd::activation(x, slot, side) on its
// input (Linear and the convolutions: their first argument) and on its
// output; `slot` is an attribute of the layer instance (_quantd_slot), so
// instances that share a module class, and so a graph, stay apart.
//
// The operator asks the HookTable installed on the calling thread
// (HookScope) what to do with the tensor; with none installed it passes the
// tensor through, so the module also runs as it did.
#ifndef QUANTD_WORKER_TORCHSCRIPT_ACTIVATION_HOOKS_H_
#define QUANTD_WORKER_TORCHSCRIPT_ACTIVATION_HOOKS_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "worker/common/status.h"
#include "worker/torchscript/script_model.h"

namespace quantd::torchscript {

enum class HookSide : int64_t { kInput = 0, kOutput = 1 };

class HookTable {
 public:
  virtual ~HookTable() = default;
  // The tensor the layer goes on with. An error stops the forward; the
  // scope reports it (HookScope::status).
  virtual StatusOr<at::Tensor> OnActivation(int64_t slot, HookSide side, const at::Tensor& x) = 0;
};

// Installs `table` for the forwards this thread runs while the scope lives.
class HookScope {
 public:
  explicit HookScope(HookTable* table);
  ~HookScope();
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;
  // The first error a hook returned in this scope (OK if none).
  const Status& status() const;
};

// Gives layers[i] slot i and puts the hooks into its class's forward (once
// per class). Layers must belong to `model`, whose forward has not run yet
// (FAILED_PRECONDITION otherwise: LibTorch keeps the graphs it compiled).
Status InstallActivationHooks(const ScriptModel& model, std::vector<ScriptLayer>& layers);

// Whether a layer type's input is a float activation quantd quantizes
// (Embedding and EmbeddingBag take indices).
bool HasFloatInput(const std::string& layer_type);

}  // namespace quantd::torchscript

#endif  // QUANTD_WORKER_TORCHSCRIPT_ACTIVATION_HOOKS_H_
