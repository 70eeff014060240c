// The format table against facts derived independently of its rows: every
// DataType has one row, code ranges follow from bits and signedness,
// minifloat bias / max / emax follow from the exponent and mantissa layout
// (and agree with decoding every bit pattern), and every family has a
// complete kernel row.
#include "worker/quant/format_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "worker/quant/float_bits.h"
#include "worker/quant/format_kernels.h"
#include "worker/quant/spec.h"

namespace quantd::quant {
namespace {

// Every value of the DataType enum, written out independently of the table.
const std::vector<DataType>& AllDataTypes() {
  static const std::vector<DataType> all = {
      DataType::kInt2,      DataType::kInt3,      DataType::kInt4,      DataType::kInt8,
      DataType::kUInt2,     DataType::kUInt3,     DataType::kUInt4,     DataType::kUInt8,
      DataType::kFp8E4M3,   DataType::kFp8E5M2,   DataType::kMxFp8E4M3, DataType::kMxFp8E5M2,
      DataType::kMxFp6E3M2, DataType::kMxFp6E2M3, DataType::kMxFp4,     DataType::kMxInt8,
      DataType::kFloat16,   DataType::kBFloat16,
  };
  return all;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

TEST(FormatTableTest, EveryDataTypeHasExactlyOneRow) {
  ASSERT_EQ(FormatTable().size(), AllDataTypes().size());
  for (DataType t : AllDataTypes()) {
    int rows = 0;
    for (const FormatRow& row : FormatTable()) rows += row.dtype == t ? 1 : 0;
    EXPECT_EQ(rows, 1) << DataTypeName(t);
    EXPECT_EQ(FormatOf(t).dtype, t);
  }
  std::set<std::string_view> names;
  for (const FormatRow& row : FormatTable()) {
    EXPECT_TRUE(names.insert(row.name).second) << "duplicate name " << row.name;
    EXPECT_EQ(FindFormatByName(row.name), row.dtype) << row.name;
  }
}

TEST(FormatTableTest, FamilyAndSignednessFollowTheName) {
  for (const FormatRow& row : FormatTable()) {
    const std::string_view n = row.name;
    FormatFamily want = FormatFamily::kCast;
    if (StartsWith(n, "mx")) {
      want = FormatFamily::kMx;
    } else if (StartsWith(n, "fp8_")) {
      want = FormatFamily::kFp8;
    } else if (StartsWith(n, "int") || StartsWith(n, "uint")) {
      want = FormatFamily::kInt;
    } else {
      EXPECT_TRUE(n == "float16" || n == "bfloat16") << n;
    }
    EXPECT_EQ(row.family, want) << n;
    EXPECT_EQ(row.is_signed, !StartsWith(n, "uint")) << n;
    // MX rows, and only they, name the reference's element dtype.
    EXPECT_EQ(row.reference_element_name.empty(), want != FormatFamily::kMx) << n;
    if (want == FormatFamily::kMx) {
      EXPECT_EQ(MxTypeFromElementName(row.reference_element_name), row.dtype) << n;
    }
  }
}

TEST(FormatTableTest, IntegerCodeRangesFollowFromBitsAndSign) {
  for (const FormatRow& row : FormatTable()) {
    if (row.family != FormatFamily::kInt) continue;
    // The bit count is the name's number ("int4", "uint8").
    EXPECT_EQ(std::to_string(row.bits), std::string(row.name.substr(row.is_signed ? 3 : 4)));
    const int levels = 1 << row.bits;
    const IntRange want = row.is_signed ? IntRange{-levels / 2, levels / 2 - 1}
                                        : IntRange{0, levels - 1};
    EXPECT_EQ(row.code_range.qmin, want.qmin) << row.name;
    EXPECT_EQ(row.code_range.qmax, want.qmax) << row.name;
    EXPECT_EQ(row.minifloat.ebits + row.minifloat.mbits, 0) << row.name;
  }
  // MXINT8: symmetric 8-bit elements (the OCP spec drops -128), units of 2^-6.
  const FormatRow& mxint8 = FormatOf(DataType::kMxInt8);
  EXPECT_EQ(mxint8.bits, 8);
  EXPECT_EQ(mxint8.code_range.qmin, -127);
  EXPECT_EQ(mxint8.code_range.qmax, 127);
  EXPECT_EQ(mxint8.minifloat.mbits, mxint8.bits);
  EXPECT_EQ(mxint8.minifloat.max_norm, static_cast<float>(mxint8.code_range.qmax));
}

// Largest finite value of a minifloat from its layout: IEEE-like e5m2
// reserves the top exponent; e4m3fn uses it but reserves the all-ones
// mantissa for NaN; FP6 / FP4 use every pattern.
double MaxFromLayout(int ebits, int mbits, int bias, MinifloatKind kind) {
  const int top = (1 << ebits) - 1;
  switch (kind) {
    case MinifloatKind::kE5M2:
      return std::ldexp(2.0 - std::ldexp(1.0, -mbits), top - 1 - bias);
    case MinifloatKind::kE4M3Fn:
      return std::ldexp(2.0 - std::ldexp(1.0, 1 - mbits), top - bias);
    case MinifloatKind::kFinite:
      return std::ldexp(2.0 - std::ldexp(1.0, -mbits), top - bias);
  }
  return 0.0;
}

TEST(FormatTableTest, MinifloatFieldsFollowFromTheLayout) {
  int minifloats = 0;
  for (const FormatRow& row : FormatTable()) {
    const MinifloatFormat& f = row.minifloat;
    if (f.ebits == 0) {
      EXPECT_EQ(row.minifloat_kind, MinifloatKind::kFinite) << row.name;
      EXPECT_FALSE(row.has_inf() || row.has_nan()) << row.name;
      continue;
    }
    ++minifloats;
    SCOPED_TRACE(std::string(row.name));
    EXPECT_TRUE(row.family == FormatFamily::kFp8 || row.family == FormatFamily::kMx);
    EXPECT_EQ(row.bits, 1 + f.ebits + f.mbits);
    EXPECT_EQ(f.bias, (1 << (f.ebits - 1)) - 1);
    EXPECT_EQ(static_cast<double>(f.max_norm),
              MaxFromLayout(f.ebits, f.mbits, f.bias, row.minifloat_kind));
    EXPECT_EQ(f.emax, static_cast<int>(std::floor(std::log2(f.max_norm))));
    EXPECT_EQ(MinifloatFormatOf(row.dtype).max_norm, f.max_norm);

    // Decoding every bit pattern: the largest finite value is max_norm and
    // the specials are the kind's.
    float largest = 0.0f;
    bool saw_inf = false;
    bool saw_nan = false;
    for (int code = 0; code < (1 << row.bits); ++code) {
      const float v = DecodeMinifloat(static_cast<uint8_t>(code), f, row.minifloat_kind);
      saw_inf |= std::isinf(v);
      saw_nan |= std::isnan(v);
      if (std::isfinite(v)) largest = std::max(largest, v);
    }
    EXPECT_EQ(largest, f.max_norm);
    EXPECT_EQ(saw_inf, row.has_inf());
    EXPECT_EQ(saw_nan, row.has_nan());
  }
  EXPECT_EQ(minifloats, 7);  // fp8 x2, mxfp8 x2, mxfp6 x2, mxfp4
  // The OCP values, spelled out.
  EXPECT_EQ(FormatOf(DataType::kFp8E4M3).minifloat.max_norm, 448.0f);
  EXPECT_EQ(FormatOf(DataType::kFp8E5M2).minifloat.max_norm, 57344.0f);
  EXPECT_EQ(FormatOf(DataType::kMxFp6E3M2).minifloat.max_norm, 28.0f);
  EXPECT_EQ(FormatOf(DataType::kMxFp6E2M3).minifloat.max_norm, 7.5f);
  EXPECT_EQ(FormatOf(DataType::kMxFp4).minifloat.max_norm, 6.0f);
}

TEST(FormatTableTest, SpecPredicatesReadTheRows) {
  for (const FormatRow& row : FormatTable()) {
    EXPECT_EQ(DataTypeName(row.dtype), row.name);
    EXPECT_EQ(BitWidth(row.dtype), row.bits);
    EXPECT_EQ(IsIntType(row.dtype), row.family == FormatFamily::kInt);
    EXPECT_EQ(IsSignedInt(row.dtype), row.family == FormatFamily::kInt && row.is_signed);
    EXPECT_EQ(IsFp8Type(row.dtype), row.family == FormatFamily::kFp8);
    EXPECT_EQ(IsMxType(row.dtype), row.family == FormatFamily::kMx);
    EXPECT_EQ(IsCastType(row.dtype), row.family == FormatFamily::kCast);
  }
  EXPECT_EQ(FormatOf(DataType::kFloat16).bits, 16);
  EXPECT_EQ(FormatOf(DataType::kBFloat16).bits, 16);
}

TEST(FormatTableTest, AValueOutsideTheEnumIsUnknown) {
  const auto bogus = static_cast<DataType>(kNumDataTypes + 3);
  EXPECT_EQ(FormatOf(bogus).family, FormatFamily::kUnknown);
  EXPECT_EQ(DataTypeName(bogus), "unknown");
  EXPECT_FALSE(IsIntType(bogus) || IsFp8Type(bogus) || IsMxType(bogus) || IsCastType(bogus));
  EXPECT_FALSE(KernelsOf(FormatFamily::kUnknown).ok());
}

TEST(FormatTableTest, EveryFamilyHasACompleteKernelRow) {
  for (const FormatRow& row : FormatTable()) {
    SCOPED_TRACE(std::string(row.name));
    QuantSpec spec;
    spec.dtype = row.dtype;
    auto kernels = KernelsFor(spec);
    ASSERT_TRUE(kernels.ok());
    const FormatKernels& k = **kernels;
    EXPECT_NE(k.qparams, nullptr);
    EXPECT_NE(k.fake_quant_fused, nullptr);
    EXPECT_NE(k.fake_quant_ref, nullptr);
    EXPECT_NE(k.fake_quant_composed, nullptr);
    EXPECT_NE(k.fake_quant_dynamic_fused, nullptr);
    EXPECT_NE(k.fake_quant_dynamic_composed, nullptr);
    EXPECT_NE(k.quantize_fused, nullptr);
    EXPECT_NE(k.quantize_composed, nullptr);
    EXPECT_NE(k.dequantize, nullptr);
  }
}

}  // namespace
}  // namespace quantd::quant
