#include "worker/export/hf/hf_quark_import.h"

#include <c10/util/Exception.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "worker/common/bounded_json.h"
#include "worker/config/quark_json.h"
#include "worker/export/hf/hf_files.h"
#include "worker/export/module_names.h"
#include "worker/export/hf/quark_config.h"
#include "worker/export/hf/quark_tensors.h"
#include "worker/io/safetensors/safetensors_source.h"
#include "worker/models/layer_shapes.h"
#include "worker/quant/fake_quant.h"

namespace quantd::exporter {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Tensors that hold quantization parameters, not model weights.
bool IsQuarkParameter(const std::string& name) {
  for (const char* s : {".weight_scale", ".weight_zero_point", ".input_scale", ".input_zero_point",
                        ".output_scale", ".output_zero_point", ".k_scale", ".v_scale"})
    if (EndsWith(name, s)) return true;
  return false;
}

std::string DequantizedDtype(const models::ModelConfig& config) {
  if (config.torch_dtype == "bfloat16") return "BF16";
  if (config.torch_dtype == "float16") return "F16";
  return "F32";
}

class QuarkCheckpoint;

// The dequantized checkpoint under Hugging Face names.
class DequantizedSource final : public io::TensorSource {
 public:
  explicit DequantizedSource(const QuarkCheckpoint* owner) : owner_(owner) {}
  std::vector<std::string> Names() const override;
  const io::TensorInfo* Find(const std::string& name) const override;
  StatusOr<at::Tensor> Load(const std::string& name, at::ScalarType dtype) const override;
  std::string Description() const override;

 private:
  const QuarkCheckpoint* owner_;
};

class QuarkCheckpoint final : public QuantizedModel {
 public:
  Status Open(const std::string& dir) {
    dir_ = dir;
    QD_ASSIGN_OR_RETURN(std::string text, ReadTextFile((fs::path(dir) / "config.json").string()));
    QD_ASSIGN_OR_RETURN(config_, models::ParseModelConfig(text, dir + "/config.json"));
    // ParseModelConfig accepted the same text within the same bounds.
    QD_ASSIGN_OR_RETURN(json cfg, ParseBoundedJson(text, JsonBounds{json_limits::kModelConfig},
                                                   dir + "/config.json",
                                                   StatusCode::kFailedPrecondition));
    if (!cfg.is_object() || !cfg.contains("quantization_config") ||
        !cfg["quantization_config"].is_object() ||
        cfg["quantization_config"].value("quant_method", "") != "quark")
      return FailedPreconditionError(dir +
                                     "/config.json has no quantization_config with quant_method "
                                     "\"quark\"");
    const std::string quant_json = cfg["quantization_config"].dump();
    QD_ASSIGN_OR_RETURN(QuarkConfig quark, QuarkConfig::Parse(quant_json));
    QD_ASSIGN_OR_RETURN(quant_config_,
                        config::ParseQuarkJson(quant_json, dir + "/config.json quantization_config."));
    const QuarkExportSection& ex = quark.export_section();
    if (ex.weight_format != "real_quantized" || ex.pack_method != "reorder")
      return FailedPreconditionError(dir + ": export weight_format '" + ex.weight_format +
                                     "' / pack_method '" + ex.pack_method +
                                     "' is not supported (real_quantized / reorder is)");
    QD_ASSIGN_OR_RETURN(stored_, io::SafetensorsSource::Open(dir));
    source_ = std::make_unique<DequantizedSource>(this);

    for (const models::LinearLayerInfo& info : models::ListLinearLayers(config_)) {
      const std::string weight_name = info.name + ".weight";
      if (stored_->Find(weight_name) == nullptr) continue;  // e.g. a tied lm_head
      QuarkLayerSpecs specs = quark.Resolve(info.name, info.type);
      if (!specs.quantized()) continue;
      if (specs.bias)
        return Status(StatusCode::kUnimplemented,
                      dir + ": " + info.name + " has a quantized bias, which is not imported",
                      "FEATURE_NOT_BUILT");
      QuantizedLayer layer;
      layer.name = info.name;
      layer.type = info.type;
      layer.weight = specs.weight;
      if (specs.weight) {
        Status s = CheckQuarkWeightSpec(*specs.weight);
        if (!s.ok()) return s.Prepend(info.name + ": ");
        weight_shapes_[weight_name] = {info.out_features, info.in_features};
        weight_specs_[weight_name] = *specs.weight;
      }
      QD_ASSIGN_OR_RETURN(layer.input, Activation(info.name + ".input", specs.input));
      QD_ASSIGN_OR_RETURN(layer.output, Activation(info.name + ".output", specs.output));
      layers_.push_back(std::move(layer));
    }
    for (const std::string& name : stored_->Names()) {
      if (IsQuarkParameter(name)) continue;
      io::TensorInfo info = *stored_->Find(name);
      if (auto it = weight_shapes_.find(name); it != weight_shapes_.end()) {
        info.shape = it->second;
        info.dtype = DequantizedDtype(config_);
        for (const char* aux : {"_scale", "_zero_point"})
          if (const io::TensorInfo* p = stored_->Find(name + aux)) info.nbytes += p->nbytes;
      }
      infos_[name] = std::move(info);
    }
    return OkStatus();
  }

  const std::string& model_dir() const override { return dir_; }
  const models::ModelConfig& config() const override { return config_; }
  const io::TensorSource& original() const override { return *source_; }
  StatusOr<at::Tensor> Load(const std::string& name) const override {
    return source_->Load(name, at::kFloat);
  }
  const std::vector<QuantizedLayer>& layers() const override { return layers_; }
  const QuantizedLayer* FindLayer(const std::string& module) const override {
    for (const auto& l : layers_)
      if (l.name == module) return &l;
    return nullptr;
  }
  StatusOr<quant::QParams> WeightQParams(const std::string& module) const override {
    QD_ASSIGN_OR_RETURN(quant::QuantizedTensor q, Decode(module + ".weight"));
    return q.qparams;
  }
  const config::QuantConfig& quant_config() const override { return quant_config_; }

