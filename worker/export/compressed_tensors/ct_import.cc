#include "worker/export/compressed_tensors/ct_import.h"

#include <c10/util/Exception.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "worker/export/compressed_tensors/ct_config.h"
#include "worker/export/compressed_tensors/ct_packing.h"
#include "worker/export/hf/dequantized_checkpoint.h"
#include "worker/export/module_names.h"
#include "worker/models/layer_shapes.h"
#include "worker/quant/fake_quant.h"

namespace quantd::exporter {

using io::SafetensorsDtype;
using nlohmann::json;
using quant::QScheme;
using quant::QuantSpec;

namespace {

const char* const kWhere = "config.json quantization_config.";

Status NotBuilt(const std::string& what) {
  return Status(StatusCode::kUnimplemented, what, "FEATURE_NOT_BUILT");
}

bool IsCtParameter(const std::string& name) {
  for (const char* s :
       {".weight_packed", ".weight_shape", ".weight_scale", ".weight_zero_point", ".weight_g_idx",
        ".input_scale", ".input_zero_point", ".k_scale", ".v_scale"})
    if (EndsWith(name, s)) return true;
  return false;
}

// The library's QuantizationArgs (quantization/quant_args.py) as a spec;
// `field` names it in errors. `activation` selects per-token for "token".
StatusOr<QuantSpec> SpecFromArgs(const json& a, const std::string& field, bool activation) {
  if (!a.is_object()) return FailedPreconditionError(field + " is not an object");
  const json bits = a.value("num_bits", json());
  const std::string type = a.value("type", json("int")).is_string() ? a.value("type", "int") : "";
  if (!bits.is_number_integer())
    return FailedPreconditionError(field + ".num_bits is not an integer");
  QuantSpec s;
  const int64_t n = bits.get<int64_t>();
  if (type == "int" && n == 8) {
    s.dtype = quant::DataType::kInt8;
  } else if (type == "int" && n == 4) {
    s.dtype = quant::DataType::kInt4;
  } else if (type == "int" && n == 3) {
    s.dtype = quant::DataType::kInt3;
  } else if (type == "int" && n == 2) {
    s.dtype = quant::DataType::kInt2;
  } else if (type == "float" && n == 8) {
    s.dtype = quant::DataType::kFp8E4M3;
  } else {
    return NotBuilt(field + ": " + type + " with num_bits " + std::to_string(n) +
                    " is not read (int 2/3/4/8 and float 8 are)");
  }
  const json sym = a.value("symmetric", json(true));
  if (!sym.is_boolean()) return FailedPreconditionError(field + ".symmetric is not a boolean");
  s.symmetric = sym.get<bool>();
  const json dyn = a.value("dynamic", json(false));
  if (!dyn.is_boolean())  // "local" is the library's per-group dynamic activations
    return NotBuilt(field + ".dynamic " + dyn.dump() + " is not read (true / false are)");
  s.is_dynamic = dyn.get<bool>();
  const json strategy = a.value("strategy", json("tensor"));
  const std::string st = strategy.is_string() ? strategy.get<std::string>() : "";
  if (st == "tensor") {
    s.qscheme = QScheme::kPerTensor;
  } else if (st == "channel" && !activation) {
    s.qscheme = QScheme::kPerChannel;
  } else if (st == "token" && activation) {
    s.qscheme = QScheme::kPerChannel;
    s.ch_axis = 1;
  } else if (st == "group" && !activation) {
    const json gs = a.value("group_size", json());
    if (!gs.is_number_integer() || gs.get<int64_t>() < 1 || gs.get<int64_t>() > (1 << 20))
      return FailedPreconditionError(field + ".group_size must be a positive integer");
    s.qscheme = QScheme::kPerGroup;
    s.group_size = static_cast<int>(gs.get<int64_t>());
  } else {
    return NotBuilt(
        field + ".strategy " + strategy.dump() + " is not read for " +
        (activation ? "activations (tensor, token are)" : "weights (tensor, channel, group are)"));
  }
  if (quant::IsFp8Type(s.dtype) && !s.symmetric)
    return FailedPreconditionError(field + ": float weights are symmetric");
  return s;
}

struct CtGroup {
  std::string name;
  std::vector<std::string> targets;
  std::optional<QuantSpec> weight;
  std::optional<QuantSpec> input;
  std::string format;
  bool group_actorder = false;
};

StatusOr<std::vector<std::string>> StringList(const json& v, const std::string& field) {
  std::vector<std::string> out;
  if (v.is_null()) return out;
  if (!v.is_array()) return FailedPreconditionError(field + " is not a list");
  for (const json& e : v) {
    if (!e.is_string()) return FailedPreconditionError(field + " holds a non-string");
    std::string s = e.get<std::string>();
    if (s.rfind("re:", 0) == 0)
      return NotBuilt(field + " holds the pattern '" + s +
                      "'; this reader takes exact module names and \"Linear\"");
    out.push_back(std::move(s));
  }
  return out;
}

class CtCheckpoint final : public DequantizedCheckpoint {
 public:
  Status Open(const std::string& dir) {
    QD_ASSIGN_OR_RETURN(json qc, OpenDir(dir, "compressed-tensors"));
    const std::string where = dir + "/" + kWhere;
    if (qc.value("quantization_status", json()) != json("compressed"))
      return FailedPreconditionError(where + "quantization_status is " +
                                     qc.value("quantization_status", json()).dump() +
                                     "; only \"compressed\" checkpoints are read");
    const std::string top_format =
        qc.value("format", json()).is_string() ? qc.value("format", "") : "";
    QD_ASSIGN_OR_RETURN(std::vector<std::string> ignore_list,
                        StringList(qc.value("ignore", json()), where + "ignore"));
    const std::set<std::string> ignore(ignore_list.begin(), ignore_list.end());
    const json groups_json = qc.value("config_groups", json());
    if (!groups_json.is_object() || groups_json.empty())
      return FailedPreconditionError(where + "config_groups is missing or empty");
    std::vector<CtGroup> groups;
    for (const auto& [gname, g] : groups_json.items()) {
      const std::string field = where + "config_groups." + gname;
      if (!g.is_object()) return FailedPreconditionError(field + " is not an object");
      CtGroup group;
      group.name = gname;
      QD_ASSIGN_OR_RETURN(group.targets,
                          StringList(g.value("targets", json()), field + ".targets"));
      if (!g.value("output_activations", json()).is_null())
        return NotBuilt(field + ".output_activations is not read");
      if (!g.value("weights", json()).is_null()) {
        QD_ASSIGN_OR_RETURN(QuantSpec w, SpecFromArgs(g["weights"], field + ".weights", false));
        group.weight = w;
        const json order = g["weights"].value("actorder", json());
        if (order == json("group")) {
          group.group_actorder = true;
        } else if (!order.is_null() && order != json("weight") && order != json(false)) {
          return NotBuilt(field + ".weights.actorder " + order.dump() + " is not read");
        }
      }
      if (!g.value("input_activations", json()).is_null()) {
        QD_ASSIGN_OR_RETURN(
            QuantSpec in, SpecFromArgs(g["input_activations"], field + ".input_activations", true));
        group.input = in;
      }
      group.format = g.value("format", json()).is_string() ? g.value("format", "") : top_format;
      if (group.format.empty() || group.format == "mixed-precision")
        group.format = CtFormatFor(group.weight, group.input);
      if (group.format != "pack-quantized" && group.format != "int-quantized" &&
          group.format != "float-quantized" && group.format != "naive-quantized")
        return NotBuilt(field + ": format '" + group.format +
                        "' is not read (pack-quantized, int-quantized, float-quantized and "
                        "naive-quantized are)");
      if (!group.weight) return NotBuilt(field + " quantizes activations without weights");
      groups.push_back(std::move(group));
    }
    std::optional<QuantSpec> kv;
    if (!qc.value("kv_cache_scheme", json()).is_null()) {
      QD_ASSIGN_OR_RETURN(QuantSpec k,
                          SpecFromArgs(qc["kv_cache_scheme"], where + "kv_cache_scheme", true));
      kv = k;
      if (kv->is_dynamic || kv->qscheme != QScheme::kPerTensor)
        return NotBuilt(where + "kv_cache_scheme: only static per-tensor KV caches are read");
    }
    quant_config_.reference_json = qc.dump();
    for (const models::LinearLayerInfo& info : models::ListLinearLayers(config_)) {
      QD_RETURN_IF_ERROR(AddLinear(info, groups, ignore, kv));
    }
    IndexTensors(IsCtParameter);
    return OkStatus();
  }

