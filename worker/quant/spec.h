// QuantSpec: how one tensor (a weight, a bias, an input or an output) is
// quantized, with the reference toolkit's (AMD Quark) vocabulary.
//
// This header is torch-free on purpose: the server validates configs with it
// and must not link LibTorch. It holds the enums, their names as the
// reference's JSON spells them ("int4", "fp8_e4m3", "per_group",
// "half_even", ...), the integer ranges, the MX element formats, a one-line
// description of a spec, and the per-tensor validation rules.
#ifndef QUANTD_WORKER_QUANT_SPEC_H_
#define QUANTD_WORKER_QUANT_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "worker/common/status.h"

namespace quantd::quant {

// Target data type. MX types are the OCP Microscaling formats: blocks of 32
// elements that share a power-of-two (E8M0) scale. Each value has one row in
// the format table (format_table.h), which holds its name and properties;
// a new value needs its row there (format_table_test checks).
enum class DataType {
  kInt2,
  kInt3,
  kInt4,
  kInt8,
  kUInt2,
  kUInt3,
  kUInt4,
  kUInt8,
  kFp8E4M3,
  kFp8E5M2,
  kMxFp8E4M3,
  kMxFp8E5M2,
  kMxFp6E3M2,
  kMxFp6E2M3,
  kMxFp4,
  kMxInt8,
  kFloat16,   // plain cast
  kBFloat16,  // plain cast
};

enum class QScheme { kPerTensor, kPerChannel, kPerGroup };

// How x / scale is rounded to an integer code. The reference's default is
// half_even.
enum class RoundMethod {
  kHalfEven,  // "half_even": round half to even (torch.round, std::nearbyint)
  kRound,     // "round": round half away from zero (std::round)
  kFloor,     // "floor"
};

// The precision a scale is stored (and applied) in.
enum class ScaleType {
  kFloat,     // "float": the input's own float dtype (the reference's default)
  kFloat32,   // "float32"
  kFloat16,   // "float16"
  kBFloat16,  // "bfloat16"
  kPowerOf2,  // "pof2": 2^round(log2(scale))
};

enum class ObserverType {
  kMinMax,      // running min / max
  kPercentile,  // histogram of |x|, range at a percentile
  kMse,         // histogram of |x|, range that minimises the quantization error
};

// How an MX block's shared exponent is derived from the block's amax.
enum class MxScaleMode {
  kEven,   // round amax's mantissa at the element's mbits, then floor (reference default)
  kFloor,  // floor(log2(amax)) - emax (the OCP spec)
  kCeil,   // ceil(log2(amax)) - emax
};

enum class ZeroPointType { kInt32, kFloat32 };

// The tensor of a layer a spec applies to; some rules depend on it (static
// per_group quantization is only supported for weights, as in the reference).
enum class TensorRole { kWeight, kBias, kInput, kOutput };

// Default percentile of the Percentile observer, the reference's constant.
inline constexpr double kDefaultPercentile = 99.99999999;
// Elements per MX block (OCP MX v1.0).
inline constexpr int kMxBlockSize = 32;
// The smallest scale the integer and FP8 paths produce: float32 epsilon.
inline constexpr float kScaleFloor = 1.1920928955078125e-07f;  // 2^-23

struct QuantSpec {
  DataType dtype = DataType::kInt8;
  QScheme qscheme = QScheme::kPerTensor;
  // per_channel: the axis that keeps its own parameters (0 for a weight's
  // output channels; 1 of [batch, seq, hidden] for per-token activations, as
  // in the reference). per_group and MX: the axis the groups run along (the
  // input axis, -1 or 1 for a Linear weight). Negative values count from the
  // end. Unset: 0 for per_channel, -1 for per_group and MX.
  std::optional<int> ch_axis;
  // Elements per group (per_group). MX formats always use 32. Unset for
  // per_group is an error; -1 means the whole axis is one group.
  std::optional<int> group_size;
  bool symmetric = true;
  // Parameters computed at every forward instead of calibrated.
  bool is_dynamic = false;
  RoundMethod round_method = RoundMethod::kHalfEven;
  ScaleType scale_type = ScaleType::kFloat;
  ObserverType observer = ObserverType::kMinMax;
  // Percentile observer: percentile of |x| in (0, 100]. Unset: 99.99999999.
  std::optional<double> percentile;
  MxScaleMode mx_scale_mode = MxScaleMode::kEven;
  ZeroPointType zero_point_type = ZeroPointType::kInt32;

