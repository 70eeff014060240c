#include "worker/quant/spec.h"

#include <array>
#include <cctype>
#include <cmath>
#include <sstream>
#include <utility>

#include "worker/quant/format_table.h"

namespace quantd::quant {
namespace {

template <typename E>
struct NamedValue {
  std::string_view name;
  E value;
};

constexpr std::array<NamedValue<QScheme>, 3> kQSchemeNames = {{
    {"per_tensor", QScheme::kPerTensor},
    {"per_channel", QScheme::kPerChannel},
    {"per_group", QScheme::kPerGroup},
}};

constexpr std::array<NamedValue<RoundMethod>, 3> kRoundNames = {{
    {"half_even", RoundMethod::kHalfEven},
    {"round", RoundMethod::kRound},
    {"floor", RoundMethod::kFloor},
}};

constexpr std::array<NamedValue<ScaleType>, 5> kScaleTypeNames = {{
    {"float", ScaleType::kFloat},
    {"float32", ScaleType::kFloat32},
    {"float16", ScaleType::kFloat16},
    {"bfloat16", ScaleType::kBFloat16},
    {"pof2", ScaleType::kPowerOf2},
}};

constexpr std::array<NamedValue<ObserverType>, 3> kObserverNames = {{
    {"min_max", ObserverType::kMinMax},
    {"percentile", ObserverType::kPercentile},
    {"mse", ObserverType::kMse},
}};

constexpr std::array<NamedValue<MxScaleMode>, 3> kMxScaleModeNames = {{
    {"even", MxScaleMode::kEven},
    {"floor", MxScaleMode::kFloor},
    {"ceil", MxScaleMode::kCeil},
}};

constexpr std::array<NamedValue<ZeroPointType>, 2> kZeroPointTypeNames = {{
    {"int32", ZeroPointType::kInt32},
    {"float32", ZeroPointType::kFloat32},
}};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

template <typename E, size_t N>
std::string_view NameOf(const std::array<NamedValue<E>, N>& table, E value) {
  for (const auto& nv : table) {
    if (nv.value == value) return nv.name;
  }
  return "unknown";
}

template <typename E, size_t N>
std::optional<E> ValueOf(const std::array<NamedValue<E>, N>& table, std::string_view name) {
  const std::string lowered = Lower(name);
  for (const auto& nv : table) {
    if (nv.name == lowered) return nv.value;
  }
  return std::nullopt;
}

std::string FormatNumber(double v) {
  std::ostringstream os;
  os.precision(12);
  os << v;
  return os.str();
}

}  // namespace

bool QuantSpec::operator==(const QuantSpec& o) const {
  return dtype == o.dtype && qscheme == o.qscheme && ch_axis == o.ch_axis &&
         group_size == o.group_size && symmetric == o.symmetric && is_dynamic == o.is_dynamic &&
         round_method == o.round_method && scale_type == o.scale_type && observer == o.observer &&
         percentile == o.percentile && mx_scale_mode == o.mx_scale_mode &&
         zero_point_type == o.zero_point_type;
}

std::string_view DataTypeName(DataType t) { return FormatOf(t).name; }

std::optional<DataType> DataTypeFromName(std::string_view name) {
  const std::string lowered = Lower(name);
  if (lowered == "fp16") return DataType::kFloat16;
  if (lowered == "bf16") return DataType::kBFloat16;
  if (lowered == "mxfp8") return DataType::kMxFp8E4M3;
  return FindFormatByName(lowered);
}

std::string_view ReferenceElementName(DataType t) { return FormatOf(t).reference_element_name; }

std::optional<DataType> MxTypeFromElementName(std::string_view element) {
  return FindMxFormatByElementName(Lower(element));
}

std::string_view QSchemeName(QScheme s) { return NameOf(kQSchemeNames, s); }
std::optional<QScheme> QSchemeFromName(std::string_view name) {
  return ValueOf(kQSchemeNames, name);
}
std::string_view RoundMethodName(RoundMethod r) { return NameOf(kRoundNames, r); }
std::optional<RoundMethod> RoundMethodFromName(std::string_view name) {
  return ValueOf(kRoundNames, name);
}
std::string_view ScaleTypeName(ScaleType s) { return NameOf(kScaleTypeNames, s); }
std::optional<ScaleType> ScaleTypeFromName(std::string_view name) {
  if (Lower(name) == "power_of_2") return ScaleType::kPowerOf2;
  return ValueOf(kScaleTypeNames, name);
}
std::string_view ObserverTypeName(ObserverType o) { return NameOf(kObserverNames, o); }
std::optional<ObserverType> ObserverTypeFromName(std::string_view name) {
  return ValueOf(kObserverNames, name);
}
std::string_view MxScaleModeName(MxScaleMode m) { return NameOf(kMxScaleModeNames, m); }
std::optional<MxScaleMode> MxScaleModeFromName(std::string_view name) {
  return ValueOf(kMxScaleModeNames, name);
}
std::string_view ZeroPointTypeName(ZeroPointType z) { return NameOf(kZeroPointTypeNames, z); }
std::optional<ZeroPointType> ZeroPointTypeFromName(std::string_view name) {
  return ValueOf(kZeroPointTypeNames, name);
}

std::string_view TensorRoleName(TensorRole r) {
  switch (r) {
    case TensorRole::kWeight:
      return "weight";
    case TensorRole::kBias:
      return "bias";
    case TensorRole::kInput:
      return "input_tensors";
    case TensorRole::kOutput:
      return "output_tensors";
  }
  return "unknown";
}

std::string AllDataTypeNames() {
  std::string out;
  for (const FormatRow& row : FormatTable()) {
    if (!out.empty()) out += ", ";
    out += row.name;
  }
  return out;
}

// The properties of a data type are its row of the format table.
bool IsIntType(DataType t) { return FormatOf(t).family == FormatFamily::kInt; }
bool IsSignedInt(DataType t) { return IsIntType(t) && FormatOf(t).is_signed; }
bool IsFp8Type(DataType t) { return FormatOf(t).family == FormatFamily::kFp8; }
bool IsMxType(DataType t) { return FormatOf(t).family == FormatFamily::kMx; }
bool IsCastType(DataType t) { return FormatOf(t).family == FormatFamily::kCast; }
int BitWidth(DataType t) { return FormatOf(t).bits; }
IntRange IntRangeOf(DataType t) { return FormatOf(t).code_range; }
MinifloatFormat MinifloatFormatOf(DataType t) { return FormatOf(t).minifloat; }

int EffectiveChAxis(const QuantSpec& spec) {
  if (spec.ch_axis.has_value()) return *spec.ch_axis;
  if (spec.qscheme == QScheme::kPerChannel && !IsMxType(spec.dtype)) return 0;
  return -1;
}

int EffectiveGroupSize(const QuantSpec& spec) {
  if (IsMxType(spec.dtype)) return kMxBlockSize;
  if (spec.qscheme != QScheme::kPerGroup) return 0;
  return spec.group_size.value_or(0);
}

double EffectivePercentile(const QuantSpec& spec) {
  return spec.percentile.value_or(kDefaultPercentile);
}

std::string DescribeSpec(const QuantSpec& spec) {
  std::string out(DataTypeName(spec.dtype));
  if (IsCastType(spec.dtype)) return out + " cast";
  if (IsMxType(spec.dtype)) {
    out += " block " + std::to_string(kMxBlockSize) + " (" +
           std::string(MxScaleModeName(spec.mx_scale_mode)) + ")";
    if (spec.is_dynamic) out += " dynamic";
    return out;
  }
  out += " ";
  out += QSchemeName(spec.qscheme);
  if (spec.qscheme == QScheme::kPerChannel) {
    out += "(axis " + std::to_string(EffectiveChAxis(spec)) + ")";
  } else if (spec.qscheme == QScheme::kPerGroup) {
    out += "(" + (spec.group_size ? std::to_string(*spec.group_size) : std::string("?")) + ")";
  }
  if (IsIntType(spec.dtype)) out += spec.symmetric ? " sym" : " asym";
  if (spec.is_dynamic) out += " dynamic";
  if (spec.observer == ObserverType::kPercentile) {
    out += " percentile(" + FormatNumber(EffectivePercentile(spec)) + ")";
  } else if (spec.observer == ObserverType::kMse) {
    out += " mse";
  }
  if (spec.round_method != RoundMethod::kHalfEven) {
    out += " round=" + std::string(RoundMethodName(spec.round_method));
  }
  if (spec.scale_type != ScaleType::kFloat && spec.scale_type != ScaleType::kFloat32) {
    out += " scale=" + std::string(ScaleTypeName(spec.scale_type));
  }
  if (spec.zero_point_type == ZeroPointType::kFloat32 && IsIntType(spec.dtype) && !spec.symmetric) {
    out += " zp=float32";
  }
  return out;
}

void ValidateSpec(const QuantSpec& spec, TensorRole role, const std::string& path,
                  std::vector<FieldViolation>* out) {
  auto add = [&](const std::string& field, std::string description) {
    out->push_back({path + "." + field, std::move(description)});
  };
  const std::string dtype_name(DataTypeName(spec.dtype));
  if (IsCastType(spec.dtype)) return;  // a cast has no other parameters

  if (IsMxType(spec.dtype)) {
    if (!spec.symmetric) {
      add("symmetric", dtype_name + " is symmetric by definition (shared power-of-two scale, no " +
                           "zero point); asymmetric MX is not a format");
    }
    if (spec.group_size.has_value() && *spec.group_size != kMxBlockSize) {
      add("group_size", dtype_name + " uses blocks of " + std::to_string(kMxBlockSize) +
                            " elements (OCP MX); got " + std::to_string(*spec.group_size));
    }
    if (spec.qscheme != QScheme::kPerGroup) {
      add("qscheme", dtype_name + " is a per_group (block) format; got " +
                         std::string(QSchemeName(spec.qscheme)));
    }
    if (spec.round_method != RoundMethod::kHalfEven) {
      add("round_method", dtype_name + " elements round half to even; got " +
                              std::string(RoundMethodName(spec.round_method)));
    }
    if (spec.observer != ObserverType::kMinMax) {
      add("observer", dtype_name + " derives its block scales from the block amax (min_max); " +
                          std::string(ObserverTypeName(spec.observer)) + " is not supported");
    }
    return;
  }

  const bool is_int = IsIntType(spec.dtype);
  if (!spec.symmetric && !is_int) {
    add("symmetric",
        dtype_name + " is symmetric (no zero point); asymmetric needs an integer dtype");
  }
  if (spec.qscheme == QScheme::kPerGroup) {
    if (!spec.group_size.has_value()) {
      add("group_size", "per_group needs group_size (a positive number of elements, or -1 for " +
                            std::string("the whole axis)"));
    } else if (*spec.group_size == 0 || *spec.group_size < -1) {
      add("group_size", "group_size must be positive (or -1 for the whole axis); got " +
                            std::to_string(*spec.group_size));
    }
    if (!spec.is_dynamic && (role == TensorRole::kInput || role == TensorRole::kOutput)) {
      add("is_dynamic", "static per_group quantization of " + std::string(TensorRoleName(role)) +
                            " is not supported (as in the reference); use is_dynamic=true");
    }
  } else if (spec.group_size.has_value() && *spec.group_size < -1) {
    add("group_size",
        "group_size must be positive (or -1); got " + std::to_string(*spec.group_size));
  }
  if (spec.percentile.has_value() &&
      !(*spec.percentile > 0.0 && *spec.percentile <= 100.0 && std::isfinite(*spec.percentile))) {
    add("percentile", "percentile must be in (0, 100]; got " + FormatNumber(*spec.percentile));
  }
  if (spec.observer != ObserverType::kMinMax) {
    if (spec.qscheme != QScheme::kPerTensor) {
      add("observer", std::string(ObserverTypeName(spec.observer)) +
                          " observers are per_tensor (as in the reference); got " +
                          std::string(QSchemeName(spec.qscheme)) + ", use min_max");
    }
    if (spec.is_dynamic) {
      add("observer", std::string(ObserverTypeName(spec.observer)) +
                          " observers calibrate a static range; dynamic specs use min_max");
    }
  }
  if (spec.zero_point_type == ZeroPointType::kFloat32 && (!is_int || spec.symmetric)) {
    add("zero_point_type", "a float32 zero point needs an asymmetric integer spec");
  }
  if (!is_int && spec.round_method != RoundMethod::kHalfEven) {
    add("round_method", dtype_name + " rounds half to even to its grid; got " +
                            std::string(RoundMethodName(spec.round_method)));
  }
  if (spec.scale_type == ScaleType::kPowerOf2 && !is_int) {
    add("scale_type", "pof2 scales are for integer dtypes; " + dtype_name + " uses float scales");
  }
}

void ValidatePartialSpec(const QuantSpec& spec, TensorRole role, const std::string& path,
                         bool dtype_known, bool qscheme_known, std::vector<FieldViolation>* out) {
  if (dtype_known && qscheme_known) return ValidateSpec(spec, role, path, out);
  auto add = [&](const std::string& field, std::string description) {
    out->push_back({path + "." + field, std::move(description)});
  };
  if (dtype_known && IsCastType(spec.dtype)) return;
  const bool mx = dtype_known && IsMxType(spec.dtype);
  // Known dtype, unknown qscheme: what the dtype alone decides.
  if (mx) {
    QuantSpec block = spec;
    block.qscheme = QScheme::kPerGroup;
    ValidateSpec(block, role, path, out);
    return;
  }
  if (dtype_known && !spec.symmetric && !IsIntType(spec.dtype)) {
    add("symmetric", std::string(DataTypeName(spec.dtype)) +
                         " is symmetric (no zero point); asymmetric needs an integer dtype");
  }
  // Every dtype and qscheme refuses a group_size below -1; per_group 0 too.
  if (spec.group_size.has_value() &&
      (*spec.group_size < -1 ||
       (*spec.group_size == 0 && qscheme_known && spec.qscheme == QScheme::kPerGroup))) {
    add("group_size", "group_size must be positive (or -1 for the whole axis); got " +
                          std::to_string(*spec.group_size));
  }
  if (spec.percentile.has_value() &&
      !(*spec.percentile > 0.0 && *spec.percentile <= 100.0 && std::isfinite(*spec.percentile))) {
    add("percentile", "percentile must be in (0, 100]; got " + FormatNumber(*spec.percentile));
  }
  if (spec.observer != ObserverType::kMinMax) {
    if (qscheme_known && spec.qscheme != QScheme::kPerTensor) {
      add("observer", std::string(ObserverTypeName(spec.observer)) +
                          " observers are per_tensor (as in the reference); got " +
                          std::string(QSchemeName(spec.qscheme)) + ", use min_max");
    } else if (spec.is_dynamic) {
      add("observer", std::string(ObserverTypeName(spec.observer)) +
                          " observers calibrate a static range; dynamic specs use min_max");
    }
  }
}

}  // namespace quantd::quant