  StatusOr<at::Tensor> WeightGroupIndex(const std::string& module) const override {
    auto it = g_idx_layers_.find(module);
    if (it == g_idx_layers_.end()) return at::Tensor();
    return LoadGroupIndex(module, it->second);
  }

 private:
  Status AddLinear(const models::LinearLayerInfo& info, const std::vector<CtGroup>& groups,
                   const std::set<std::string>& ignore, const std::optional<QuantSpec>& kv) {
    const CtGroup* match = nullptr;
    if (!ignore.count(info.name)) {
      for (const CtGroup& g : groups)  // an exact name wins over the module type
        if (std::find(g.targets.begin(), g.targets.end(), info.name) != g.targets.end()) {
          if (match != nullptr)
            return FailedPreconditionError(dir_ + ": " + info.name + " is targeted by " +
                                           match->name + " and " + g.name);
          match = &g;
        }
      if (match == nullptr)
        for (const CtGroup& g : groups)
          if (std::find(g.targets.begin(), g.targets.end(), info.type) != g.targets.end()) {
            if (match != nullptr)
              return FailedPreconditionError(dir_ + ": " + info.name + " is targeted by " +
                                             match->name + " and " + g.name);
            match = &g;
          }
    }
    const bool kv_projection = kv && info.block >= 0 && IsKvProjection(info.name);
    if (match == nullptr && !kv_projection) return OkStatus();
    QuantizedLayer layer;
    layer.name = info.name;
    layer.type = info.type;
    if (match != nullptr) {
      if (info.transposed_in_checkpoint)
        return NotBuilt(dir_ + ": " + info.name + ": GPT-2 Conv1D weights are not read");
      layer.weight = match->weight;
      formats_[info.name] = match->format;
      QD_ASSIGN_OR_RETURN(layer.input, StaticActivation(info.name + ".input", match->input,
                                                        info.name + ".input_scale",
                                                        info.name + ".input_zero_point"));
      if (match->group_actorder && layer.weight->qscheme == QScheme::kPerGroup)
        g_idx_layers_[info.name] = info.in_features;
    }
    if (kv_projection) {
      const std::string attn = info.name.substr(0, info.name.rfind('.'));
      const std::string scale = attn + (EndsWith(info.name, ".k_proj") ? ".k_scale" : ".v_scale");
      QD_ASSIGN_OR_RETURN(layer.output, StaticActivation(info.name + ".output", kv, scale, ""));
    }
    AddLayer(std::move(layer), info, match != nullptr);
    return OkStatus();
  }