  // Names, infos and loads for DequantizedSource.
  std::vector<std::string> Names() const {
    std::vector<std::string> out;
    for (const auto& [name, info] : infos_) out.push_back(name);
    return out;
  }
  const io::TensorInfo* Find(const std::string& name) const {
    auto it = infos_.find(name);
    return it == infos_.end() ? nullptr : &it->second;
  }
  StatusOr<at::Tensor> LoadTensor(const std::string& name, at::ScalarType dtype) const {
    if (Find(name) == nullptr)
      return NotFoundError("tensor " + name + " not found in quark checkpoint " + dir_);
    auto spec = weight_specs_.find(name);
    if (spec == weight_specs_.end()) return stored_->Load(name, dtype);
    QD_ASSIGN_OR_RETURN(quant::QuantizedTensor q, Decode(name));
    QD_ASSIGN_OR_RETURN(at::Tensor v, quant::Dequantize(q, spec->second, at::kFloat));
    try {
      return v.to(dtype);
    } catch (const c10::Error& e) {
      return InternalError(name + ": " + e.what_without_backtrace());
    }
  }

 private:
  StatusOr<StoredTensor> Stored(const std::string& name) const {
    const io::SafetensorsEntry* e = stored_->FindEntry(name);
    if (e == nullptr) return StoredTensor{};
    QD_ASSIGN_OR_RETURN(at::Tensor t, stored_->LoadStored(name));
    return StoredTensor{t, e->dtype};
  }

  StatusOr<quant::QuantizedTensor> Decode(const std::string& weight_name) const {
    auto spec = weight_specs_.find(weight_name);
    if (spec == weight_specs_.end())
      return NotFoundError(weight_name + " is not a quantized weight of " + dir_);
    const std::string module = weight_name.substr(0, weight_name.size() - 7);
    QuarkStoredWeight w;
    QD_ASSIGN_OR_RETURN(w.weight, Stored(weight_name));
    QD_ASSIGN_OR_RETURN(w.scale, Stored(module + ".weight_scale"));
    QD_ASSIGN_OR_RETURN(w.zero_point, Stored(module + ".weight_zero_point"));
    auto q = DecodeQuarkWeight(w, spec->second, weight_shapes_.at(weight_name));
    if (!q.ok()) return Status(q.status()).Prepend(dir_ + ": " + module + ": ");
    return q;
  }

  // A static quantizer's parameters from <prefix>_scale / _zero_point.
  StatusOr<std::optional<ActivationQuantizer>> Activation(
      const std::string& prefix, const std::optional<quant::QuantSpec>& spec) const {
    if (!spec) return std::optional<ActivationQuantizer>();
    ActivationQuantizer a{*spec, std::nullopt};
    if (spec->is_dynamic) return std::optional<ActivationQuantizer>(a);
    if (spec->qscheme != quant::QScheme::kPerTensor)
      return Status(StatusCode::kUnimplemented,
                    dir_ + ": " + prefix + ": static activation quantizers must be per_tensor",
                    "FEATURE_NOT_BUILT");
    if (stored_->Find(prefix + "_scale") == nullptr)
      return DataLossError(dir_ + ": " + prefix + "_scale is missing for a static quantizer");
    quant::QParams qp;
    QD_ASSIGN_OR_RETURN(at::Tensor scale, stored_->Load(prefix + "_scale", at::kFloat));
    qp.scale = scale.reshape({});
    if (quant::IsIntType(spec->dtype)) {
      if (stored_->Find(prefix + "_zero_point") != nullptr) {
        const bool float_zp = spec->zero_point_type == quant::ZeroPointType::kFloat32;
        QD_ASSIGN_OR_RETURN(
            at::Tensor zp, stored_->Load(prefix + "_zero_point", float_zp ? at::kFloat : at::kInt));
        qp.zero_point = zp.reshape({});
      } else {
        qp.zero_point = at::zeros({}, at::kInt);
      }
    }
    a.static_qparams = qp;
    return std::optional<ActivationQuantizer>(a);
  }

  std::string dir_;
  models::ModelConfig config_;
  config::QuantConfig quant_config_;
  std::unique_ptr<io::SafetensorsSource> stored_;
  std::unique_ptr<DequantizedSource> source_;
  std::vector<QuantizedLayer> layers_;
  std::map<std::string, std::vector<int64_t>> weight_shapes_;
  std::map<std::string, quant::QuantSpec> weight_specs_;
  std::map<std::string, io::TensorInfo> infos_;
};

std::vector<std::string> DequantizedSource::Names() const { return owner_->Names(); }
const io::TensorInfo* DequantizedSource::Find(const std::string& name) const {
  return owner_->Find(name);
}
StatusOr<at::Tensor> DequantizedSource::Load(const std::string& name, at::ScalarType dtype) const {
  return owner_->LoadTensor(name, dtype);
}
std::string DequantizedSource::Description() const {
  return "quark checkpoint " + owner_->model_dir();
}

}  // namespace

StatusOr<std::unique_ptr<QuantizedModel>> OpenQuarkModel(const std::string& dir) {
  auto model = std::make_unique<QuarkCheckpoint>();
  QD_RETURN_IF_ERROR(model->Open(dir));
  return std::unique_ptr<QuantizedModel>(std::move(model));
}

}  // namespace quantd::exporter
