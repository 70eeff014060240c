#include "worker/quant/qparams.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace quantd::quant {
namespace {

QuantSpec IntSpec(DataType t, bool symmetric) {
  QuantSpec s;
  s.dtype = t;
  s.symmetric = symmetric;
  return s;
}

ScaleZeroPoint Params(const QuantSpec& spec, float mn, float mx,
                      at::ScalarType input = at::kFloat) {
  return IntQParamsFromMinMax(mn, mx, IntConstsFor(spec, input));
}

TEST(QParamsTest, SymmetricScaleDividesByHalfTheRange) {
  // int8: 255 / 2 = 127.5, not 127.
  ScaleZeroPoint p = Params(IntSpec(DataType::kInt8, true), -1.0f, 0.5f);
  EXPECT_EQ(p.scale, 1.0f / 127.5f);
  EXPECT_EQ(p.scale, 0.0078431377f);
  EXPECT_EQ(p.zero_point, 0.0f);
  p = Params(IntSpec(DataType::kInt4, true), -0.2f, 3.0f);
  EXPECT_EQ(p.scale, 3.0f / 7.5f);
  // Unsigned symmetric: zero point at the middle of the range.
  p = Params(IntSpec(DataType::kUInt8, true), -2.0f, 1.0f);
  EXPECT_EQ(p.scale, 2.0f / 127.5f);
  EXPECT_EQ(p.zero_point, 128.0f);
  EXPECT_EQ(Params(IntSpec(DataType::kUInt4, true), -2.0f, 1.0f).zero_point, 8.0f);
}

TEST(QParamsTest, AsymmetricWidensToZeroAndKeepsTheZeroPointInTheTargetDomain) {
  // int4 [-8, 7], range [-1, 3]: scale 4/15, zp = -8 - round(-3.75) = -4.
  ScaleZeroPoint p = Params(IntSpec(DataType::kInt4, false), -1.0f, 3.0f);
  EXPECT_EQ(p.scale, 4.0f / 15.0f);
  EXPECT_EQ(p.zero_point, -4.0f);
  // An all-positive range is widened to include 0: [0, 3] for uint8.
  p = Params(IntSpec(DataType::kUInt8, false), 1.0f, 3.0f);
  EXPECT_EQ(p.scale, 3.0f / 255.0f);
  EXPECT_EQ(p.zero_point, 0.0f);
  // An all-negative range: zp at qmax.
  p = Params(IntSpec(DataType::kUInt4, false), -3.0f, -1.0f);
  EXPECT_EQ(p.zero_point, 15.0f);
  // Float zero point: no widening, zp = qmin - min / scale.
  QuantSpec fz = IntSpec(DataType::kUInt4, false);
  fz.zero_point_type = ZeroPointType::kFloat32;
  p = Params(fz, 1.0f, 4.0f);
  EXPECT_EQ(p.scale, 3.0f / 15.0f);
  EXPECT_EQ(p.zero_point, 0.0f - 1.0f / (3.0f / 15.0f));
}

TEST(QParamsTest, ScaleFloorAndEmptySlots) {
  ScaleZeroPoint p = Params(IntSpec(DataType::kInt8, true), 0.0f, 0.0f);
  EXPECT_EQ(p.scale, kScaleFloor);
  EXPECT_EQ(p.scale, std::ldexp(1.0f, -23));
  p = Params(IntSpec(DataType::kInt8, false), 0.0f, 0.0f);
  EXPECT_EQ(p.scale, kScaleFloor);
  EXPECT_EQ(p.zero_point, -128.0f);
  const float inf = std::numeric_limits<float>::infinity();
  p = Params(IntSpec(DataType::kInt8, false), inf, -inf);  // nothing observed
  EXPECT_EQ(p.scale, 1.0f);
  EXPECT_EQ(p.zero_point, 0.0f);
  EXPECT_EQ(Fp8ScaleFromMinMax(0.0f, 0.0f, 448.0f, ScaleRounding::kNone), kScaleFloor);
  EXPECT_EQ(Fp8ScaleFromMinMax(-896.0f, 10.0f, 448.0f, ScaleRounding::kNone), 2.0f);
  EXPECT_EQ(Fp8ScaleFromMinMax(0.0f, 57344.0f, 57344.0f, ScaleRounding::kNone), 1.0f);
}

TEST(QParamsTest, ScaleTypes) {
  EXPECT_EQ(RoundScale(0.3f, ScaleRounding::kPowerOf2), 0.25f);
  EXPECT_EQ(RoundScale(0.36f, ScaleRounding::kPowerOf2), 0.5f);
  EXPECT_EQ(RoundScale(0.3535f, ScaleRounding::kPowerOf2), 0.25f);  // below 2^-1.5
  EXPECT_EQ(RoundScale(0.3536f, ScaleRounding::kPowerOf2), 0.5f);   // above 2^-1.5
  EXPECT_EQ(RoundScale(1.0f / 3.0f, ScaleRounding::kToBFloat16), 0.333984375f);
  EXPECT_EQ(RoundScale(1.0f / 3.0f, ScaleRounding::kToFloat16), 0.333251953125f);
  // The reference's "float" scale type follows the input's dtype.
  QuantSpec s = IntSpec(DataType::kInt8, true);
  EXPECT_EQ(ScaleRoundingFor(s, at::kFloat), ScaleRounding::kNone);
  EXPECT_EQ(ScaleRoundingFor(s, at::kBFloat16), ScaleRounding::kToBFloat16);
  EXPECT_EQ(ScaleRoundingFor(s, at::kHalf), ScaleRounding::kToFloat16);
  s.scale_type = ScaleType::kFloat32;
  EXPECT_EQ(ScaleRoundingFor(s, at::kBFloat16), ScaleRounding::kNone);
  // The zero point follows the rounded scale: pof2 scale 0.25 for [-1, 3].
  QuantSpec p2 = IntSpec(DataType::kUInt4, false);
  p2.scale_type = ScaleType::kPowerOf2;
  ScaleZeroPoint p = Params(p2, -1.0f, 3.0f);
  EXPECT_EQ(p.scale, 0.25f);
  EXPECT_EQ(p.zero_point, 4.0f);
}

TEST(QParamsTest, ComposedMatchesScalarBitForBit) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-5.0f, 5.0f);
  std::uniform_real_distribution<float> log_mag(-40.0f, 30.0f);
  const int n = 4000;
  std::vector<float> mn(n), mx(n);
  const float inf = std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i) {
    float a = dist(gen) * std::exp2(log_mag(gen));
    float b = dist(gen) * std::exp2(log_mag(gen));
    if (i % 50 == 0) b = a;  // degenerate range
    mn[i] = std::min(a, b);
    mx[i] = std::max(a, b);
  }
  mn[1] = inf;
  mx[1] = -inf;
  mn[2] = 0.0f;
  mx[2] = 0.0f;
  mn[3] = std::nanf("");
  const at::Tensor tmn = at::from_blob(mn.data(), {n}, at::kFloat).clone();
  const at::Tensor tmx = at::from_blob(mx.data(), {n}, at::kFloat).clone();
  std::vector<QuantSpec> specs;
  for (DataType t :
       {DataType::kInt2, DataType::kInt3, DataType::kInt4, DataType::kInt8, DataType::kUInt2,
        DataType::kUInt4, DataType::kUInt8, DataType::kFp8E4M3, DataType::kFp8E5M2}) {
    for (bool sym : {true, false}) {
      if (!sym && IsFp8Type(t)) continue;
      for (ScaleType st :
           {ScaleType::kFloat, ScaleType::kFloat16, ScaleType::kBFloat16, ScaleType::kPowerOf2}) {
        if (st == ScaleType::kPowerOf2 && IsFp8Type(t)) continue;
        QuantSpec s = IntSpec(t, sym);
        s.scale_type = st;
        specs.push_back(s);
        if (!sym) {
          s.zero_point_type = ZeroPointType::kFloat32;
          specs.push_back(s);
        }
      }
    }
  }
  for (const QuantSpec& s : specs) {
    for (at::ScalarType input : {at::kFloat, at::kBFloat16}) {
      std::vector<float> scale(n), zp(n);
      QParamsFromMinMaxArrays(mn.data(), mx.data(), n, s, input, scale.data(), zp.data());
      auto qp = QParamsFromMinMax(tmn, tmx, s, input);
      ASSERT_TRUE(qp.ok()) << qp.status();
      const at::Tensor cs = qp->scale.contiguous();
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(BitsOf(cs.data_ptr<float>()[i]), BitsOf(scale[i]))
            << DescribeSpec(s) << " slot " << i << " [" << mn[i] << ", " << mx[i] << "]";
      }
      if (IsIntType(s.dtype)) {
        const at::Tensor cz = qp->zero_point.to(at::kFloat).contiguous();
        EXPECT_EQ(
            qp->zero_point.scalar_type(),
            s.zero_point_type == ZeroPointType::kFloat32 && !s.symmetric ? at::kFloat : at::kInt);
        for (int i = 0; i < n; ++i) {
          ASSERT_EQ(cz.data_ptr<float>()[i], zp[i]) << DescribeSpec(s) << " slot " << i;
        }
      }
    }
  }
}