  StatusOr<at::Tensor> Tensor(const std::string& name, std::vector<int64_t> shape,
                              std::set<SafetensorsDtype> dtypes) const {
    QD_ASSIGN_OR_RETURN(StoredTensor t, Stored(name));
    if (!t.defined()) return DataLossError(dir_ + ": " + name + " is missing");
    if (!dtypes.count(t.dtype) || t.tensor.sizes().vec() != shape) {
      std::string want;
      for (int64_t d : shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
      return DataLossError(dir_ + ": " + name + " has the wrong dtype or shape (want [" + want +
                           "])");
    }
    return t.tensor;
  }

  StatusOr<at::Tensor> LoadGroupIndex(const std::string& module, int64_t in) const {
    QD_ASSIGN_OR_RETURN(at::Tensor g, Tensor(module + ".weight_g_idx", {in},
                                             {SafetensorsDtype::kI32, SafetensorsDtype::kI64}));
    return g.to(at::kInt);
  }

  StatusOr<quant::QuantizedTensor> DecodeWeight(const std::string& module, const QuantSpec& spec,
                                                const std::vector<int64_t>& shape) const override {
    const int64_t out = shape[0], in = shape[1];
    const std::string& format = formats_.at(module);
    int64_t groups = 1;
    if (spec.qscheme == QScheme::kPerGroup) {
      if (in % *spec.group_size != 0)
        return DataLossError(dir_ + ": " + module + ": group_size " +
                             std::to_string(*spec.group_size) + " does not divide " +
                             std::to_string(in) + " columns");
      groups = in / *spec.group_size;
    }
    const std::vector<int64_t> scale_shape = spec.qscheme == QScheme::kPerTensor
                                                 ? std::vector<int64_t>{1}
                                                 : std::vector<int64_t>{out, groups};
    const std::set<SafetensorsDtype> floats = {SafetensorsDtype::kF32, SafetensorsDtype::kF16,
                                               SafetensorsDtype::kBF16};
    QD_ASSIGN_OR_RETURN(at::Tensor scale, Tensor(module + ".weight_scale", scale_shape, floats));
    quant::QuantizedTensor q;
    try {
      scale = scale.to(at::kFloat);
      if (spec.qscheme == QScheme::kPerTensor) scale = scale.reshape({});
      if (spec.qscheme == QScheme::kPerChannel) scale = scale.reshape({out});
      q.qparams.scale = scale.contiguous();
      if (quant::IsFp8Type(spec.dtype)) {
        QD_ASSIGN_OR_RETURN(q.codes,
                            Tensor(module + ".weight", {out, in}, {SafetensorsDtype::kF8E4M3}));
        return q;
      }
      const int bits = quant::BitWidth(spec.dtype);
      if (format == "pack-quantized") {
        QD_ASSIGN_OR_RETURN(at::Tensor dims,
                            Tensor(module + ".weight_shape", {2},
                                   {SafetensorsDtype::kI64, SafetensorsDtype::kI32}));
        dims = dims.to(at::kLong);
        if (dims[0].item<int64_t>() != out || dims[1].item<int64_t>() != in)
          return DataLossError(dir_ + ": " + module + ".weight_shape does not match the layer");
        QD_ASSIGN_OR_RETURN(at::Tensor packed,
                            Tensor(module + ".weight_packed", {out, (in * bits + 31) / 32},
                                   {SafetensorsDtype::kI32}));
        QD_ASSIGN_OR_RETURN(q.codes, UnpackCtInt32(packed, bits, in, 1));
      } else {
        QD_ASSIGN_OR_RETURN(q.codes,
                            Tensor(module + ".weight", {out, in}, {SafetensorsDtype::kI8}));
        const int64_t lo = -(int64_t{1} << (bits - 1)), hi = (int64_t{1} << (bits - 1)) - 1;
        if (q.codes.lt(lo).any().item<bool>() || q.codes.gt(hi).any().item<bool>())
          return DataLossError(dir_ + ": " + module + ".weight holds codes outside " +
                               std::to_string(bits) + " bits");
      }
      q.codes = q.codes.to(at::kChar).contiguous();
      at::Tensor zp = at::zeros(scale.sizes(), at::kInt);
      if (!spec.symmetric) {
        if (format == "pack-quantized") {
          QD_ASSIGN_OR_RETURN(at::Tensor packed_zp,
                              Tensor(module + ".weight_zero_point",
                                     {(out * bits + 31) / 32, groups}, {SafetensorsDtype::kI32}));
          QD_ASSIGN_OR_RETURN(zp, UnpackCtInt32(packed_zp, bits, out, 0));
        } else {
          QD_ASSIGN_OR_RETURN(
              zp, Tensor(module + ".weight_zero_point", scale_shape, {SafetensorsDtype::kI8}));
        }
        zp = zp.to(at::kInt).reshape(scale.sizes()).contiguous();
      }
      q.qparams.zero_point = zp;
    } catch (const c10::Error& e) {
      return DataLossError(dir_ + ": " + module + ": " + e.what_without_backtrace());
    }
    return q;
  }

  StatusOr<at::Tensor> DequantizeWeight(const std::string& module, const QuantSpec& spec,
                                        const std::vector<int64_t>& shape) const override {
    QD_ASSIGN_OR_RETURN(quant::QuantizedTensor q, DecodeWeight(module, spec, shape));
    auto g = g_idx_layers_.find(module);
    if (g == g_idx_layers_.end()) return quant::Dequantize(q, spec, at::kFloat);
    // Columns in permuted groups: each column dequantized with its group's
    // parameters, as per_group with one column per group.
    QD_ASSIGN_OR_RETURN(at::Tensor g_idx, LoadGroupIndex(module, g->second));
    const int64_t groups = q.qparams.scale.size(1);
    if (g_idx.lt(0).any().item<bool>() || g_idx.ge(groups).any().item<bool>())
      return DataLossError(dir_ + ": " + module + ".weight_g_idx holds a group outside [0, " +
                           std::to_string(groups) + ")");
    QuantSpec per_column = spec;
    q.qparams = quant::ExpandGroupsToColumns(q.qparams, g_idx, &per_column);
    return quant::Dequantize(q, per_column, at::kFloat);
  }

  std::map<std::string, std::string> formats_;   // module -> compression format
  std::map<std::string, int64_t> g_idx_layers_;  // module -> in_features
};

}  // namespace

StatusOr<std::unique_ptr<QuantizedModel>> OpenCompressedTensorsModel(const std::string& dir) {
  auto model = std::make_unique<CtCheckpoint>();
  QD_RETURN_IF_ERROR(model->Open(dir));
  return std::unique_ptr<QuantizedModel>(std::move(model));
}

}  // namespace quantd::exporter
