#include "worker/quant/format_table.h"

namespace quantd::quant {
namespace {

using F = FormatFamily;
using K = MinifloatKind;

// Minifloat layouts: {ebits, mbits, bias, max_norm, emax}.
constexpr MinifloatFormat kE4M3 = {4, 3, 7, 448.0f, 8};
constexpr MinifloatFormat kE5M2 = {5, 2, 15, 57344.0f, 15};
constexpr MinifloatFormat kE3M2 = {3, 2, 3, 28.0f, 4};
constexpr MinifloatFormat kE2M3 = {2, 3, 1, 7.5f, 2};
constexpr MinifloatFormat kE2M1 = {2, 1, 1, 6.0f, 2};
// MXINT8 elements: 8-bit two's complement integers in units of 2^-6.
constexpr MinifloatFormat kMxInt8Element = {0, 8, 0, 127.0f, 0};
constexpr MinifloatFormat kNoMinifloat = {};

constexpr std::array<FormatRow, kNumDataTypes> kTable = {{
    // dtype, name, family, bits, signed, code range, minifloat, kind, MX element
    {DataType::kInt2, "int2", F::kInt, 2, true, {-2, 1}, kNoMinifloat, K::kFinite, ""},
    {DataType::kInt3, "int3", F::kInt, 3, true, {-4, 3}, kNoMinifloat, K::kFinite, ""},
    {DataType::kInt4, "int4", F::kInt, 4, true, {-8, 7}, kNoMinifloat, K::kFinite, ""},
    {DataType::kInt8, "int8", F::kInt, 8, true, {-128, 127}, kNoMinifloat, K::kFinite, ""},
    {DataType::kUInt2, "uint2", F::kInt, 2, false, {0, 3}, kNoMinifloat, K::kFinite, ""},
    {DataType::kUInt3, "uint3", F::kInt, 3, false, {0, 7}, kNoMinifloat, K::kFinite, ""},
    {DataType::kUInt4, "uint4", F::kInt, 4, false, {0, 15}, kNoMinifloat, K::kFinite, ""},
    {DataType::kUInt8, "uint8", F::kInt, 8, false, {0, 255}, kNoMinifloat, K::kFinite, ""},
    {DataType::kFp8E4M3, "fp8_e4m3", F::kFp8, 8, true, {0, 0}, kE4M3, K::kE4M3Fn, ""},
    {DataType::kFp8E5M2, "fp8_e5m2", F::kFp8, 8, true, {0, 0}, kE5M2, K::kE5M2, ""},
    {DataType::kMxFp8E4M3, "mxfp8_e4m3", F::kMx, 8, true, {0, 0}, kE4M3, K::kE4M3Fn, "fp8_e4m3"},
    {DataType::kMxFp8E5M2, "mxfp8_e5m2", F::kMx, 8, true, {0, 0}, kE5M2, K::kE5M2, "fp8_e5m2"},
    {DataType::kMxFp6E3M2, "mxfp6_e3m2", F::kMx, 6, true, {0, 0}, kE3M2, K::kFinite, "fp6_e3m2"},
    {DataType::kMxFp6E2M3, "mxfp6_e2m3", F::kMx, 6, true, {0, 0}, kE2M3, K::kFinite, "fp6_e2m3"},
    {DataType::kMxFp4, "mxfp4", F::kMx, 4, true, {0, 0}, kE2M1, K::kFinite, "fp4"},
    {DataType::kMxInt8, "mxint8", F::kMx, 8, true, {-127, 127}, kMxInt8Element, K::kFinite,
     "int8"},
    {DataType::kFloat16, "float16", F::kCast, 16, true, {0, 0}, kNoMinifloat, K::kFinite, ""},
    {DataType::kBFloat16, "bfloat16", F::kCast, 16, true, {0, 0}, kNoMinifloat, K::kFinite, ""},
}};

// FormatOf indexes the table by the enum value.
constexpr bool RowsInEnumOrder() {
  for (size_t i = 0; i < kTable.size(); ++i) {
    if (static_cast<size_t>(kTable[i].dtype) != i) return false;
  }
  return true;
}
static_assert(RowsInEnumOrder(), "kTable's rows must follow the DataType enum");

// What the switches of spec.cc answered for a value outside the enum.
constexpr FormatRow kUnknownRow = {
    DataType::kInt8, "unknown", F::kUnknown, 8, false, {0, 0}, kNoMinifloat, K::kFinite, ""};

}  // namespace

const std::array<FormatRow, kNumDataTypes>& FormatTable() { return kTable; }

const FormatRow& FormatOf(DataType t) {
  const auto i = static_cast<size_t>(t);
  return i < kTable.size() ? kTable[i] : kUnknownRow;
}

std::optional<DataType> FindFormatByName(std::string_view name) {
  for (const FormatRow& row : kTable) {
    if (row.name == name) return row.dtype;
  }
  return std::nullopt;
}

std::optional<DataType> FindMxFormatByElementName(std::string_view element) {
  if (element.empty()) return std::nullopt;
  for (const FormatRow& row : kTable) {
    if (row.reference_element_name == element) return row.dtype;
  }
  return std::nullopt;
}

}  // namespace quantd::quant
