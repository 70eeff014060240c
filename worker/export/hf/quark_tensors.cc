#include "worker/export/hf/quark_tensors.h"

#include <c10/util/Exception.h>

#include <string>

#include "worker/export/export_support.h"
#include "worker/export/hf/quark_packing.h"
#include "worker/quant/fake_quant.h"

namespace quantd::exporter {

using io::SafetensorsDtype;
using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

namespace {

enum class Kind { kCast, kInt8, kInt4, kFp8, kMxFp4, kMxFp6, kMxFp8 };

std::string ShapeString(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

StatusOr<Kind> KindOf(const QuantSpec& s) {
  const std::string name(quant::DataTypeName(s.dtype));
  if (quant::IsCastType(s.dtype)) return Kind::kCast;
  if (quant::IsIntType(s.dtype)) {
    if (quant::BitWidth(s.dtype) == 8) return Kind::kInt8;
    if (quant::BitWidth(s.dtype) == 4) return Kind::kInt4;
    return InvalidArgumentError("hf_quark: " + name + " weights have no real_quantized packing");
  }
  if (quant::IsFp8Type(s.dtype)) return Kind::kFp8;
  // The MX minifloat elements are laid out by their width; MXINT8 has none.
  if (quant::IsMxType(s.dtype) && quant::MinifloatFormatOf(s.dtype).ebits > 0) {
    const int bits = quant::BitWidth(s.dtype);
    if (bits == 4) return Kind::kMxFp4;
    if (bits == 6) return Kind::kMxFp6;
    return Kind::kMxFp8;
  }
  return InvalidArgumentError("hf_quark: " + name + " weights have no real_quantized layout");
}

SafetensorsDtype Fp8Dtype(DataType t) {
  return (t == DataType::kFp8E5M2 || t == DataType::kMxFp8E5M2) ? SafetensorsDtype::kF8E5M2
                                                                : SafetensorsDtype::kF8E4M3;
}

Status Mismatch(const char* what, const StoredTensor& t, const std::vector<int64_t>& want,
                SafetensorsDtype want_dtype) {
  if (!t.defined()) return DataLossError(std::string(what) + " is missing");
  if (t.dtype != want_dtype)
    return DataLossError(std::string(what) + " is " + io::SafetensorsDtypeName(t.dtype) +
                         ", expected " + io::SafetensorsDtypeName(want_dtype));
  if (t.tensor.sizes().vec() != want)
    return DataLossError(std::string(what) + " has shape " + ShapeString(t.tensor.sizes().vec()) +
                         ", expected " + ShapeString(want));
  return OkStatus();
}

std::vector<int64_t> Transposed(std::vector<int64_t> s) {
  if (s.size() == 2) std::swap(s[0], s[1]);
  return s;
}

}  // namespace

Status CheckQuarkWeightSpec(const QuantSpec& s) {
  return CheckExportSpec(ExportFormat::kHfQuark, s, quant::TensorRole::kWeight);
}

bool IsPackedQuarkWeight(const QuantSpec& spec) {
  const auto kind = KindOf(spec);
  return kind.ok() && (*kind == Kind::kInt4 || *kind == Kind::kMxFp4 || *kind == Kind::kMxFp6);
}

StatusOr<QuarkStoredActivation> EncodeQuarkActivation(const QuantSpec& spec,
                                                      const quant::QParams& qparams,
                                                      double min_scale) {
  if (!qparams.scale.defined() || qparams.scale.numel() != 1)
    return InvalidArgumentError("a static activation quantizer needs one calibrated scale");
  QuarkStoredActivation out;
  at::Tensor scale = qparams.scale.to(at::kFloat).reshape({});
  if (min_scale > 0) scale = at::clamp_min(scale, min_scale);
  out.scale = {scale, SafetensorsDtype::kF32};
  if (!quant::IsIntType(spec.dtype)) return out;
  at::Tensor zp =
      qparams.zero_point.defined() ? qparams.zero_point.reshape({}) : at::zeros({}, at::kInt);
  if (zp.is_floating_point()) {
    out.zero_point = {zp.to(at::kFloat), SafetensorsDtype::kF32};
  } else if (quant::BitWidth(spec.dtype) <= 4) {
    out.zero_point = {zp.to(at::kInt), SafetensorsDtype::kI32};
  } else {
    const bool is_signed = quant::IsSignedInt(spec.dtype);
    out.zero_point = {zp.to(is_signed ? at::kChar : at::kByte),
                      is_signed ? SafetensorsDtype::kI8 : SafetensorsDtype::kU8};
  }
  return out;
}

StatusOr<QuarkStoredWeight> EncodeQuarkWeight(const at::Tensor& value, const QuantSpec& spec,
                                              const quant::QParams& qparams) {
  QD_RETURN_IF_ERROR(CheckQuarkWeightSpec(spec));
  if (value.dim() != 2) return InvalidArgumentError("hf_quark: a quantized weight must be 2-D");
  QD_ASSIGN_OR_RETURN(Kind kind, KindOf(spec));
  QD_ASSIGN_OR_RETURN(quant::QuantizedTensor q,
                      quant::RealQuantize(value.to(at::kFloat), spec, qparams));
  try {
    QuarkStoredWeight out;
    switch (kind) {
      case Kind::kCast:
        out.weight = {q.codes.contiguous(), spec.dtype == DataType::kFloat16
                                                ? SafetensorsDtype::kF16
                                                : SafetensorsDtype::kBF16};
        return out;
      case Kind::kFp8:
        out.weight = {q.codes.contiguous(), Fp8Dtype(spec.dtype)};
        out.scale = {q.qparams.scale.to(at::kFloat).contiguous(), SafetensorsDtype::kF32};
        return out;
      case Kind::kMxFp4: {
        QD_ASSIGN_OR_RETURN(at::Tensor packed, PackFp4Pairs(q.codes));
        out.weight = {packed, SafetensorsDtype::kU8};
        out.scale = {q.e8m0.contiguous(), SafetensorsDtype::kU8};
        return out;
      }
      case Kind::kMxFp6: {
        QD_ASSIGN_OR_RETURN(at::Tensor packed, PackFp6(q.codes));
        out.weight = {packed, SafetensorsDtype::kU8};
        out.scale = {q.e8m0.contiguous(), SafetensorsDtype::kU8};
        return out;
      }
      case Kind::kMxFp8:
        out.weight = {q.codes.contiguous(), Fp8Dtype(spec.dtype)};
        out.scale = {q.e8m0.contiguous(), SafetensorsDtype::kU8};
        return out;
      case Kind::kInt8:
      case Kind::kInt4:
        break;
    }
    const bool grouped = spec.qscheme == QScheme::kPerGroup;
    const bool is_signed = quant::IsSignedInt(spec.dtype);
    const at::ScalarType code_type = is_signed ? at::kChar : at::kByte;
    at::Tensor codes = q.codes.to(code_type);
    at::Tensor scale = q.qparams.scale.to(at::kFloat);
    at::Tensor zp = q.qparams.zero_point;
    if (!zp.defined()) zp = at::zeros(scale.sizes(), at::kInt);
    if (grouped) {
      codes = codes.t();
      scale = scale.t();
      zp = zp.t();
    }
    codes = codes.contiguous();
    out.scale = {scale.contiguous(), SafetensorsDtype::kF32};
    const bool float_zp = zp.is_floating_point();
    if (kind == Kind::kInt8) {
      out.weight = {codes, is_signed ? SafetensorsDtype::kI8 : SafetensorsDtype::kU8};
      out.zero_point = float_zp
                           ? StoredTensor{zp.to(at::kFloat).contiguous(), SafetensorsDtype::kF32}
                           : StoredTensor{zp.to(code_type).contiguous(), out.weight.dtype};
      return out;
    }
    QD_ASSIGN_OR_RETURN(at::Tensor packed, PackInt4Reorder(codes));
    out.weight = {packed, SafetensorsDtype::kI32};
    if (float_zp) {
      out.zero_point = {zp.to(at::kFloat).contiguous(), SafetensorsDtype::kF32};
    } else {
      QD_ASSIGN_OR_RETURN(at::Tensor zp_packed, PackInt4Reorder(zp.to(code_type)));
      out.zero_point = {zp_packed, SafetensorsDtype::kI32};
    }
    return out;
  } catch (const c10::Error& e) {
    return InternalError(std::string("hf_quark encode: ") + e.what_without_backtrace());
  }
}

StatusOr<quant::QuantizedTensor> DecodeQuarkWeight(const QuarkStoredWeight& stored,
                                                   const QuantSpec& spec,
                                                   const std::vector<int64_t>& shape) {
  QD_RETURN_IF_ERROR(CheckQuarkWeightSpec(spec));
  if (shape.size() != 2) return InvalidArgumentError("hf_quark: a quantized weight must be 2-D");
  QD_ASSIGN_OR_RETURN(Kind kind, KindOf(spec));
  const int64_t out_f = shape[0], in_f = shape[1];
  const std::vector<int64_t> param_sizes = quant::ParamSizes(shape, spec);
  try {
    quant::QuantizedTensor q;
    switch (kind) {
      case Kind::kCast: {
        const SafetensorsDtype want =
            spec.dtype == DataType::kFloat16 ? SafetensorsDtype::kF16 : SafetensorsDtype::kBF16;
        QD_RETURN_IF_ERROR(Mismatch("weight", stored.weight, shape, want));
        q.codes = stored.weight.tensor;
        return q;
      }
      case Kind::kFp8:
        QD_RETURN_IF_ERROR(Mismatch("weight", stored.weight, shape, Fp8Dtype(spec.dtype)));
        QD_RETURN_IF_ERROR(
            Mismatch("weight_scale", stored.scale, param_sizes, SafetensorsDtype::kF32));
        q.codes = stored.weight.tensor;
        q.qparams.scale = stored.scale.tensor;
        return q;
      case Kind::kMxFp4:
      case Kind::kMxFp6:
      case Kind::kMxFp8: {
        if (kind == Kind::kMxFp4) {
          QD_RETURN_IF_ERROR(
              Mismatch("weight", stored.weight, {out_f, (in_f + 1) / 2}, SafetensorsDtype::kU8));
          QD_ASSIGN_OR_RETURN(q.codes, UnpackFp4Pairs(stored.weight.tensor, in_f));
        } else if (kind == Kind::kMxFp6) {
          QD_RETURN_IF_ERROR(
              Mismatch("weight", stored.weight, {out_f, in_f / 4 * 3}, SafetensorsDtype::kU8));
          QD_ASSIGN_OR_RETURN(q.codes, UnpackFp6(stored.weight.tensor, in_f));
        } else {
          QD_RETURN_IF_ERROR(Mismatch("weight", stored.weight, shape, Fp8Dtype(spec.dtype)));
          q.codes = stored.weight.tensor;
        }
        QD_RETURN_IF_ERROR(
            Mismatch("weight_scale", stored.scale, param_sizes, SafetensorsDtype::kU8));
        q.e8m0 = stored.scale.tensor;
        // E8M0: 2^(code - 127); exact in float32 (2^-127 is a subnormal).
        q.qparams.scale = at::pow(2.0, q.e8m0.to(at::kDouble) - 127.0).to(at::kFloat);
        return q;
      }
      case Kind::kInt8:
      case Kind::kInt4:
        break;
    }
    const bool grouped = spec.qscheme == QScheme::kPerGroup;
    const bool is_signed = quant::IsSignedInt(spec.dtype);
    const SafetensorsDtype code_dtype = is_signed ? SafetensorsDtype::kI8 : SafetensorsDtype::kU8;
    const std::vector<int64_t> stored_shape = grouped ? Transposed(shape) : shape;
    const std::vector<int64_t> stored_params = grouped ? Transposed(param_sizes) : param_sizes;
    at::Tensor codes, zp;
    if (kind == Kind::kInt8) {
      QD_RETURN_IF_ERROR(Mismatch("weight", stored.weight, stored_shape, code_dtype));
      codes = stored.weight.tensor;
      if (stored.zero_point.defined() && stored.zero_point.dtype == SafetensorsDtype::kF32) {
        QD_RETURN_IF_ERROR(Mismatch("weight_zero_point", stored.zero_point, stored_params,
                                    SafetensorsDtype::kF32));
      } else {
        QD_RETURN_IF_ERROR(
            Mismatch("weight_zero_point", stored.zero_point, stored_params, code_dtype));
      }
      zp = stored.zero_point.tensor;
    } else {
      std::vector<int64_t> packed_shape = stored_shape;
      packed_shape.back() = (packed_shape.back() + 7) / 8;
      QD_RETURN_IF_ERROR(Mismatch("weight", stored.weight, packed_shape, SafetensorsDtype::kI32));
      QD_ASSIGN_OR_RETURN(codes,
                          UnpackInt4Reorder(stored.weight.tensor, stored_shape.back(), is_signed));
      if (stored.zero_point.defined() && stored.zero_point.dtype == SafetensorsDtype::kF32) {
        QD_RETURN_IF_ERROR(Mismatch("weight_zero_point", stored.zero_point, stored_params,
                                    SafetensorsDtype::kF32));
        zp = stored.zero_point.tensor;
      } else {
        std::vector<int64_t> zp_packed = stored_params;
        if (!zp_packed.empty()) zp_packed.back() = (zp_packed.back() + 7) / 8;
        QD_RETURN_IF_ERROR(
            Mismatch("weight_zero_point", stored.zero_point, zp_packed, SafetensorsDtype::kI32));
        const int64_t n = stored_params.empty() ? 0 : stored_params.back();
        QD_ASSIGN_OR_RETURN(zp, UnpackInt4Reorder(stored.zero_point.tensor, n, is_signed));
      }
    }
    QD_RETURN_IF_ERROR(
        Mismatch("weight_scale", stored.scale, stored_params, SafetensorsDtype::kF32));
    at::Tensor scale = stored.scale.tensor;
    if (grouped) {
      codes = codes.t();
      scale = scale.t();
      zp = zp.t();
    }
    q.codes = codes.contiguous();
    q.qparams.scale = scale.contiguous();
    q.qparams.zero_point =
        zp.is_floating_point() ? zp.to(at::kFloat).contiguous() : zp.to(at::kInt).contiguous();
    return q;
  } catch (const c10::Error& e) {
    return DataLossError(std::string("hf_quark decode: ") + e.what_without_backtrace());
  }
}

}  // namespace quantd::exporter
