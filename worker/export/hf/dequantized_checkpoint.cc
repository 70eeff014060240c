#include "worker/export/hf/dequantized_checkpoint.h"

#include <c10/util/Exception.h>

#include <filesystem>

#include "worker/common/bounded_json.h"
#include "worker/export/hf/hf_files.h"
#include "worker/export/module_names.h"
#include "worker/quant/fake_quant.h"

namespace quantd::exporter {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string DequantizedDtype(const models::ModelConfig& config) {
  if (config.torch_dtype == "bfloat16") return "BF16";
  if (config.torch_dtype == "float16") return "F16";
  return "F32";
}

}  // namespace

class DequantizedCheckpoint::Source final : public io::TensorSource {
 public:
  explicit Source(const DequantizedCheckpoint* owner) : owner_(owner) {}
  std::vector<std::string> Names() const override { return owner_->Names(); }
  const io::TensorInfo* Find(const std::string& name) const override { return owner_->Find(name); }
  StatusOr<at::Tensor> Load(const std::string& name, at::ScalarType dtype) const override {
    return owner_->LoadTensor(name, dtype);
  }
  std::string Description() const override { return "quantized checkpoint " + owner_->dir_; }

 private:
  const DequantizedCheckpoint* owner_;
};

DequantizedCheckpoint::DequantizedCheckpoint() : source_(std::make_unique<Source>(this)) {}
DequantizedCheckpoint::~DequantizedCheckpoint() = default;

StatusOr<json> DequantizedCheckpoint::OpenDir(const std::string& dir,
                                              const std::string& quant_method) {
  dir_ = dir;
  const std::string path = (fs::path(dir) / "config.json").string();
  QD_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  QD_ASSIGN_OR_RETURN(config_, models::ParseModelConfig(text, path));
  // ParseModelConfig accepted the same text within the same bounds.
  QD_ASSIGN_OR_RETURN(json cfg, ParseBoundedJson(text, JsonBounds{json_limits::kModelConfig}, path,
                                                 StatusCode::kFailedPrecondition));
  if (!cfg.is_object() || !cfg.contains("quantization_config") ||
      !cfg["quantization_config"].is_object() ||
      cfg["quantization_config"].value("quant_method", "") != quant_method)
    return FailedPreconditionError(path + " has no quantization_config with quant_method \"" +
                                   quant_method + "\"");
  QD_ASSIGN_OR_RETURN(stored_, io::SafetensorsSource::Open(dir));
  return cfg["quantization_config"];
}

void DequantizedCheckpoint::AddLayer(QuantizedLayer layer, const models::LinearLayerInfo& info,
                                     bool stored_weight) {
  if (stored_weight) weight_shapes_[info.name] = {info.out_features, info.in_features};
  layers_.push_back(std::move(layer));
}

void DequantizedCheckpoint::IndexTensors(
    const std::function<bool(const std::string&)>& is_parameter) {
  for (const std::string& name : stored_->Names()) {
    if (is_parameter(name)) continue;
    if (EndsWith(name, ".weight") && weight_shapes_.count(name.substr(0, name.size() - 7)))
      continue;
    infos_[name] = *stored_->Find(name);
  }
  // A stored weight is served as float [out, in]; its size is what the
  // checkpoint spends on it, codes and parameters.
  for (const auto& [module, shape] : weight_shapes_) {
    io::TensorInfo info;
    info.name = module + ".weight";
    info.shape = shape;
    info.dtype = DequantizedDtype(config_);
    for (const char* part : {".weight", ".weight_packed", ".weight_shape", ".weight_scale",
                             ".weight_zero_point", ".weight_g_idx"}) {
      const io::TensorInfo* p = stored_->Find(module + part);
      if (p == nullptr) continue;
      info.nbytes += p->nbytes;
      if (info.file.empty()) info.file = p->file;
    }
    infos_[info.name] = std::move(info);
  }
}

const QuantizedLayer* DequantizedCheckpoint::FindLayer(const std::string& module) const {
  for (const auto& l : layers_)
    if (l.name == module) return &l;
  return nullptr;
}

