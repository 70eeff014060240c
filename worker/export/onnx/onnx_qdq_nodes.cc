#include "worker/export/onnx/onnx_qdq_nodes.h"

#include <vector>

namespace quantd::exporter::onnx {

using quant::QScheme;
using quant::QuantSpec;

std::string RawBytes(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()),
                     static_cast<size_t>(c.numel()) * c.element_size());
}

std::string RawNibbles(const at::Tensor& codes) {
  at::Tensor c = codes.to(at::kInt).contiguous().reshape({-1});
  const int32_t* p = c.data_ptr<int32_t>();
  std::string out((c.numel() + 1) / 2, '\0');
  for (int64_t i = 0; i < c.numel(); ++i) {
    const uint8_t v = static_cast<uint8_t>(p[i] & 0x0F);
    out[i / 2] = static_cast<char>(static_cast<uint8_t>(out[i / 2]) | (i % 2 ? v << 4 : v));
  }
  return out;
}

DataType CodeType(const QuantSpec& s) {
  switch (s.dtype) {
    case quant::DataType::kInt8:
      return DataType::kInt8;
    case quant::DataType::kUInt8:
      return DataType::kUint8;
    case quant::DataType::kInt4:
      return DataType::kInt4;
    case quant::DataType::kUInt4:
      return DataType::kUint4;
    case quant::DataType::kFp8E5M2:
      return DataType::kFloat8E5M2;
    case quant::DataType::kFloat16:
      return DataType::kFloat16;
    case quant::DataType::kBFloat16:
      return DataType::kBfloat16;
    default:
      return DataType::kFloat8E4M3FN;
  }
}

bool Is4Bit(const QuantSpec& s) {
  return quant::IsIntType(s.dtype) && quant::BitWidth(s.dtype) == 4;
}

bool HasOnnxCodes(const QuantSpec& s) {
  if (quant::IsCastType(s.dtype) || quant::IsFp8Type(s.dtype)) return true;
  if (!quant::IsIntType(s.dtype)) return false;
  const int bits = quant::BitWidth(s.dtype);
  return (bits == 8 || bits == 4) && s.zero_point_type != quant::ZeroPointType::kFloat32;
}

std::string AddZeroPoint(GraphBuilder& g, const std::string& name, const QuantSpec& s, at::Tensor z,
                         const std::vector<int64_t>& shape) {
  if (!quant::IsIntType(s.dtype)) {  // FP8: a zero of the code type per element
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return g.AddInitializer(name, CodeType(s), shape, std::string(n, '\0'));
  }
  if (!z.defined()) z = at::zeros(shape, at::kInt);
  z = z.reshape(shape).contiguous();
  return g.AddInitializer(
      name, CodeType(s), shape,
      Is4Bit(s) ? RawNibbles(z)
                : RawBytes(z.to(quant::IsSignedInt(s.dtype) ? at::kChar : at::kByte)));
}

std::string AddDequantizedWeight(GraphBuilder& g, const std::string& name,
                                 const std::string& node_prefix, const QuantSpec& s,
                                 const at::Tensor& codes, const at::Tensor& scale,
                                 const at::Tensor& zero_point, int64_t axis) {
  const std::vector<int64_t> dims = codes.sizes().vec();
  if (quant::IsCastType(s.dtype)) {
    const std::string w = g.AddInitializer(name, CodeType(s), dims, RawBytes(codes));
    return g.Op("Cast", node_prefix + "/Cast", {w}, {Attribute{"to", int64_t{1}}});
  }
  const std::string w =
      g.AddInitializer(name, CodeType(s), dims, Is4Bit(s) ? RawNibbles(codes) : RawBytes(codes));
  std::vector<Attribute> attrs;
  const at::Tensor sc = scale.to(at::kFloat).contiguous();
  if (s.qscheme == QScheme::kPerChannel) {
    attrs.push_back({"axis", axis});
  } else if (s.qscheme == QScheme::kPerGroup) {
    attrs.push_back({"axis", axis});
    attrs.push_back({"block_size", static_cast<int64_t>(quant::EffectiveGroupSize(s))});
  }
  const std::vector<int64_t> sdims = sc.sizes().vec();
  std::vector<std::string> inputs = {
      w, g.AddInitializer(name + "_scale", DataType::kFloat, sdims, RawBytes(sc))};
  if (quant::IsIntType(s.dtype)) {
    inputs.push_back(AddZeroPoint(g, name + "_zero_point", s,
                                  zero_point.defined() ? zero_point.to(at::kInt) : at::Tensor(),
                                  sdims));
  }
  return g.Op("DequantizeLinear", node_prefix + "/DequantizeLinear", inputs, attrs);
}

StatusOr<std::string> AddActivationQdq(GraphBuilder& g, const std::string& prefix,
                                       const QuantSpec& spec, const quant::QParams& qparams,
                                       const std::string& x) {
  if (!qparams.scale.defined())
    return InternalError(prefix + ": a static activation quantizer has no calibrated scale");
  const std::string scale = g.AddInitializer(prefix + "_scale", DataType::kFloat, {},
                                             RawBytes(qparams.scale.to(at::kFloat).reshape({})));
  if (quant::IsFp8Type(spec.dtype)) {
    const std::string scaled = g.Op("Div", prefix + "/Div", {x, scale});
    const std::string codes = g.Op(
        "Cast", prefix + "/QuantizeCast", {scaled},
        {Attribute{"to", static_cast<int64_t>(CodeType(spec))}, Attribute{"saturate", int64_t{1}}});
    const std::string back = g.Op("Cast", prefix + "/DequantizeCast", {codes},
                                  {Attribute{"to", static_cast<int64_t>(DataType::kFloat)}});
    return g.Op("Mul", prefix + "/DequantizeMul", {back, scale});
  }
  at::Tensor z;
  if (quant::IsIntType(spec.dtype) && qparams.zero_point.defined()) {
    z = qparams.zero_point.reshape({}).to(at::kInt);
  }
  const std::string zp = AddZeroPoint(g, prefix + "_zero_point", spec, z, {});
  const std::string q = g.Op("QuantizeLinear", prefix + "/QuantizeLinear", {x, scale, zp});
  return g.Op("DequantizeLinear", prefix + "/DequantizeLinear", {q, scale, zp});
}

}  // namespace quantd::exporter::onnx
