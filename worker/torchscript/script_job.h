// RunScriptJob: a quantization job on a TorchScript model (a .pt file) with
// tensor datasets, the counterpart of pipeline::RunQuantizationJob for
// models other than the decoder LLMs (docs/vision_models.md):
//   load   the module (ScriptModel::Load's checks), fold batch norms;
//   quantize  every layer the planner quantizes (weights at once);
//   calibrate  static activation quantizers on the calibration dataset;
//   evaluate  float against quantized on the evaluation dataset (top-1
//          accuracy with labels, output SQNR and relative MSE, per bucket);
//   export  the fake-quantized TorchScript module (script_export.h).
// Layer results go out as one BlockReport (block 1 of 1).
#ifndef QUANTD_WORKER_TORCHSCRIPT_SCRIPT_JOB_H_
#define QUANTD_WORKER_TORCHSCRIPT_SCRIPT_JOB_H_

#include <string>

#include "worker/pipeline/job_observer.h"
#include "worker/pipeline/job_options.h"

namespace quantd::torchscript {

// Whether `path` is a model this runner takes (a TorchScript archive).
bool IsScriptModelPath(const std::string& path);

pipeline::JobOutcome RunScriptJob(const pipeline::JobOptions& options,
                                  pipeline::JobObserver& observer);

}  // namespace quantd::torchscript

#endif  // QUANTD_WORKER_TORCHSCRIPT_SCRIPT_JOB_H_
