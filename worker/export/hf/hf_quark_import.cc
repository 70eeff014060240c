#include "worker/export/hf/hf_quark_import.h"

#include <nlohmann/json.hpp>

#include "worker/config/quark_json.h"
#include "worker/export/hf/dequantized_checkpoint.h"
#include "worker/export/hf/quark_config.h"
#include "worker/export/hf/quark_tensors.h"
#include "worker/export/module_names.h"
#include "worker/models/layer_shapes.h"

namespace quantd::exporter {

using nlohmann::json;

namespace {

// Tensors that hold quantization parameters, not model weights.
bool IsQuarkParameter(const std::string& name) {
  for (const char* s : {".weight_scale", ".weight_zero_point", ".input_scale", ".input_zero_point",
                        ".output_scale", ".output_zero_point", ".k_scale", ".v_scale"})
    if (EndsWith(name, s)) return true;
  return false;
}

class QuarkCheckpoint final : public DequantizedCheckpoint {
 public:
  Status Open(const std::string& dir) {
    QD_ASSIGN_OR_RETURN(json qc, OpenDir(dir, "quark"));
    const std::string quant_json = qc.dump();
    QD_ASSIGN_OR_RETURN(QuarkConfig quark, QuarkConfig::Parse(quant_json));
    QD_ASSIGN_OR_RETURN(quant_config_, config::ParseQuarkJson(
                                           quant_json, dir + "/config.json quantization_config."));
    const QuarkExportSection& ex = quark.export_section();
    if (ex.weight_format != "real_quantized" || ex.pack_method != "reorder")
      return FailedPreconditionError(dir + ": export weight_format '" + ex.weight_format +
                                     "' / pack_method '" + ex.pack_method +
                                     "' is not supported (real_quantized / reorder is)");
    for (const models::LinearLayerInfo& info : models::ListLinearLayers(config_)) {
      if (stored().Find(info.name + ".weight") == nullptr) continue;  // e.g. a tied lm_head
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
      }
      QD_ASSIGN_OR_RETURN(layer.input, StaticActivation(info.name + ".input", specs.input,
                                                        info.name + ".input_scale",
                                                        info.name + ".input_zero_point"));
      QD_ASSIGN_OR_RETURN(layer.output, StaticActivation(info.name + ".output", specs.output,
                                                         info.name + ".output_scale",
                                                         info.name + ".output_zero_point"));
      const bool stored_weight = specs.weight.has_value();
      AddLayer(std::move(layer), info, stored_weight);
    }
    IndexTensors(IsQuarkParameter);
    return OkStatus();
  }

 private:
  StatusOr<quant::QuantizedTensor> DecodeWeight(const std::string& module,
                                                const quant::QuantSpec& spec,
                                                const std::vector<int64_t>& shape) const override {
    QuarkStoredWeight w;
    QD_ASSIGN_OR_RETURN(w.weight, Stored(module + ".weight"));
    QD_ASSIGN_OR_RETURN(w.scale, Stored(module + ".weight_scale"));
    QD_ASSIGN_OR_RETURN(w.zero_point, Stored(module + ".weight_zero_point"));
    auto q = DecodeQuarkWeight(w, spec, shape);
    if (!q.ok()) return Status(q.status()).Prepend(dir_ + ": " + module + ": ");
    return q;
  }
};

}  // namespace

StatusOr<std::unique_ptr<QuantizedModel>> OpenQuarkModel(const std::string& dir) {
  auto model = std::make_unique<QuarkCheckpoint>();
  QD_RETURN_IF_ERROR(model->Open(dir));
  return std::unique_ptr<QuantizedModel>(std::move(model));
}

}  // namespace quantd::exporter
