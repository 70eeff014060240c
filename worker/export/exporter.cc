#include "worker/export/exporter.h"

#include <algorithm>

#include "worker/export/compressed_tensors/ct_export.h"
#include "worker/export/export_support.h"
#include "worker/export/gguf/gguf.h"
#include "worker/export/hf/hf_quark.h"
#include "worker/export/onnx/onnx_qdq.h"
#include "worker/models/layer_shapes.h"

namespace quantd::exporter {

StatusOr<ExportFormat> ParseExportFormat(std::string_view name) {
  for (ExportFormat f :
       {ExportFormat::kHfFakeQuantized, ExportFormat::kHfQuark, ExportFormat::kGguf,
        ExportFormat::kOnnxQdq, ExportFormat::kCompressedTensors, ExportFormat::kTorchScript})
    if (name == ExportFormatName(f)) return f;
  return InvalidArgumentError(
      "unknown export format \"" + std::string(name) +
      "\" (one of hf_fake_quantized, hf_quark, gguf, onnx_qdq, compressed_tensors, "
      "torchscript)");
}

namespace {

std::vector<ServedLinear> ServedLinearsOfModel(const QuantizedModel& model) {
  std::vector<config::LayerInfo> infos;
  for (const auto& l : models::ListLinearLayers(model.config()))
    infos.push_back({l.name, l.type, l.out_features, l.in_features});
  return ServedLinearsOf(model.quant_config(), infos);
}

// What every format's exporter takes: where, whether to replace, and who.
template <typename FormatOptions>
FormatOptions CommonOptions(const ExportOptions& options) {
  FormatOptions o;
  o.output_dir = options.output_dir;
  o.overwrite = options.overwrite;
  o.output_owner = options.output_owner;
  return o;
}

// The format's exporter with the options that apply to it.
StatusOr<ExportResult> WriteExport(const QuantizedModel& model, ExportFormat format,
                                   const ExportOptions& options,
                                   const std::vector<ExportLayerSpecs>& specs,
                                   const ExportProgress& progress) {
  ExportResult result;
  switch (format) {
    case ExportFormat::kHfFakeQuantized: {
      auto o = CommonOptions<HfFakeQuantExportOptions>(options);
      QD_ASSIGN_OR_RETURN(result.artifact, ExportHfFakeQuantized(model, o, progress));
      return result;
    }
    case ExportFormat::kHfQuark: {
      auto o = CommonOptions<HfQuarkExportOptions>(options);
      o.max_shard_bytes = options.max_shard_bytes;
      o.min_kv_scale = options.min_kv_scale;
      QD_ASSIGN_OR_RETURN(result.artifact, ExportHfQuark(model, o, progress));
      return result;
    }
    case ExportFormat::kGguf: {
      auto o = CommonOptions<GgufModelExportOptions>(options);
      o.model_name = options.model_name;
      o.weight_type = options.gguf_weight_type.value_or(DefaultGgufWeightType(specs));
      o.fallback_type = options.gguf_fallback_type;
      o.float_type = options.gguf_float_type;
      o.recipe = options.gguf_recipe;
      o.imatrix_info = options.gguf_imatrix_info;
      QD_ASSIGN_OR_RETURN(GgufExportResult r, ExportGguf(model, o, progress));
      result.artifact = std::move(r.artifact);
      result.notes = std::move(r.notes);
      result.info = std::move(r.tensor_types);
      return result;
    }
    case ExportFormat::kOnnxQdq: {
      auto o = CommonOptions<OnnxQdqExportOptions>(options);
      o.max_sequence_length = options.onnx_max_sequence_length;
      o.external_data_above_bytes = options.onnx_external_data_above_bytes;
      QD_ASSIGN_OR_RETURN(OnnxQdqExportResult r, ExportOnnxQdq(model, o, progress));
      result.artifact = std::move(r.artifact);
      return result;
    }
    case ExportFormat::kCompressedTensors: {
      auto o = CommonOptions<CompressedTensorsExportOptions>(options);
      o.max_shard_bytes = options.max_shard_bytes;
      o.min_kv_scale = options.min_kv_scale;
      QD_ASSIGN_OR_RETURN(result.artifact, ExportCompressedTensors(model, o, progress));
      return result;
    }
    case ExportFormat::kTorchScript:
      break;  // TorchScript jobs export themselves (worker/torchscript)
  }
  return InvalidArgumentError("unknown export format");
}

}  // namespace

StatusOr<ExportResult> ExportModel(const QuantizedModel& model, ExportFormat format,
                                   const ExportOptions& options, const ExportProgress& progress) {
  const std::vector<ExportLayerSpecs> specs = ExportLayerSpecsOf(model);
  QD_RETURN_IF_ERROR(CheckExportSupport(format, specs));
  const std::vector<ServedLinear> served = ServedLinearsOfModel(model);
  const std::string architecture_problem = VllmArchitectureProblem(model.config());
  if (options.target == ServingTarget::kVllm && !architecture_problem.empty())
    return Status(StatusCode::kFailedPrecondition, "target vllm: " + architecture_problem,
                  "NOT_SERVABLE");
  if (options.target == ServingTarget::kVllm) {
    const std::vector<std::string> refusals = VllmRefusals(format, served);
    if (!refusals.empty())
      return Status(StatusCode::kFailedPrecondition,
                    std::string("target vllm: vLLM cannot serve this ") +
                        ExportFormatName(format) + " export: " + refusals.front() +
                        (refusals.size() > 1
                             ? " (and " + std::to_string(refusals.size() - 1) + " more problems)"
                             : ""),
                    "NOT_SERVABLE");
  }
  StatusOr<ExportResult> written = WriteExport(model, format, options, specs, progress);
  if (written.ok()) {
    written->artifact.consumers = ArtifactConsumers(format, served);
    auto& c = written->artifact.consumers;
    if (!architecture_problem.empty()) c.erase(std::remove(c.begin(), c.end(), "vllm"), c.end());
  }
  return written;
}

}  // namespace quantd::exporter
