// GPTQ on a TorchScript model's Linear and Conv2d layers (spec.quantization
// algorithms / algo_config "gptq"), true-sequential over the whole model:
// layers are fitted in the module hierarchy's order, each from the Hessian
// of its inputs in a calibration pass where the layers before it already
// have their GPTQ weights (activations unquantized). A Conv2d is fitted as
// its [out, in * kh * kw] matrix on the unfolded inputs (PyTorch's im2col
// order, which is the weight's), as the reference implements GPTQ for
// convolutions; per-tensor and per-channel weight specs only, groups 1,
// zero padding. Other layers (embeddings, transposed, grouped or
// per-group convolutions) keep round-to-nearest, and the notes say why.
#ifndef QUANTD_WORKER_TORCHSCRIPT_SCRIPT_GPTQ_H_
#define QUANTD_WORKER_TORCHSCRIPT_SCRIPT_GPTQ_H_

#include <functional>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/config/algorithm_options.h"
#include "worker/torchscript/script_quantizer.h"
#include "worker/torchscript/tensor_dataset.h"

namespace quantd::torchscript {

struct ScriptGptqOptions {
  config::GptqOptions gptq;
  int64_t samples = 0;  // of the calibration dataset, from its start
  int batch_size = 32;
  // (layers done, layers to fit, the layer's name) after each fitted layer.
  std::function<void(int, int, const std::string&)> progress;
};

struct ScriptGptqReport {
  std::vector<std::string> fitted;   // "features.0: loss 0.0123"
  std::vector<std::string> rounded;  // "up: why" for layers left to round-to-nearest
};

StatusOr<ScriptGptqReport> RunScriptGptq(ScriptQuantizer& quantizer, const TensorDataset& data,
                                         const ScriptGptqOptions& options);

}  // namespace quantd::torchscript

#endif  // QUANTD_WORKER_TORCHSCRIPT_SCRIPT_GPTQ_H_
