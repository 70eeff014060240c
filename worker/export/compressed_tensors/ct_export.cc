#include "worker/export/compressed_tensors/ct_export.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "worker/common/cancellation.h"
#include "worker/export/compressed_tensors/ct_config.h"
#include "worker/export/compressed_tensors/ct_packing.h"
#include "worker/export/export_support.h"
#include "worker/export/module_names.h"
#include "worker/export/hf/hf_files.h"
#include "worker/export/hf/quantized_safetensors.h"
#include "worker/io/safetensors/tensor_io.h"
#include "worker/models/layer_shapes.h"
#include "worker/quant/fake_quant.h"

namespace quantd::exporter {

using io::SafetensorsDtype;
using nlohmann::json;
using quant::QuantSpec;

namespace {

const std::string kWho = "compressed_tensors: ";

Status Refuse(const std::string& layer, const std::string& field, const std::string& why) {
  return Status(StatusCode::kInvalidArgument, kWho + layer + ": " + why,
                "EXPORT_FORMAT_UNSUPPORTED")
      .AddViolation(layer + "." + field, why);
}

std::string SchemeWords(const QuantizedLayer* l) {
  if (l == nullptr || !l->weight) return "float";
  std::string w = quant::DescribeSpec(*l->weight);
  if (l->input) w += " with inputs " + quant::DescribeSpec(l->input->spec);
  return w;
}

bool SameScheme(const QuantizedLayer* a, const QuantizedLayer* b) {
  auto weight = [](const QuantizedLayer* l) { return l ? l->weight : std::optional<QuantSpec>(); };
  auto input = [](const QuantizedLayer* l) {
    return l && l->input ? std::optional<QuantSpec>(l->input->spec) : std::optional<QuantSpec>();
  };
  return weight(a) == weight(b) && input(a) == input(b);
}

bool HasStaticScale(const std::optional<ActivationQuantizer>& a) {
  return a && !a->spec.is_dynamic && a->static_qparams && a->static_qparams->scale.defined();
}

// What vLLM cannot load that the per-spec check does not see: shapes,
// fused siblings, a KV cache on only some projections.
Status CheckLayers(const QuantizedModel& model, std::optional<QuantSpec>* kv_cache) {
  QD_RETURN_IF_ERROR(
      CheckExportSupport(ExportFormat::kCompressedTensors, ExportLayerSpecsOf(model)));
  std::map<std::string, std::vector<std::string>> fused;
  int kv_projections = 0, kv_quantized = 0;
  for (const auto& info : models::ListLinearLayers(model.config())) {
    const QuantizedLayer* layer = model.FindLayer(info.name);
    const std::string group = FusedModuleOf(info.name);
    if (!group.empty()) fused[group].push_back(info.name);
    if (IsKvProjection(info.name)) {
      ++kv_projections;
      if (layer && layer->output) {
        ++kv_quantized;
        if (!*kv_cache) *kv_cache = layer->output->spec;
        if (**kv_cache != layer->output->spec)
          return Refuse(info.name, "output_tensors",
                        "compressed-tensors has one kv_cache_scheme; this projection's " +
                            quant::DescribeSpec(layer->output->spec) + " differs from " +
                            quant::DescribeSpec(**kv_cache));
        if (!HasStaticScale(layer->output))
          return InternalError(kWho + info.name + " has a KV-cache quantizer without a scale");
      }
    }
    if (layer == nullptr || !layer->weight) continue;
    if (info.transposed_in_checkpoint)
      return Status(StatusCode::kUnimplemented,
                    kWho + info.name + ": GPT-2 Conv1D weights have no compressed-tensors layout",
                    "FEATURE_NOT_BUILT");
    if (layer->input && !layer->input->spec.is_dynamic && !HasStaticScale(layer->input))
      return InternalError(kWho + info.name + " has a static input quantizer without a scale");
    if (CtFormatIsPacked(
            CtFormatFor(layer->weight, layer->input ? std::optional<QuantSpec>(layer->input->spec)
                                                    : std::nullopt))) {
      const int per_word = 32 / quant::BitWidth(layer->weight->dtype);
      if (info.in_features % per_word != 0)
        return Refuse(info.name, "weight",
                      "vLLM's WNA16 scheme allocates in_features / " + std::to_string(per_word) +
                          " packed words per row and in_features is " +
                          std::to_string(info.in_features) + "; exclude the layer");
      if (!layer->weight->symmetric && info.out_features % per_word != 0)
        return Refuse(info.name, "weight",
                      "vLLM packs asymmetric zero points " + std::to_string(per_word) +
                          " output channels per word and out_features is " +
                          std::to_string(info.out_features) + "; exclude the layer");
    }
  }
  if (kv_quantized != 0 && kv_quantized != kv_projections)
    return Refuse("kv_cache", "output_tensors",
                  "vLLM's kv_cache_scheme applies to every attention layer, but only " +
                      std::to_string(kv_quantized) + " of " + std::to_string(kv_projections) +
                      " k/v projections quantize their output");
  for (const auto& [group, members] : fused) {
    const QuantizedLayer* first = model.FindLayer(members[0]);
    for (size_t i = 1; i < members.size(); ++i) {
      const QuantizedLayer* other = model.FindLayer(members[i]);
      if (!SameScheme(first, other))
        return Refuse(members[i], "weight",
                      "vLLM loads " + group + " as one layer with one scheme; " + members[0] +
                          " is " + SchemeWords(first) + ", " + members[i] + " is " +
                          SchemeWords(other));
    }
  }
  return OkStatus();
}

Status Write(ShardedSafetensorsWriter& w, const std::string& name, const at::Tensor& t,
             SafetensorsDtype dtype) {
  return WriteTensor(w, kWho, name, t, dtype);
}

// Codes and zero points in the library's signed range: unsigned code sets
// move down by 2^(bits-1) with their zero point.
struct SignedCodes {
  at::Tensor codes;       // int64 [out, in]
  at::Tensor zero_point;  // int64, scale's shape; zeros when symmetric
};

StatusOr<SignedCodes> ToSignedCodes(const quant::QuantizedTensor& q, const QuantSpec& spec,
                                    const std::string& module) {
  SignedCodes out;
  out.codes = q.codes.to(at::kLong);
  out.zero_point = q.qparams.zero_point.defined() ? q.qparams.zero_point.to(at::kLong)
                                                  : at::zeros_like(q.qparams.scale, at::kLong);
  if (!quant::IsSignedInt(spec.dtype)) {
    const int64_t mid = int64_t{1} << (quant::BitWidth(spec.dtype) - 1);
    out.codes = out.codes - mid;
    out.zero_point = out.zero_point - mid;
  }
  if (spec.symmetric && out.zero_point.ne(0).any().item<bool>())
    return InternalError(kWho + module + ": a symmetric weight has a zero point off its midpoint");
  return out;
}

// weight_scale as the schemes allocate it: [1] per tensor, [out, 1] per
// channel, [out, groups] per group.
at::Tensor CtScaleShape(const at::Tensor& t, const QuantSpec& spec, int64_t out) {
  if (spec.qscheme == quant::QScheme::kPerTensor) return t.reshape({1});
  return t.reshape({out, -1});
}

// The codes of a weight whose groups are runs of permuted columns (GPTQ's
// act_order without static_groups): each column quantized with its group's
// parameters, as per_group with one column per group; the parameters stay
// [out, G] and weight_g_idx maps the columns onto them.
StatusOr<quant::QuantizedTensor> RealQuantizeByColumnGroup(const at::Tensor& value,
                                                           const QuantSpec& spec,
                                                           const quant::QParams& qp,
                                                           const at::Tensor& g_idx) {
  QuantSpec per_column = spec;
  const quant::QParams columns = quant::ExpandGroupsToColumns(qp, g_idx, &per_column);
  QD_ASSIGN_OR_RETURN(quant::QuantizedTensor q, quant::RealQuantize(value, per_column, columns));
  q.qparams = qp;
  return q;
}

Status WriteWeight(ShardedSafetensorsWriter& w, const std::string& module, const at::Tensor& value,
                   const QuantizedLayer& layer, const quant::QParams& qp, const at::Tensor& g_idx) {
  const QuantSpec& spec = *layer.weight;
  const bool permuted = g_idx.defined() && spec.qscheme == quant::QScheme::kPerGroup;
  auto q = permuted ? RealQuantizeByColumnGroup(value.to(at::kFloat), spec, qp, g_idx)
                    : quant::RealQuantize(value.to(at::kFloat), spec, qp);
  if (!q.ok()) return Status(q.status()).Prepend(kWho + module + ": ");
  const int64_t out = value.size(0), in = value.size(1);
  const at::Tensor scale = CtScaleShape(q->qparams.scale.to(at::kFloat), spec, out);
  QD_RETURN_IF_ERROR(Write(w, module + ".weight_scale", scale, SafetensorsDtype::kF32));
  if (quant::IsFp8Type(spec.dtype))  // codes are the e4m3 bytes
    return Write(w, module + ".weight", q->codes, SafetensorsDtype::kF8E4M3);
  QD_ASSIGN_OR_RETURN(SignedCodes s, ToSignedCodes(*q, spec, module));
  const std::optional<QuantSpec> input =
      layer.input ? std::optional<QuantSpec>(layer.input->spec) : std::nullopt;
  if (!CtFormatIsPacked(CtFormatFor(layer.weight, input)))
    return Write(w, module + ".weight", s.codes.to(at::kChar), SafetensorsDtype::kI8);
  const int bits = quant::BitWidth(spec.dtype);
  QD_ASSIGN_OR_RETURN(at::Tensor packed, PackCtInt32(s.codes, bits, 1));
  QD_RETURN_IF_ERROR(Write(w, module + ".weight_packed", packed, SafetensorsDtype::kI32));
  QD_RETURN_IF_ERROR(Write(w, module + ".weight_shape",
                           at::tensor(std::vector<int64_t>{out, in}, at::kLong),
                           SafetensorsDtype::kI64));
  if (permuted)
    QD_RETURN_IF_ERROR(
        Write(w, module + ".weight_g_idx", g_idx.to(at::kInt), SafetensorsDtype::kI32));
  if (spec.symmetric) return OkStatus();
  QD_ASSIGN_OR_RETURN(at::Tensor zp, PackCtInt32(s.zero_point.reshape({out, -1}), bits, 0));
  return Write(w, module + ".weight_zero_point", zp, SafetensorsDtype::kI32);
}

Status WriteInput(ShardedSafetensorsWriter& w, const std::string& module,
                  const ActivationQuantizer& a) {
  const at::Tensor scale = a.static_qparams->scale.to(at::kFloat).reshape({1});
  QD_RETURN_IF_ERROR(Write(w, module + ".input_scale", scale, SafetensorsDtype::kF32));
  if (!quant::IsIntType(a.spec.dtype) || a.spec.symmetric) return OkStatus();
  at::Tensor zp = a.static_qparams->zero_point.defined()
                      ? a.static_qparams->zero_point.to(at::kLong).reshape({1})
                      : at::zeros({1}, at::kLong);
  if (!quant::IsSignedInt(a.spec.dtype))
    zp = zp - (int64_t{1} << (quant::BitWidth(a.spec.dtype) - 1));
  return Write(w, module + ".input_zero_point", zp.to(at::kChar), SafetensorsDtype::kI8);
}

StatusOr<json> QuantizationConfig(const QuantizedModel& model,
                                  const std::optional<QuantSpec>& kv_cache) {
  CtConfigInput in;
  in.kv_cache = kv_cache;
  for (const auto& info : models::ListLinearLayers(model.config())) {
    const QuantizedLayer* layer = model.FindLayer(info.name);
    if (layer == nullptr || !layer->weight) {
      in.unquantized.push_back(info.name);
      continue;
    }
    CtLayerQuant l{info.name, layer->weight, std::nullopt};
    if (layer->input) l.input = layer->input->spec;
    QD_ASSIGN_OR_RETURN(at::Tensor g_idx, model.WeightGroupIndex(info.name));
    l.group_actorder = g_idx.defined() && layer->weight->qscheme == quant::QScheme::kPerGroup;
    in.quantized.push_back(std::move(l));
  }
  // A tied head is no Linear of the checkpoint; llm-compressor still lists it.
  if (std::find(in.unquantized.begin(), in.unquantized.end(), "lm_head") == in.unquantized.end() &&
      model.FindLayer("lm_head") == nullptr)
    in.unquantized.push_back("lm_head");
  return BuildCtQuantizationConfig(in);
}

}  // namespace

StatusOr<Artifact> ExportCompressedTensors(const QuantizedModel& model,
                                           const CompressedTensorsExportOptions& opt,
                                           const ExportProgress& progress) {
  std::optional<QuantSpec> kv_cache;
  QD_RETURN_IF_ERROR(CheckLayers(model, &kv_cache));
  QuantizedSafetensorsLayout layout;
  layout.format = ExportFormat::kCompressedTensors;
  layout.who = kWho;
  QD_ASSIGN_OR_RETURN(layout.quantization_config, QuantizationConfig(model, kv_cache));
  layout.write_weight = [&model](ShardedSafetensorsWriter& writer, const std::string& module,
                                 const at::Tensor& value, const QuantizedLayer& layer) -> Status {
    if (value.dim() != 2) return InternalError(kWho + module + ".weight is not 2-D");
    QD_ASSIGN_OR_RETURN(quant::QParams qp, model.WeightQParams(module));
    QD_ASSIGN_OR_RETURN(at::Tensor g_idx, model.WeightGroupIndex(module));
    return WriteWeight(writer, module, value, layer, qp, g_idx);
  };
  layout.write_module_extras = [&opt](ShardedSafetensorsWriter& writer, const std::string& module,
                                      const QuantizedLayer& layer) -> Status {
    if (layer.weight && layer.input && !layer.input->spec.is_dynamic)
      QD_RETURN_IF_ERROR(WriteInput(writer, module, *layer.input));
    if (IsKvProjection(module) && layer.output) {
      // k_proj -> <attention>.k_scale, as the library names the KV scales.
      const std::string kv_name = module.substr(0, module.size() - 7) +
                                  (EndsWith(module, ".k_proj") ? ".k_scale" : ".v_scale");
      at::Tensor scale = layer.output->static_qparams->scale.to(at::kFloat).reshape({1});
      if (opt.min_kv_scale > 0) scale = at::clamp_min(scale, opt.min_kv_scale);
      QD_RETURN_IF_ERROR(Write(writer, kv_name, scale, SafetensorsDtype::kF32));
    }
    return OkStatus();
  };
  return ExportQuantizedSafetensors(
      model, layout, {opt.output_dir, opt.overwrite, opt.output_owner, opt.max_shard_bytes},
      progress);
}

}  // namespace quantd::exporter
