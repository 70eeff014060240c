// The per-layer sensitivity of a TorchScript model (spec.sensitivity;
// docs/sensitivity.md): for each layer the job quantizes and each
// candidate, the relative MSE of the model's output against the float
// model's on the calibration samples, with that layer alone quantized as the
// candidate plans it (weight rounded to nearest, input quantized; a static
// input calibrated on the same samples with every layer float). A
// TorchScript model is one block, so this is the decoder pass's block-output
// measure taken over the whole model.
#ifndef QUANTD_WORKER_TORCHSCRIPT_SCRIPT_SENSITIVITY_H_
#define QUANTD_WORKER_TORCHSCRIPT_SCRIPT_SENSITIVITY_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/pipeline/job_options.h"
#include "worker/torchscript/tensor_dataset.h"

namespace quantd::torchscript {

struct ScriptSensitivityOptions {
  // The model file and whether the job folded its batch norms (each
  // candidate loads its own copy, folded the same way, so the weights are
  // the job's).
  std::string model_path;
  bool fold_batchnorm = false;
  // The layers the job quantizes, by qualified name.
  std::vector<std::string> layers;
  int64_t samples = 0;  // the first `samples` of the data
  int batch_size = 1;
  // Called after each batch: layer-candidate pairs done, and in all.
  std::function<void(int64_t, int64_t)> progress;
};

// Layer name -> one value per candidate, in the candidates' order (0 where
// the candidate keeps the layer float).
StatusOr<std::map<std::string, std::vector<double>>> MeasureScriptSensitivity(
    const std::vector<pipeline::SensitivityCandidate>& candidates, const TensorDataset& data,
    const ScriptSensitivityOptions& options);

}  // namespace quantd::torchscript

#endif  // QUANTD_WORKER_TORCHSCRIPT_SCRIPT_SENSITIVITY_H_
