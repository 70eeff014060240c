// Quantization-aware training of a TorchScript model (spec.qat;
// docs/qat.md).
//
// After calibration, every quantized layer's weight trains through its fake
// quantizer (qat::TrainableWeight: straight-through gradients, LSQ scales
// when asked) with qat::Adam and a cosine learning rate; activation
// quantizers keep their calibrated (or dynamic) parameters and pass
// gradients straight through. Batches are drawn without replacement per
// epoch in an order fixed by the seed.
//
// Every steps / 20 steps (when that costs under a tenth of the time), and
// after the last, the latent weights, scales, biases, Adam's state and the
// losses so far go to one file in the scratch directory (written aside,
// then renamed); a later attempt of the same job continues after that step
// and ends with the same weights as an attempt that was never interrupted.
//
// At the end each layer gets its trained fake-quantized weight and its
// parameters (ScriptQuantizer::SetFittedWeight) and, when biases trained,
// its trained bias.
#ifndef QUANTD_WORKER_TORCHSCRIPT_SCRIPT_QAT_H_
#define QUANTD_WORKER_TORCHSCRIPT_SCRIPT_QAT_H_

#include <functional>
#include <string>

#include "worker/common/status.h"
#include "worker/pipeline/job_observer.h"
#include "worker/pipeline/job_options.h"
#include "worker/torchscript/script_quantizer.h"
#include "worker/torchscript/tensor_dataset.h"

namespace quantd::torchscript {

struct ScriptQatOptions {
  pipeline::QatOptions qat;
  // Where checkpoints go (empty: none) and what they are for: a checkpoint
  // with another fingerprint is ignored.
  std::string checkpoint_dir;
  std::string fingerprint;
  std::function<void(const pipeline::TrainingStepInfo&)> on_step;
  std::function<void(pipeline::LogLevel, const std::string&)> log;
};

// INVALID_ARGUMENT / FAILED_PRECONDITION, naming the spec.qat field, for a
// loss the dataset cannot feed, learned scales on a non-integer or grouped
// weight, outputs that do not fit the loss, or a loss that stops being
// finite; CANCELLED when the job is cancelled.
StatusOr<pipeline::JobReport::Training> RunScriptQat(ScriptQuantizer& quantizer,
                                                     const TensorDataset& data,
                                                     const ScriptQatOptions& options);

}  // namespace quantd::torchscript

#endif  // QUANTD_WORKER_TORCHSCRIPT_SCRIPT_QAT_H_