TEST(QParamsTest, ShapesAndLayoutErrors) {
  QuantSpec g;
  g.dtype = DataType::kInt4;
  g.qscheme = QScheme::kPerGroup;
  g.group_size = 4;
  g.ch_axis = 1;
  EXPECT_EQ(ParamSizes({6, 8}, g), (std::vector<int64_t>{6, 2}));
  auto shape = KernelShapeFor({6, 8}, g);
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->num_params(), 12);
  auto bad = KernelShapeFor({6, 10}, g);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("not a multiple of group_size 4"), std::string::npos);
  g.ch_axis = 2;
  EXPECT_FALSE(KernelShapeFor({6, 8}, g).ok());
  g.ch_axis = -1;
  g.group_size = -1;  // the whole axis
  EXPECT_EQ(ParamSizes({6, 8}, g), (std::vector<int64_t>{6, 1}));

  QuantSpec c;
  c.qscheme = QScheme::kPerChannel;
  EXPECT_EQ(ParamSizes({6, 8}, c), (std::vector<int64_t>{6}));
  c.ch_axis = -1;
  EXPECT_EQ(ParamSizes({2, 3, 8}, c), (std::vector<int64_t>{8}));
  EXPECT_EQ(ParamSizes({6, 8}, QuantSpec()), (std::vector<int64_t>{}));

  QuantSpec mx;
  mx.dtype = DataType::kMxFp4;
  mx.qscheme = QScheme::kPerGroup;
  EXPECT_EQ(ParamSizes({3, 70}, mx), (std::vector<int64_t>{3, 3}));  // tail padded
  EXPECT_TRUE(KernelShapeFor({3, 70}, mx).ok());
}

TEST(QParamsTest, ComposedMinMaxPerGranularity) {
  const at::Tensor x = at::arange(24, at::kFloat).reshape({2, 3, 4}) - 10.0;
  QuantSpec c;
  c.qscheme = QScheme::kPerChannel;
  c.ch_axis = 1;
  auto mm = MinMaxComposed(x, c);
  ASSERT_TRUE(mm.ok());
  EXPECT_TRUE(at::equal(mm->first, at::tensor({-10.0f, -6.0f, -2.0f})));
  EXPECT_TRUE(at::equal(mm->second, at::tensor({5.0f, 9.0f, 13.0f})));
  QuantSpec g;
  g.qscheme = QScheme::kPerGroup;
  g.group_size = 2;
  g.ch_axis = -1;
  mm = MinMaxComposed(x, g);
  ASSERT_TRUE(mm.ok());
  EXPECT_EQ(mm->first.sizes(), (at::IntArrayRef{2, 3, 2}));
  EXPECT_EQ(mm->first[1][2][1].item<float>(), 12.0f);
  EXPECT_EQ(mm->second[0][0][0].item<float>(), -9.0f);
}

}  // namespace
}  // namespace quantd::quant
