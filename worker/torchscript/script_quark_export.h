// The hf_quark export of a TorchScript model: its weights in the reference
// toolkit's real-quantized layout (worker/export/hf/quark_tensors.h), laid
// out as the toolkit's parameter export of a non-Transformers model
// (docs/vision_models.md, "hf_quark"):
//   model.safetensors         every parameter and buffer of the module by
//                             qualified name (batch norms folded as the job
//                             ran); each quantized layer's weight as codes
//                             with weight_scale / weight_zero_point, its
//                             static activation quantizers as input_scale /
//                             input_zero_point, output_scale / ...;
//   model.json                the module tree: each leaf module's name,
//                             type, tensor names and quantization specs
//                             (weight_quant, input_quant, output_quant);
//   quantization_config.json  the job's config with quant_method "quark" and
//                             the export section (weight_format
//                             real_quantized, pack_method reorder).
// The reference packs only 2-D weights, so a convolution's weight keeps its
// own shape: it must be unpacked (int8 / uint8, FP8, float16 / bfloat16),
// per tensor or per output channel (axis 0); CheckScriptQuarkExport names
// every layer that is not.
#ifndef QUANTD_WORKER_TORCHSCRIPT_SCRIPT_QUARK_EXPORT_H_
#define QUANTD_WORKER_TORCHSCRIPT_SCRIPT_QUARK_EXPORT_H_

#include "worker/common/status.h"
#include "worker/export/artifact.h"
#include "worker/torchscript/script_export.h"
#include "worker/torchscript/script_quantizer.h"

namespace quantd::torchscript {

// INVALID_ARGUMENT naming every layer whose weight or activation quantizer
// has no hf_quark layout.
Status CheckScriptQuarkExport(const ScriptQuantizer& quantizer);

// Writes the artifact (atomically, exporter::StagedDirectory) and describes
// it. Puts the fake-quantized weights into the quantizer's module.
StatusOr<exporter::Artifact> ExportScriptQuark(ScriptQuantizer& quantizer,
                                               const ScriptExportOptions& options);

}  // namespace quantd::torchscript

#endif  // QUANTD_WORKER_TORCHSCRIPT_SCRIPT_QUARK_EXPORT_H_
