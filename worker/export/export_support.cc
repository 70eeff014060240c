#include "worker/export/export_support.h"

namespace quantd::exporter {

using gguf::GgmlType;
using quant::QScheme;
using quant::QuantSpec;
using quant::TensorRole;

namespace {

const char* RoleWords(TensorRole role) {
  switch (role) {
    case TensorRole::kWeight:
      return "weights";
    case TensorRole::kBias:
      return "biases";
    case TensorRole::kInput:
      return "input activations";
    case TensorRole::kOutput:
      return "output activations";
  }
  return "tensors";
}

Status Refuse(ExportFormat f, const QuantSpec& s, TensorRole role, const std::string& why) {
  return Status(StatusCode::kInvalidArgument,
                std::string(ExportFormatName(f)) + " cannot express " + quant::DescribeSpec(s) +
                    " " + RoleWords(role) + ": " + why,
                "EXPORT_FORMAT_UNSUPPORTED");
}

bool AlongInputAxis(const QuantSpec& s) {
  const int axis = quant::EffectiveChAxis(s);
  return axis == 1 || axis == -1;
}

bool AlongOutputAxis(const QuantSpec& s) {
  const int axis = quant::EffectiveChAxis(s);
  return axis == 0 || axis == -2;
}

// The granularity rules shared by the formats that store codes with
// per-row / per-group parameters.
std::string WeightAxisProblem(const QuantSpec& s) {
  if (quant::IsMxType(s.dtype) || s.qscheme == QScheme::kPerGroup) {
    if (!AlongInputAxis(s)) return "groups must run along the input axis (ch_axis -1 or 1)";
  } else if (s.qscheme == QScheme::kPerChannel && !AlongOutputAxis(s)) {
    return "per_channel weights must keep one scale per output channel (ch_axis 0)";
  }
  return "";
}

Status CheckHfQuark(const QuantSpec& s, TensorRole role) {
  const ExportFormat f = ExportFormat::kHfQuark;
  if (role == TensorRole::kWeight) {
    if (quant::IsCastType(s.dtype)) return OkStatus();
    if (s.is_dynamic) return Refuse(f, s, role, "a weight quantizer cannot be dynamic");
    if (quant::IsIntType(s.dtype) && quant::BitWidth(s.dtype) != 8 && quant::BitWidth(s.dtype) != 4)
      return Refuse(f, s, role,
                    "the reference's real_quantized format packs 8- and 4-bit integers only");
    if (s.dtype == quant::DataType::kMxInt8)
      return Refuse(f, s, role, "the reference's format defines no real_quantized MXINT8 layout");
    const std::string axis = WeightAxisProblem(s);
    if (!axis.empty()) return Refuse(f, s, role, axis);
    return OkStatus();
  }
  if (s.is_dynamic) return OkStatus();
  if (s.qscheme != QScheme::kPerTensor || quant::IsMxType(s.dtype))
    return Refuse(f, s, role,
                  "static activation scales are stored per tensor (input_scale / output_scale)");
  if (quant::IsCastType(s.dtype))
    return Refuse(f, s, role, "a float16 / bfloat16 cast of activations has no quark form");
  return OkStatus();
}

Status CheckGguf(const QuantSpec& s, TensorRole role) {
  const ExportFormat f = ExportFormat::kGguf;
  if (role != TensorRole::kWeight)
    return Refuse(f, s, role,
                  "a GGUF file holds weights only and llama.cpp quantizes activations and its KV "
                  "cache its own way; use a weight-only scheme");
  if (quant::IsMxType(s.dtype))
    return Refuse(f, s, role,
                  "GGUF has no block format with shared E8M0 scales that quantd writes "
                  "(Q8_0, Q4_0, Q4_1), and requantizing MX elements would change the model");
  if (s.is_dynamic) return Refuse(f, s, role, "a weight quantizer cannot be dynamic");
  return OkStatus();
}

Status CheckOnnx(const QuantSpec& s, TensorRole role) {
  const ExportFormat f = ExportFormat::kOnnxQdq;
  if (quant::IsMxType(s.dtype))
    return Refuse(f, s, role,
                  "ONNX has no QuantizeLinear / DequantizeLinear form of MX block scales");
  if (s.is_dynamic)
    return Refuse(f, s, role,
                  "dynamic quantization has no static QuantizeLinear / DequantizeLinear form");
  if (quant::IsIntType(s.dtype) && quant::BitWidth(s.dtype) != 8 && quant::BitWidth(s.dtype) != 4)
    return Refuse(f, s, role, "ONNX has 8- and 4-bit integer types only");
  if (quant::IsIntType(s.dtype) && s.zero_point_type == quant::ZeroPointType::kFloat32)
    return Refuse(f, s, role, "QuantizeLinear zero points are integers");
  if (role == TensorRole::kWeight) {
    if (quant::IsCastType(s.dtype)) return OkStatus();
    const std::string axis = WeightAxisProblem(s);
    if (!axis.empty()) return Refuse(f, s, role, axis);
    return OkStatus();
  }
  if (quant::IsCastType(s.dtype))
    return Refuse(f, s, role, "a float16 / bfloat16 cast of activations is not exported");
  if (s.qscheme != QScheme::kPerTensor)
    return Refuse(f, s, role, "static activation quantizers are exported per tensor");
  if (s.round_method != quant::RoundMethod::kHalfEven)
    return Refuse(f, s, role,
                  std::string("QuantizeLinear rounds half to even, not '") +
                      std::string(quant::RoundMethodName(s.round_method)) + "'");
  return OkStatus();
}

}  // namespace

Status CheckExportSpec(ExportFormat format, const QuantSpec& spec, TensorRole role) {
  if (format == ExportFormat::kHfFakeQuantized) return OkStatus();
  if (role == TensorRole::kBias)
    return Refuse(format, spec, role, "quantized biases are not exported in this format");
  switch (format) {
    case ExportFormat::kHfQuark:
      return CheckHfQuark(spec, role);
    case ExportFormat::kGguf:
      return CheckGguf(spec, role);
    case ExportFormat::kOnnxQdq:
      return CheckOnnx(spec, role);
    case ExportFormat::kHfFakeQuantized:
      break;
  }
  return OkStatus();
}

Status CheckExportSupport(ExportFormat format, const std::vector<ExportLayerSpecs>& layers) {
  Status first;
  std::vector<FieldViolation> violations;
  for (const ExportLayerSpecs& l : layers) {
    for (const auto& [spec, role] :
         {std::make_pair(&l.weight, TensorRole::kWeight),
          std::make_pair(&l.bias, TensorRole::kBias), std::make_pair(&l.input, TensorRole::kInput),
          std::make_pair(&l.output, TensorRole::kOutput)}) {
      if (!*spec) continue;
      Status s = CheckExportSpec(format, **spec, role);
      if (s.ok()) continue;
      violations.push_back({l.name + "." + std::string(quant::TensorRoleName(role)), s.message()});
      if (first.ok()) first = s.Prepend(l.name + " " + RoleWords(role) + ": ");
    }
  }
  if (first.ok()) return first;
  for (auto& v : violations) first.AddViolation(v.field, v.description);
  return first;
}

std::string GgufCodesMismatch(const QuantSpec& spec, GgmlType type) {
  if (!quant::IsIntType(spec.dtype))
    return quant::DescribeSpec(spec) + " is not an integer code set";
  if (spec.zero_point_type == quant::ZeroPointType::kFloat32)
    return "float zero points have no block form";
  if (spec.qscheme == QScheme::kPerGroup) {
    const int gs = quant::EffectiveGroupSize(spec);
    if (!AlongInputAxis(spec) || gs <= 0 || gs % 32 != 0)
      return "group size " + std::to_string(gs) + " is not a multiple of 32 along the input axis";
  } else if (spec.qscheme == QScheme::kPerChannel && !AlongOutputAxis(spec)) {
    return "per_channel along the input axis";
  }
  const int bits = quant::BitWidth(spec.dtype);
  switch (type) {
    case GgmlType::kQ8_0:
      if (!spec.symmetric && bits > 7)
        return "asymmetric 8-bit codes minus their zero point overflow int8";
      return "";
    case GgmlType::kQ4_0:
      if (bits > 4) return std::to_string(bits) + "-bit codes do not fit 4 bits";
      if (!spec.symmetric) return "Q4_0 has no zero point";
      return "";
    case GgmlType::kQ4_1:
      if (bits > 4) return std::to_string(bits) + "-bit codes do not fit 4 bits";
      return "";
    default:
      return std::string(gguf::GetGgmlTypeTraits(type).name) + " is not a block type quantd writes";
  }
}

GgmlType DefaultGgufWeightType(const std::vector<ExportLayerSpecs>& layers) {
  std::vector<QuantSpec> weights;
  for (const auto& l : layers)
    if (l.weight) weights.push_back(*l.weight);
  if (weights.empty()) return GgmlType::kF32;
  bool all_casts = true;
  for (const auto& w : weights) all_casts &= quant::IsCastType(w.dtype);
  if (all_casts) return GgmlType::kF16;
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0}) {
    bool fits = true;
    for (const auto& w : weights) fits &= GgufCodesMismatch(w, t).empty();
    if (fits) return t;
  }
  for (const auto& w : weights)
    if (quant::BitWidth(w.dtype) > 4) return GgmlType::kQ8_0;
  return GgmlType::kQ4_1;
}

}  // namespace quantd::exporter