StatusOr<quant::QParams> DequantizedCheckpoint::WeightQParams(const std::string& module) const {
  const QuantizedLayer* layer = FindLayer(module);
  auto shape = weight_shapes_.find(module);
  if (layer == nullptr || !layer->weight || shape == weight_shapes_.end())
    return NotFoundError(module + " has no quantized weight in " + dir_);
  QD_ASSIGN_OR_RETURN(quant::QuantizedTensor q,
                      DecodeWeight(module, *layer->weight, shape->second));
  return q.qparams;
}

std::vector<std::string> DequantizedCheckpoint::Names() const {
  std::vector<std::string> out;
  for (const auto& [name, info] : infos_) out.push_back(name);
  return out;
}

const io::TensorInfo* DequantizedCheckpoint::Find(const std::string& name) const {
  auto it = infos_.find(name);
  return it == infos_.end() ? nullptr : &it->second;
}

StatusOr<at::Tensor> DequantizedCheckpoint::DequantizeWeight(
    const std::string& module, const quant::QuantSpec& spec,
    const std::vector<int64_t>& shape) const {
  QD_ASSIGN_OR_RETURN(quant::QuantizedTensor q, DecodeWeight(module, spec, shape));
  return quant::Dequantize(q, spec, at::kFloat);
}

StatusOr<at::Tensor> DequantizedCheckpoint::LoadTensor(const std::string& name,
                                                       at::ScalarType dtype) const {
  if (Find(name) == nullptr)
    return NotFoundError("tensor " + name + " not found in quantized checkpoint " + dir_);
  const std::string module = EndsWith(name, ".weight") ? name.substr(0, name.size() - 7) : "";
  auto shape = weight_shapes_.find(module);
  if (shape == weight_shapes_.end()) return stored_->Load(name, dtype);
  QD_ASSIGN_OR_RETURN(at::Tensor v,
                      DequantizeWeight(module, *FindLayer(module)->weight, shape->second));
  try {
    return v.to(dtype);
  } catch (const c10::Error& e) {
    return InternalError(name + ": " + e.what_without_backtrace());
  }
}

StatusOr<StoredTensor> DequantizedCheckpoint::Stored(const std::string& name) const {
  const io::SafetensorsEntry* e = stored_->FindEntry(name);
  if (e == nullptr) return StoredTensor{};
  QD_ASSIGN_OR_RETURN(at::Tensor t, stored_->LoadStored(name));
  return StoredTensor{t, e->dtype};
}

StatusOr<std::optional<ActivationQuantizer>> DequantizedCheckpoint::StaticActivation(
    const std::string& what, const std::optional<quant::QuantSpec>& spec,
    const std::string& scale_name, const std::string& zero_point_name,
    int64_t zero_point_offset) const {
  if (!spec) return std::optional<ActivationQuantizer>();
  ActivationQuantizer a{*spec, std::nullopt};
  if (spec->is_dynamic) return std::optional<ActivationQuantizer>(a);
  if (spec->qscheme != quant::QScheme::kPerTensor)
    return Status(StatusCode::kUnimplemented,
                  dir_ + ": " + what + ": static activation quantizers must be per_tensor",
                  "FEATURE_NOT_BUILT");
  const io::TensorInfo* scale_info = stored_->Find(scale_name);
  if (scale_info == nullptr)
    return DataLossError(dir_ + ": " + scale_name + " is missing for a static quantizer");
  if (scale_info->shape.size() > 1 || (scale_info->shape.size() == 1 && scale_info->shape[0] != 1))
    return DataLossError(dir_ + ": " + scale_name + " holds more than one scale");
  quant::QParams qp;
  QD_ASSIGN_OR_RETURN(at::Tensor scale, stored_->Load(scale_name, at::kFloat));
  qp.scale = scale.reshape({});
  if (quant::IsIntType(spec->dtype)) {
    const bool float_zp = spec->zero_point_type == quant::ZeroPointType::kFloat32;
    if (stored_->Find(zero_point_name) != nullptr) {
      QD_ASSIGN_OR_RETURN(at::Tensor zp,
                          stored_->Load(zero_point_name, float_zp ? at::kFloat : at::kInt));
      if (zp.numel() != 1)
        return DataLossError(dir_ + ": " + zero_point_name + " holds more than one zero point");
      qp.zero_point = zp.reshape({}) + zero_point_offset;
    } else {
      qp.zero_point = at::full({}, zero_point_offset, at::kInt);
    }
  }
  a.static_qparams = qp;
  return std::optional<ActivationQuantizer>(a);
}

}  // namespace quantd::exporter