  bool operator==(const QuantSpec& o) const;
  bool operator!=(const QuantSpec& o) const { return !(*this == o); }
};

// ---- names (the reference toolkit's JSON spelling) ----

// "int4", "uint8", "fp8_e4m3", "mxfp4", "mxfp6_e2m3", "mxint8", "float16",
// "bfloat16", ... For the MX types this is quantd's own name; the reference
// writes an MX type as its element dtype plus scale_format "e8m0" (see
// worker/config), and ReferenceElementName gives that element name.
std::string_view DataTypeName(DataType t);
// Accepts every DataTypeName plus the aliases "fp16", "bf16", "mxfp8"
// (= mxfp8_e4m3), "mxfp6" is refused as ambiguous. Case-insensitive.
std::optional<DataType> DataTypeFromName(std::string_view name);
// The reference's dtype of an MX type's elements: "fp4", "fp6_e3m2",
// "fp6_e2m3", "fp8_e4m3", "fp8_e5m2" or "int8". Empty for non-MX types.
std::string_view ReferenceElementName(DataType t);
// The MX type whose elements the reference names `element` ("fp4", ...).
std::optional<DataType> MxTypeFromElementName(std::string_view element);

std::string_view QSchemeName(QScheme s);  // "per_tensor", "per_channel", "per_group"
std::optional<QScheme> QSchemeFromName(std::string_view name);
std::string_view RoundMethodName(RoundMethod r);  // "half_even", "round", "floor"
std::optional<RoundMethod> RoundMethodFromName(std::string_view name);
std::string_view ScaleTypeName(ScaleType s);  // "float", "float32", "float16", "bfloat16", "pof2"
// Also accepts "power_of_2" (the reference's spec-helper spelling).
std::optional<ScaleType> ScaleTypeFromName(std::string_view name);
std::string_view ObserverTypeName(ObserverType o);  // "min_max", "percentile", "mse"
// Accepts "min_max", "percentile", "mse" / "MSE".
std::optional<ObserverType> ObserverTypeFromName(std::string_view name);
std::string_view MxScaleModeName(MxScaleMode m);  // "even", "floor", "ceil"
std::optional<MxScaleMode> MxScaleModeFromName(std::string_view name);
std::string_view ZeroPointTypeName(ZeroPointType z);  // "int32", "float32"
std::optional<ZeroPointType> ZeroPointTypeFromName(std::string_view name);
std::string_view TensorRoleName(
    TensorRole r);  // "weight", "bias", "input_tensors", "output_tensors"

// Comma-separated list of every accepted DataTypeName, for error messages.
std::string AllDataTypeNames();

// ---- properties of data types (lookups in format_table.h's rows) ----

bool IsIntType(DataType t);    // int2..int8, uint2..uint8
bool IsSignedInt(DataType t);  // int2..int8
bool IsFp8Type(DataType t);    // fp8_e4m3, fp8_e5m2 (scaled, not MX)
bool IsMxType(DataType t);     // every MX format, MXINT8 included
bool IsCastType(DataType t);   // float16, bfloat16
// Bits per stored element (2..8; 16 for the casts).
int BitWidth(DataType t);

// [qmin, qmax] of an integer type: int8 [-128, 127], uint8 [0, 255],
// int4 [-8, 7], uint4 [0, 15], int3 [-4, 3], uint3 [0, 7], int2 [-2, 1],
// uint2 [0, 3]. For MXINT8 elements: [-127, 127].
struct IntRange {
  int qmin = 0;
  int qmax = 0;
};
IntRange IntRangeOf(DataType t);

// A minifloat element format (FP8 and MX elements): exponent and mantissa
// bits, the exponent bias, the largest finite value, and emax (the exponent
// of the largest normal, which MX subtracts from the block's exponent).
struct MinifloatFormat {
  int ebits = 0;
  int mbits = 0;
  int bias = 0;
  float max_norm = 0.0f;  // 448, 57344, 28, 7.5, 6
  int emax = 0;           // 8, 15, 4, 2, 2 (0 for MXINT8)
};
// For fp8_e4m3 / fp8_e5m2 and the MX types (for MXINT8: ebits 0, mbits 8,
// emax 0, max_norm 127 in element units of 2^-6).
MinifloatFormat MinifloatFormatOf(DataType t);

// ---- spec helpers ----

// ch_axis with its default applied (see QuantSpec::ch_axis).
int EffectiveChAxis(const QuantSpec& spec);
// group_size with MX fixed to 32; 0 when not grouped.
int EffectiveGroupSize(const QuantSpec& spec);
double EffectivePercentile(const QuantSpec& spec);

// One line such as "int4 per_group(128) sym", "uint8 per_tensor asym dynamic",
// "fp8_e4m3 per_tensor", "mxfp4 block 32 (even)", "int8 per_channel(axis 0)
// sym percentile(99.99)", "bfloat16 cast".
std::string DescribeSpec(const QuantSpec& spec);

// Checks one spec; appends a violation per bad field to `out`, with field
// paths `path` + "." + field (e.g. "global_quant_config.weight.group_size").
// Rules: group_size positive (or -1) for per_group and 32 for MX; MX is
// symmetric; asymmetric needs an integer dtype; static per_group is only for
// weights and biases (reference rule); percentile in (0, 100]; percentile and
// MSE observers are per_tensor (as in the reference); float zero points only
// for asymmetric integer specs; ch_axis is checked against the tensor's rank
// only when the tensor is known (see the kernels).
void ValidateSpec(const QuantSpec& spec, TensorRole role, const std::string& path,
                  std::vector<FieldViolation>* out);

// For a spec a parser could only partly read (an unknown dtype or qscheme):
// the checks that hold whatever the unread field is, so that one mistake
// does not hide the others of the same spec. With neither unknown it is
// ValidateSpec. Checks that depend on an unknown field are skipped: with an
// unknown dtype a group_size below -1 (or 0 for per_group) is still wrong,
// a percentile out of (0, 100] too, and a percentile / MSE observer on a
// dynamic or non-per_tensor spec; what is symmetric, rounds or scales how
// depends on the dtype.
void ValidatePartialSpec(const QuantSpec& spec, TensorRole role, const std::string& path,
                         bool dtype_known, bool qscheme_known, std::vector<FieldViolation>* out);

}  // namespace quantd::quant

#endif  // QUANTD_WORKER_QUANT_SPEC_H_
