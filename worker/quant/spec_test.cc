#include "worker/quant/spec.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace quantd::quant {
namespace {

TEST(SpecNamesTest, EveryDataTypeRoundTripsThroughItsName) {
  const std::vector<std::pair<DataType, std::string>> expected = {
      {DataType::kInt2, "int2"},
      {DataType::kInt3, "int3"},
      {DataType::kInt4, "int4"},
      {DataType::kInt8, "int8"},
      {DataType::kUInt2, "uint2"},
      {DataType::kUInt3, "uint3"},
      {DataType::kUInt4, "uint4"},
      {DataType::kUInt8, "uint8"},
      {DataType::kFp8E4M3, "fp8_e4m3"},
      {DataType::kFp8E5M2, "fp8_e5m2"},
      {DataType::kMxFp8E4M3, "mxfp8_e4m3"},
      {DataType::kMxFp8E5M2, "mxfp8_e5m2"},
      {DataType::kMxFp6E3M2, "mxfp6_e3m2"},
      {DataType::kMxFp6E2M3, "mxfp6_e2m3"},
      {DataType::kMxFp4, "mxfp4"},
      {DataType::kMxInt8, "mxint8"},
      {DataType::kFloat16, "float16"},
      {DataType::kBFloat16, "bfloat16"},
  };
  for (const auto& [type, name] : expected) {
    EXPECT_EQ(DataTypeName(type), name);
    ASSERT_TRUE(DataTypeFromName(name).has_value()) << name;
    EXPECT_EQ(*DataTypeFromName(name), type) << name;
  }
  EXPECT_EQ(DataTypeFromName("FP8_E4M3"), DataType::kFp8E4M3);
  EXPECT_EQ(DataTypeFromName("bf16"), DataType::kBFloat16);
  EXPECT_EQ(DataTypeFromName("fp16"), DataType::kFloat16);
  EXPECT_EQ(DataTypeFromName("mxfp8"), DataType::kMxFp8E4M3);
  EXPECT_FALSE(DataTypeFromName("int5").has_value());
  EXPECT_FALSE(DataTypeFromName("mxfp6").has_value());
  EXPECT_EQ(AllDataTypeNames().substr(0, 16), "int2, int3, int4");
}

TEST(SpecNamesTest, ReferenceElementNamesOfMxTypes) {
  EXPECT_EQ(ReferenceElementName(DataType::kMxFp4), "fp4");
  EXPECT_EQ(ReferenceElementName(DataType::kMxFp6E2M3), "fp6_e2m3");
  EXPECT_EQ(ReferenceElementName(DataType::kMxFp6E3M2), "fp6_e3m2");
  EXPECT_EQ(ReferenceElementName(DataType::kMxFp8E5M2), "fp8_e5m2");
  EXPECT_EQ(ReferenceElementName(DataType::kMxInt8), "int8");
  EXPECT_EQ(ReferenceElementName(DataType::kInt8), "");
  EXPECT_EQ(MxTypeFromElementName("fp8_e4m3"), DataType::kMxFp8E4M3);
  EXPECT_EQ(MxTypeFromElementName("fp4"), DataType::kMxFp4);
  EXPECT_FALSE(MxTypeFromElementName("int4").has_value());
}

TEST(SpecNamesTest, EnumNamesMatchTheReferenceSpelling) {
  EXPECT_EQ(QSchemeName(QScheme::kPerGroup), "per_group");
  EXPECT_EQ(QSchemeFromName("per_channel"), QScheme::kPerChannel);
  EXPECT_FALSE(QSchemeFromName("per_block").has_value());
  EXPECT_EQ(RoundMethodName(RoundMethod::kHalfEven), "half_even");
  EXPECT_EQ(RoundMethodFromName("round"), RoundMethod::kRound);
  EXPECT_EQ(RoundMethodFromName("floor"), RoundMethod::kFloor);
  EXPECT_EQ(ScaleTypeName(ScaleType::kFloat), "float");
  EXPECT_EQ(ScaleTypeName(ScaleType::kPowerOf2), "pof2");
  EXPECT_EQ(ScaleTypeFromName("power_of_2"), ScaleType::kPowerOf2);
  EXPECT_EQ(ScaleTypeFromName("bfloat16"), ScaleType::kBFloat16);
  EXPECT_EQ(ObserverTypeFromName("MSE"), ObserverType::kMse);
  EXPECT_EQ(ObserverTypeName(ObserverType::kMinMax), "min_max");
  EXPECT_EQ(MxScaleModeFromName("ceil"), MxScaleMode::kCeil);
  EXPECT_EQ(MxScaleModeName(MxScaleMode::kEven), "even");
  EXPECT_EQ(ZeroPointTypeFromName("float32"), ZeroPointType::kFloat32);
  EXPECT_EQ(TensorRoleName(TensorRole::kInput), "input_tensors");
}

TEST(SpecPropertiesTest, IntegerRangesFollowTheDesign) {
  auto range = [](DataType t) {
    IntRange r = IntRangeOf(t);
    return std::make_pair(r.qmin, r.qmax);
  };
  EXPECT_EQ(range(DataType::kInt8), std::make_pair(-128, 127));
  EXPECT_EQ(range(DataType::kUInt8), std::make_pair(0, 255));
  EXPECT_EQ(range(DataType::kInt4), std::make_pair(-8, 7));
  EXPECT_EQ(range(DataType::kUInt4), std::make_pair(0, 15));
  EXPECT_EQ(range(DataType::kInt3), std::make_pair(-4, 3));
  EXPECT_EQ(range(DataType::kUInt3), std::make_pair(0, 7));
  EXPECT_EQ(range(DataType::kInt2), std::make_pair(-2, 1));
  EXPECT_EQ(range(DataType::kUInt2), std::make_pair(0, 3));
  EXPECT_EQ(range(DataType::kMxInt8), std::make_pair(-127, 127));
  EXPECT_EQ(BitWidth(DataType::kUInt3), 3);
  EXPECT_EQ(BitWidth(DataType::kMxFp6E2M3), 6);
  EXPECT_TRUE(IsSignedInt(DataType::kInt3));
  EXPECT_FALSE(IsSignedInt(DataType::kUInt3));
  EXPECT_TRUE(IsMxType(DataType::kMxInt8));
  EXPECT_FALSE(IsMxType(DataType::kFp8E4M3));
  EXPECT_TRUE(IsFp8Type(DataType::kFp8E5M2));
  EXPECT_TRUE(IsCastType(DataType::kBFloat16));
}

TEST(SpecPropertiesTest, MinifloatFormatsHaveTheOcpConstants) {
  struct Expected {
    DataType type;
    int ebits, mbits, emax;
    float max_norm;
  };
  for (const Expected& e : std::vector<Expected>{
           {DataType::kFp8E4M3, 4, 3, 8, 448.0f},
           {DataType::kMxFp8E5M2, 5, 2, 15, 57344.0f},
           {DataType::kMxFp6E3M2, 3, 2, 4, 28.0f},
           {DataType::kMxFp6E2M3, 2, 3, 2, 7.5f},
           {DataType::kMxFp4, 2, 1, 2, 6.0f},
           {DataType::kMxInt8, 0, 8, 0, 127.0f},
       }) {
    MinifloatFormat f = MinifloatFormatOf(e.type);
    EXPECT_EQ(f.ebits, e.ebits) << DataTypeName(e.type);
    EXPECT_EQ(f.mbits, e.mbits) << DataTypeName(e.type);
    EXPECT_EQ(f.emax, e.emax) << DataTypeName(e.type);
    EXPECT_EQ(f.max_norm, e.max_norm) << DataTypeName(e.type);
    if (f.ebits > 0) {
      // max_norm = 2^emax * (2 - 2^-mbits), except e4m3fn whose top mantissa
      // code is NaN, leaving 1.75 * 2^8.
      const float top = e.type == DataType::kFp8E4M3 ? 1.75f : 2.0f - 1.0f / (1 << f.mbits);
      EXPECT_EQ(f.max_norm, top * static_cast<float>(1 << f.emax)) << DataTypeName(e.type);
    }
  }
}

TEST(SpecHelpersTest, DefaultsForAxisGroupAndPercentile) {
  QuantSpec per_channel;
  per_channel.qscheme = QScheme::kPerChannel;
  EXPECT_EQ(EffectiveChAxis(per_channel), 0);
  per_channel.ch_axis = 1;
  EXPECT_EQ(EffectiveChAxis(per_channel), 1);

  QuantSpec mx;
  mx.dtype = DataType::kMxFp4;
  mx.qscheme = QScheme::kPerGroup;
  EXPECT_EQ(EffectiveChAxis(mx), -1);
  EXPECT_EQ(EffectiveGroupSize(mx), 32);

  QuantSpec group;
  group.qscheme = QScheme::kPerGroup;
  group.group_size = 128;
  EXPECT_EQ(EffectiveGroupSize(group), 128);
  EXPECT_EQ(EffectivePercentile(group), 99.99999999);
  group.percentile = 99.9;
  EXPECT_EQ(EffectivePercentile(group), 99.9);
}

TEST(SpecDescribeTest, OneLineDescriptions) {
  QuantSpec s;
  s.dtype = DataType::kInt4;
  s.qscheme = QScheme::kPerGroup;
  s.group_size = 128;
  EXPECT_EQ(DescribeSpec(s), "int4 per_group(128) sym");

  s = QuantSpec();
  s.dtype = DataType::kUInt8;
  s.symmetric = false;
  s.is_dynamic = true;
  EXPECT_EQ(DescribeSpec(s), "uint8 per_tensor asym dynamic");

  s = QuantSpec();
  s.dtype = DataType::kInt8;
  s.qscheme = QScheme::kPerChannel;
  s.observer = ObserverType::kPercentile;
  s.percentile = 99.99;
  EXPECT_EQ(DescribeSpec(s), "int8 per_channel(axis 0) sym percentile(99.99)");

  s = QuantSpec();
  s.dtype = DataType::kFp8E4M3;
  EXPECT_EQ(DescribeSpec(s), "fp8_e4m3 per_tensor");

  s = QuantSpec();
  s.dtype = DataType::kMxFp4;
  s.qscheme = QScheme::kPerGroup;
  s.is_dynamic = true;
  EXPECT_EQ(DescribeSpec(s), "mxfp4 block 32 (even) dynamic");

  s = QuantSpec();
  s.dtype = DataType::kUInt4;
  s.symmetric = false;
  s.qscheme = QScheme::kPerGroup;
  s.group_size = 64;
  s.round_method = RoundMethod::kFloor;
  s.scale_type = ScaleType::kPowerOf2;
  s.zero_point_type = ZeroPointType::kFloat32;
  EXPECT_EQ(DescribeSpec(s), "uint4 per_group(64) asym round=floor scale=pof2 zp=float32");

  s = QuantSpec();
  s.dtype = DataType::kBFloat16;
  EXPECT_EQ(DescribeSpec(s), "bfloat16 cast");
}

std::vector<std::string> FieldsOf(const std::vector<FieldViolation>& v) {
  std::vector<std::string> fields;
  for (const auto& fv : v) fields.push_back(fv.field);
  return fields;
}

TEST(SpecValidateTest, ValidSpecsHaveNoViolations) {
  std::vector<FieldViolation> out;
  QuantSpec w;
  w.dtype = DataType::kInt4;
  w.qscheme = QScheme::kPerGroup;
  w.group_size = 128;
  ValidateSpec(w, TensorRole::kWeight, "w", &out);
  QuantSpec a;
  a.dtype = DataType::kInt8;
  a.qscheme = QScheme::kPerChannel;
  a.ch_axis = 1;
  a.is_dynamic = true;
  ValidateSpec(a, TensorRole::kInput, "a", &out);
  QuantSpec mx;
  mx.dtype = DataType::kMxFp6E2M3;
  mx.qscheme = QScheme::kPerGroup;
  mx.group_size = 32;
  mx.is_dynamic = true;
  ValidateSpec(mx, TensorRole::kInput, "mx", &out);
  QuantSpec fp8;
  fp8.dtype = DataType::kFp8E4M3;
  fp8.observer = ObserverType::kMse;
  ValidateSpec(fp8, TensorRole::kOutput, "o", &out);
  EXPECT_TRUE(out.empty()) << out.front().field << ": " << out.front().description;
}

TEST(SpecValidateTest, ReportsEveryBadFieldWithItsPath) {
  std::vector<FieldViolation> out;
  QuantSpec mx;
  mx.dtype = DataType::kMxFp4;
  mx.qscheme = QScheme::kPerGroup;
  mx.symmetric = false;
  mx.group_size = 16;
  ValidateSpec(mx, TensorRole::kWeight, "global_quant_config.weight", &out);
  EXPECT_EQ(FieldsOf(out), (std::vector<std::string>{"global_quant_config.weight.symmetric",
                                                     "global_quant_config.weight.group_size"}));
  EXPECT_NE(out[0].description.find("asymmetric MX is not a format"), std::string::npos);

  out.clear();
  QuantSpec act;
  act.dtype = DataType::kInt8;
  act.qscheme = QScheme::kPerGroup;
  act.group_size = -4;
  act.percentile = 120.0;
  act.observer = ObserverType::kPercentile;
  ValidateSpec(act, TensorRole::kInput, "x", &out);
  EXPECT_EQ(FieldsOf(out), (std::vector<std::string>{"x.group_size", "x.is_dynamic", "x.percentile",
                                                     "x.observer"}));
  EXPECT_NE(out[1].description.find("static per_group quantization of input_tensors"),
            std::string::npos);

  out.clear();
  QuantSpec fp8;
  fp8.dtype = DataType::kFp8E5M2;
  fp8.symmetric = false;
  fp8.round_method = RoundMethod::kFloor;
  fp8.zero_point_type = ZeroPointType::kFloat32;
  fp8.scale_type = ScaleType::kPowerOf2;
  ValidateSpec(fp8, TensorRole::kWeight, "w", &out);
  EXPECT_EQ(FieldsOf(out), (std::vector<std::string>{"w.symmetric", "w.zero_point_type",
                                                     "w.round_method", "w.scale_type"}));

  out.clear();
  QuantSpec missing_group;
  missing_group.qscheme = QScheme::kPerGroup;
  ValidateSpec(missing_group, TensorRole::kWeight, "w", &out);
  EXPECT_EQ(FieldsOf(out), (std::vector<std::string>{"w.group_size"}));
}

}  // namespace
}  // namespace quantd::quant
