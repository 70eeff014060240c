// The onnx export of a TorchScript model: its quantized forward as an ONNX
// QDQ graph that onnxruntime runs without quantd (docs/vision_models.md,
// "The onnx export"):
//   model.onnx               the graph;
//   quantization_config.json the reference toolkit's config that was applied;
//   onnx_export.json         how each layer's weight and activations were
//                            written (codes + DequantizeLinear, or the
//                            fake-quantized float values).
//
// forward is inlined and walked on example inputs (a batch of the job's
// data): values that do not depend on the inputs (attributes, constants,
// shapes other than the batch, the conditions of prim::If) are computed, the
// rest is translated operator by operator (Conv, ConvTranspose, Gemm /
// MatMul, activations, pools, BatchNormalization, Reshape, Concat, Resize,
// ...; docs/vision_models.md lists them). Anything else is refused naming
// the operator.
// The batch dimension of the inputs and outputs stays symbolic; other
// dimensions are the example's.
//
// Quantized weights: 8- and 4-bit integer codes (int4 / uint4 at opset 21),
// FP8 codes (opset 19) with DequantizeLinear per tensor, per channel (its
// axis in the weight's layout: 0 for Conv2d and Linear, 1 for
// ConvTranspose2d by default) or per group (block_size, opset 21); float16 /
// bfloat16 as a Cast. Types ONNX has no element type for (MX, int2 / int3 /
// 5..7-bit integers, float zero points) are written as their fake-quantized
// float values: the same model, not smaller; onnx_export.json and the job's
// log say which. Static per-tensor activation quantizers become
// QuantizeLinear + DequantizeLinear (FP8: a Cast pair); dynamic, per-channel,
// per-group and MX activation quantizers are refused (CheckScriptOnnxQuantizers).
#ifndef QUANTD_WORKER_TORCHSCRIPT_SCRIPT_ONNX_EXPORT_H_
#define QUANTD_WORKER_TORCHSCRIPT_SCRIPT_ONNX_EXPORT_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/config/quant_config.h"
#include "worker/export/artifact.h"
#include "worker/torchscript/script_quantizer.h"

namespace quantd::torchscript {

struct ScriptOnnxExportOptions {
  std::string output_dir;
  bool overwrite = false;
  exporter::OutputOwner output_owner;
  const config::QuantConfig* quant_config = nullptr;
  // forward's arguments for one small batch (the job's data): the walk's
  // shapes and the graph inputs' types.
  std::vector<at::Tensor> example_inputs;
};

struct ScriptOnnxExportResult {
  exporter::Artifact artifact;
  int64_t opset = 0;
  // Layers whose weight went out as fake-quantized float values, with why.
  std::vector<std::string> float_weights;
};

// INVALID_ARGUMENT naming every layer whose activation quantizer ONNX QDQ
// cannot express (dynamic, per channel or group, MX, casts, other rounding).
Status CheckScriptOnnxQuantizers(const ScriptQuantizer& quantizer);

// Walks forward on `example_inputs` without writing anything: INVALID_ARGUMENT
// "onnx cannot express <op> (in <module>)" for the first operator the export
// does not translate, or for control flow that depends on the inputs. For a
// job before calibration (activation quantizers are then left out).
Status CheckScriptOnnxGraph(ScriptQuantizer& quantizer,
                            const std::vector<at::Tensor>& example_inputs);

// Writes the artifact (atomically, exporter::StagedDirectory) and describes
// it. Puts the fake-quantized weights into the module; the module's graphs
// are not changed.
StatusOr<ScriptOnnxExportResult> ExportScriptOnnx(ScriptQuantizer& quantizer,
                                                  const ScriptOnnxExportOptions& options);

}  // namespace quantd::torchscript

#endif  // QUANTD_WORKER_TORCHSCRIPT_SCRIPT_ONNX_EXPORT_H_
