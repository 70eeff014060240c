// ScriptModel: a tenant's TorchScript module (torch.jit.save of a scripted or
// traced nn.Module) loaded for quantization.
//
// Loading treats the file as hostile: its size is capped, LibTorch's
// exceptions become INVALID_ARGUMENT, and forward (with every method and
// function it calls) may use only ATen and TorchScript's own prim::
// operators, minus those that touch files, threads or other processes. Every
// loop's body gets a check (the quantd::loop_tick operator) that stops the
// forward when the job is cancelled or one forward has run more than
// max_loop_iterations iterations, so no loop holds a worker for ever.
//
// The quantizable layers are the submodules whose class is one of PyTorch's
// Linear, Conv2d, ConvTranspose2d, Embedding or EmbeddingBag, named by their
// qualified names ("features.0.conv"): the names exclude and
// layer_quant_config match.
#ifndef QUANTD_WORKER_TORCHSCRIPT_SCRIPT_MODEL_H_
#define QUANTD_WORKER_TORCHSCRIPT_SCRIPT_MODEL_H_

#include <torch/script.h>

#include <cstdint>
#include <string>
#include <vector>

#include "worker/common/status.h"

namespace quantd::torchscript {

struct ScriptLimits {
  int64_t max_file_bytes = int64_t{4} << 30;
  int64_t max_modules = 100000;
  int64_t max_graph_nodes = 1000000;        // of the inlined forward graph
  int64_t max_loop_iterations = 100000000;  // all loops of one forward together
};

// One quantizable submodule.
struct ScriptLayer {
  std::string name;  // qualified name: "block1.conv"
  std::string type;  // "Linear", "Conv2d", "ConvTranspose2d", "Embedding", "EmbeddingBag"
  torch::jit::Module module;
};

// The first line of a LibTorch exception's message (the rest is a C++
// backtrace), for errors that reach the job's user.
std::string FirstLine(const std::exception& e);

class ScriptModel {
 public:
  // INVALID_ARGUMENT naming `path` for a file that is not a TorchScript
  // archive, is over the limits, or whose forward uses what the module
  // description above excludes; NOT_FOUND when it does not exist.
  static StatusOr<ScriptModel> Load(const std::string& path, const ScriptLimits& limits = {});

  // Whether the file starts like a TorchScript archive (a zip); cheap, for
  // telling it from a GGUF file or a directory.
  static bool LooksLikeScript(const std::string& path);

  torch::jit::Module& module() { return module_; }
  const torch::jit::Module& module() const { return module_; }
  // The quantizable layers, in the module hierarchy's order.
  std::vector<ScriptLayer> Layers() const;
  // forward's tensor arguments (self excluded).
  int num_inputs() const { return num_inputs_; }
  // Runs forward, recording autograd only when `gradients` (training). The
  // result must be one tensor (or a tuple/list whose first element is one: a
  // model returning extras). INVALID_ARGUMENT with LibTorch's message when
  // forward throws; CANCELLED when the thread's CancellationScope asks a
  // loop to stop.
  StatusOr<at::Tensor> Forward(const std::vector<at::Tensor>& inputs, bool gradients = false);

  // Takes the loop checks out again (they are quantd's operator), for an
  // export; forward then runs without them.
  void RemoveLoopChecks();

  // Whether forward has run: LibTorch then keeps its compiled graphs, so
  // the graph changes (batch-norm folding, activation hooks) come first.
  bool has_run() const { return has_run_; }

  // The type name quantd quantizes for a module ("" for others).
  static std::string LayerType(const torch::jit::Module& m);
  // The last component of a module's class name, for any module ("Conv2d",
  // "DigitsCNN").
  static std::string ShortClassName(const torch::jit::Module& m);

 private:
  torch::jit::Module module_;
  int num_inputs_ = 0;
  int64_t max_loop_iterations_ = 0;
  bool has_run_ = false;
  std::vector<torch::jit::Node*> loop_ticks_;  // owned by the module's graphs
};

}  // namespace quantd::torchscript

#endif  // QUANTD_WORKER_TORCHSCRIPT_SCRIPT_MODEL_H_
