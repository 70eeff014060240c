// The torchscript export: the quantized model as a TorchScript module that
// plain PyTorch (or LibTorch) loads without quantd:
//   model.pt                 the job's module with fake-quantized weights
//                            (the exact values quantd evaluated) and its
//                            static integer activation quantizers as
//                            PyTorch's fake_quantize_per_tensor_affine /
//                            fake_quantize_per_channel_affine, whose
//                            arithmetic is quantd's (x * (1 / scale),
//                            round half to even, + zero point, clamp);
//   quantization_config.json the reference toolkit's config that was applied.
// Activation quantizers PyTorch has no operator for (dynamic, FP8, MX,
// per-group) are refused by CheckScriptExport before the job calibrates.
#ifndef QUANTD_WORKER_TORCHSCRIPT_SCRIPT_EXPORT_H_
#define QUANTD_WORKER_TORCHSCRIPT_SCRIPT_EXPORT_H_

#include <string>

#include "worker/common/status.h"
#include "worker/config/quant_config.h"
#include "worker/export/artifact.h"
#include "worker/torchscript/script_quantizer.h"

namespace quantd::torchscript {

struct ScriptExportOptions {
  std::string output_dir;
  bool overwrite = false;
  exporter::OutputOwner output_owner;
  const config::QuantConfig* quant_config = nullptr;
};

// INVALID_ARGUMENT naming every layer whose activation quantizer the export
// cannot express.
Status CheckScriptExport(const ScriptQuantizer& quantizer);

// Writes the artifact (atomically, exporter::StagedDirectory) and describes
// it. Changes the quantizer's module: call it last.
StatusOr<exporter::Artifact> ExportScriptModel(ScriptQuantizer& quantizer,
                                               const ScriptExportOptions& options);

}  // namespace quantd::torchscript

#endif  // QUANTD_WORKER_TORCHSCRIPT_SCRIPT_EXPORT_H_
