#include "worker/export/hf/hf_quark.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "worker/common/cancellation.h"
#include "worker/config/quark_json.h"
#include "worker/export/export_support.h"
#include "worker/export/hf/hf_files.h"
#include "worker/export/hf/quark_tensors.h"
#include "worker/io/safetensors/tensor_io.h"
#include "worker/models/layer_shapes.h"

namespace quantd::exporter {

namespace fs = std::filesystem;
using nlohmann::json;
using quant::QuantSpec;

namespace {

Status Unsupported(const std::string& msg) {
  return Status(StatusCode::kUnimplemented, "hf_quark: " + msg, "FEATURE_NOT_BUILT");
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The module a tensor belongs to ("a.b.weight" -> "a.b"), or "" for none.
std::string ModuleOf(const std::string& tensor, const std::string& suffix) {
  return EndsWith(tensor, suffix) ? tensor.substr(0, tensor.size() - suffix.size()) : "";
}

bool IsKvProjection(const std::string& module) {
  return EndsWith(module, ".k_proj") || EndsWith(module, ".v_proj");
}

Status CheckLayers(const QuantizedModel& model) {
  QD_RETURN_IF_ERROR(CheckExportSupport(ExportFormat::kHfQuark, ExportLayerSpecsOf(model)));
  std::set<std::string> conv1d;
  for (const auto& l : models::ListLinearLayers(model.config()))
    if (l.transposed_in_checkpoint) conv1d.insert(l.name);
  for (const QuantizedLayer& layer : model.layers()) {
    if (layer.weight && conv1d.count(layer.name))
      return Unsupported(layer.name + ": GPT-2 Conv1D weights have no quark layout");
    for (const auto* a : {&layer.input, &layer.output}) {
      if (*a && !(*a)->spec.is_dynamic &&
          (!(*a)->static_qparams || !(*a)->static_qparams->scale.defined()))
        return InternalError("hf_quark: " + layer.name +
                             " has a static activation quantizer without a calibrated scale");
    }
  }
  return OkStatus();
}

Status Write(ShardedSafetensorsWriter& w, const std::string& name, const StoredTensor& t) {
  try {
    at::Tensor c = t.tensor.to(at::kCPU).contiguous();
    if (io::SafetensorsDtypeSize(t.dtype) != static_cast<int>(c.element_size()))
      return InternalError("hf_quark: " + name + " has " + std::to_string(c.element_size()) +
                           "-byte elements, not " + io::SafetensorsDtypeName(t.dtype));
    return w.Add(name, t.dtype, c.sizes().vec(), c.data_ptr(),
                 static_cast<uint64_t>(c.numel()) * c.element_size());
  } catch (const c10::Error& e) {
    return InternalError("hf_quark: writing " + name + ": " + e.what_without_backtrace());
  }
}

// input_scale / output_scale (+ zero point for integers) of one quantizer.
Status WriteActivation(ShardedSafetensorsWriter& w, const std::string& prefix,
                       const ActivationQuantizer& a, double min_scale) {
  at::Tensor scale = a.static_qparams->scale.to(at::kFloat).reshape({});
  if (min_scale > 0) scale = at::clamp_min(scale, min_scale);
  QD_RETURN_IF_ERROR(Write(w, prefix + "_scale", {scale, io::SafetensorsDtype::kF32}));
  if (!quant::IsIntType(a.spec.dtype)) return OkStatus();
  at::Tensor zp = a.static_qparams->zero_point.defined() ? a.static_qparams->zero_point.reshape({})
                                                         : at::zeros({}, at::kInt);
  if (zp.is_floating_point())
    return Write(w, prefix + "_zero_point", {zp.to(at::kFloat), io::SafetensorsDtype::kF32});
  if (quant::BitWidth(a.spec.dtype) <= 4)
    return Write(w, prefix + "_zero_point", {zp.to(at::kInt), io::SafetensorsDtype::kI32});
  const bool is_signed = quant::IsSignedInt(a.spec.dtype);
  return Write(w, prefix + "_zero_point",
               {zp.to(is_signed ? at::kChar : at::kByte),
                is_signed ? io::SafetensorsDtype::kI8 : io::SafetensorsDtype::kU8});
}

bool HasKvCache(const QuantizedModel& model) {
  for (const QuantizedLayer& layer : model.layers())
    if (IsKvProjection(layer.name) && layer.output && !layer.output->spec.is_dynamic) return true;
  return false;
}

json QuarkQuantizationConfig(const QuantizedModel& model, const HfQuarkExportOptions& opt) {
  json q = config::QuarkJsonForExport(model.quant_config(), "real_quantized");
  q["quant_method"] = "quark";
  json kv = json::array();
  if (HasKvCache(model)) kv = {"*k_proj", "*v_proj"};
  q["export"] = {{"kv_cache_group", kv},
                 {"min_kv_scale", opt.min_kv_scale},
                 {"pack_method", "reorder"},
                 {"weight_format", "real_quantized"},
                 {"weight_merge_groups", nullptr}};
  return q;
}

}  // namespace

StatusOr<Artifact> ExportHfQuark(const QuantizedModel& model, const HfQuarkExportOptions& opt,
                                 const ExportProgress& progress) {
  QD_RETURN_IF_ERROR(CheckLayers(model));
  const json quantization_config = QuarkQuantizationConfig(model, opt);
  QD_ASSIGN_OR_RETURN(StagedDirectory staged,
                      StagedDirectory::Create(opt.output_dir, opt.overwrite, opt.output_owner));
  const std::string dir = staged.staging_path();
  ShardedSafetensorsWriter writer(dir, opt.max_shard_bytes);

  const io::TensorSource& original = model.original();
  const std::vector<std::string> names = original.Names();
  int done = 0;
  for (const std::string& name : names) {
    if (StopRequested()) return CancelledStatus("exporting " + name);
    const io::TensorInfo* info = original.Find(name);
    if (info == nullptr) return InternalError("hf_quark: " + name + " vanished from the input");
    const std::string module = ModuleOf(name, ".weight");
    const QuantizedLayer* layer = module.empty() ? nullptr : model.FindLayer(module);
    QD_ASSIGN_OR_RETURN(at::Tensor value, model.Load(name));
    if (value.sizes().vec() != info->shape)
      return InternalError("hf_quark: " + name + " changed shape after quantization");
    if (layer != nullptr && layer->weight) {
      QD_ASSIGN_OR_RETURN(quant::QParams qp, model.WeightQParams(module));
      auto stored = EncodeQuarkWeight(value, *layer->weight, qp);
      if (!stored.ok()) return Status(stored.status()).Prepend(module + ": ");
      QD_RETURN_IF_ERROR(Write(writer, name, stored->weight));
      if (stored->scale.defined())
        QD_RETURN_IF_ERROR(Write(writer, module + ".weight_scale", stored->scale));
      if (stored->zero_point.defined())
        QD_RETURN_IF_ERROR(Write(writer, module + ".weight_zero_point", stored->zero_point));
    } else {
      auto st = io::ParseSafetensorsDtype(info->dtype);
      if (!st) return DataLossError("hf_quark: " + name + " has unknown dtype " + info->dtype);
      QD_ASSIGN_OR_RETURN(at::ScalarType scalar, io::StorageScalarType(*st));
      at::Tensor t = value;
      try {
        t = value.to(scalar);
      } catch (const c10::Error& e) {
        return InternalError("hf_quark: " + name + ": " + e.what_without_backtrace());
      }
      QD_RETURN_IF_ERROR(Write(writer, name, {t, *st}));
    }
    if (layer != nullptr) {
      if (layer->input && !layer->input->spec.is_dynamic)
        QD_RETURN_IF_ERROR(WriteActivation(writer, module + ".input", *layer->input, 0.0));
      if (layer->output && !layer->output->spec.is_dynamic) {
        const double floor = IsKvProjection(module) ? opt.min_kv_scale : 0.0;
        QD_RETURN_IF_ERROR(WriteActivation(writer, module + ".output", *layer->output, floor));
      }
    }
    if (progress) progress(++done, static_cast<int>(names.size()));
  }
  QD_ASSIGN_OR_RETURN(std::string main_file, writer.Finish());
  QD_RETURN_IF_ERROR(WriteHfConfig(model.model_dir(), dir, quantization_config,
                                   model.config().tie_word_embeddings));
  QD_RETURN_IF_ERROR(CopyHfSideFiles(model.model_dir(), dir));
  QD_RETURN_IF_ERROR(staged.Commit());
  return DescribeArtifact(ExportFormat::kHfQuark, staged, main_file);
}

StatusOr<Artifact> ExportHfFakeQuantized(const QuantizedModel& model,
                                         const HfFakeQuantExportOptions& options,
                                         const ExportProgress& progress) {
  HfFakeQuantExportOptions o = options;
  if (o.model_dir.empty()) o.model_dir = model.model_dir();
  if (o.quantization_config.is_null())
    o.quantization_config = config::QuarkJsonForExport(model.quant_config(), "fake_quantized");
  if (!o.tie_word_embeddings) o.tie_word_embeddings = model.config().tie_word_embeddings;
  return ExportHfFakeQuantized(
      model.original(), [&model](const std::string& name) { return model.Load(name); }, o,
      progress);
}

}  // namespace quantd::exporter
