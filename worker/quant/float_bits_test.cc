#include "worker/quant/float_bits.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace quantd::quant {
namespace {

// Random float32 values over many magnitudes, plus the special ones.
std::vector<float> InterestingFloats(int n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> out = {0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f,
                            0.5f,
                            1.5f,
                            2.5f,
                            -2.5f,
                            65504.0f,
                            65520.0f,
                            6.1035156e-05f,
                            5.9604645e-08f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::max()};
  while (static_cast<int>(out.size()) < n) {
    const float f = FloatOf(bits(gen));
    if (!std::isnan(f)) out.push_back(f);
  }
  return out;
}

TEST(FloatBitsTest, BFloat16ConversionMatchesC10) {
  for (float f : InterestingFloats(200000, 1)) {
    const c10::BFloat16 ref(f);
    ASSERT_EQ(FloatToBf16Bits(f), ref.x) << f;
    ASSERT_EQ(BitsOf(Bf16BitsToFloat(ref.x)), BitsOf(static_cast<float>(ref))) << f;
  }
  EXPECT_TRUE(std::isnan(RoundToBFloat16(std::nanf(""))));
}

TEST(FloatBitsTest, Float16ConversionMatchesC10ForEveryCodeAndRandomFloats) {
  for (uint32_t code = 0; code < 65536; ++code) {
    const c10::Half h(static_cast<uint16_t>(code), c10::Half::from_bits());
    const float ref = static_cast<float>(h);
    const float mine = Fp16BitsToFloat(static_cast<uint16_t>(code));
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(mine)) << code;
    } else {
      ASSERT_EQ(BitsOf(mine), BitsOf(ref)) << code;
    }
  }
  for (float f : InterestingFloats(200000, 2)) {
    ASSERT_EQ(FloatToFp16Bits(f), c10::Half(f).x) << f;
  }
}

TEST(FloatBitsTest, IntegerRoundingMatchesTheLibm) {
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> dist(-300.0f, 300.0f);
  std::vector<float> values = {0.5f,        1.5f,  2.5f, -0.5f,      -1.5f,       -2.5f,
                               3.49999976f, -0.0f, 0.0f, 4194303.5f, -4194303.5f, 1e-30f};
  for (int i = 0; i < 100000; ++i) values.push_back(dist(gen));
  for (int i = 0; i < 1000; ++i) values.push_back(std::round(dist(gen)) + 0.5f);
  for (float v : values) {
    ASSERT_EQ(RoundHalfEven(v), std::nearbyint(v)) << v;
    ASSERT_EQ(RoundHalfAway(v), std::round(v)) << v;
    ASSERT_EQ(FloorSmall(v), std::floor(v)) << v;
    for (RoundMethod r : {RoundMethod::kHalfEven, RoundMethod::kRound, RoundMethod::kFloor}) {
      const float ref = RoundByRef(v, r);
      const float fused = r == RoundMethod::kHalfEven ? RoundBy<RoundMethod::kHalfEven>(v)
                          : r == RoundMethod::kRound  ? RoundBy<RoundMethod::kRound>(v)
                                                      : RoundBy<RoundMethod::kFloor>(v);
      ASSERT_EQ(fused, ref) << v;
    }
  }
  EXPECT_EQ(RoundHalfEven(2.5f), 2.0f);
  EXPECT_EQ(RoundHalfAway(2.5f), 3.0f);
  EXPECT_EQ(RoundHalfAway(-2.5f), -3.0f);
  EXPECT_EQ(FloorSmall(-2.5f), -3.0f);
  EXPECT_EQ(ClampRoundInput(1e30f), kRoundLimit);
  EXPECT_TRUE(std::isnan(ClampRoundInput(std::nanf(""))));
}

TEST(FloatBitsTest, MinifloatRoundingMatchesTheReferenceOnEveryFormat) {
  for (DataType t : {DataType::kFp8E4M3, DataType::kFp8E5M2, DataType::kMxFp6E3M2,
                     DataType::kMxFp6E2M3, DataType::kMxFp4}) {
    const MinifloatFormat f = MinifloatFormatOf(t);
    const int emin = 1 - f.bias;
    std::mt19937 gen(4);
    std::uniform_real_distribution<float> log_mag(-30.0f, std::log2(f.max_norm) + 0.5f);
    for (int i = 0; i < 200000; ++i) {
      const float a = std::min(std::exp2(log_mag(gen)), f.max_norm);
      ASSERT_EQ(RoundMagnitudeToMinifloat(a, f.mbits, emin, f.max_norm),
                RoundMagnitudeToMinifloatRef(a, f.mbits, emin, f.max_norm))
          << DataTypeName(t) << " " << a;
    }
  }
  // Spot values. e2m1 grid: 0 0.5 1 1.5 2 3 4 6.
  auto fp4 = [](float a) { return RoundMagnitudeToMinifloat(a, 1, 0, 6.0f); };
  EXPECT_EQ(fp4(0.25f), 0.0f);  // tie between 0 and 0.5 -> even (0)
  EXPECT_EQ(fp4(0.26f), 0.5f);
  EXPECT_EQ(fp4(1.25f), 1.0f);  // tie -> even mantissa
  EXPECT_EQ(fp4(1.75f), 2.0f);
  EXPECT_EQ(fp4(2.5f), 2.0f);
  EXPECT_EQ(fp4(5.0f), 4.0f);  // tie between 4 and 6 -> 4
  EXPECT_EQ(fp4(5.5f), 6.0f);
  // e4m3: subnormal step 2^-9, max 448.
  auto e4m3 = [](float a) { return RoundMagnitudeToMinifloat(a, 3, -6, 448.0f); };
  EXPECT_EQ(e4m3(std::ldexp(1.0f, -10)), 0.0f);                  // half the smallest subnormal
  EXPECT_EQ(e4m3(std::ldexp(3.0f, -10)), std::ldexp(1.0f, -8));  // 1.5 steps -> 2 steps
  EXPECT_EQ(e4m3(440.0f), 448.0f);
  EXPECT_EQ(e4m3(232.0f), 224.0f);  // tie between 224 and 240 -> 224 (even mantissa)
}

TEST(FloatBitsTest, MxScaleExponentFollowsEachMode) {
  // fp4: mbits 1, emax 2.
  EXPECT_EQ(MxScaleExponent(990.0f, MxScaleMode::kFloor, 1, 2), 7);  // 2^9 .. -> 9 - 2
  EXPECT_EQ(MxScaleExponent(990.0f, MxScaleMode::kEven, 1, 2), 8);   // 1.93 rounds up to 2^10
  EXPECT_EQ(MxScaleExponent(881.0f, MxScaleMode::kEven, 1, 2), 7);   // 1.72 stays at 2^9
  EXPECT_EQ(MxScaleExponent(881.0f, MxScaleMode::kCeil, 1, 2), 8);
  EXPECT_EQ(MxScaleExponent(512.0f, MxScaleMode::kCeil, 1, 2), 7);   // exact power of two
  EXPECT_EQ(MxScaleExponent(0.0f, MxScaleMode::kFloor, 1, 2), -23);  // epsilon scale
  EXPECT_EQ(MxScaleExponent(0.0f, MxScaleMode::kEven, 1, 2), -127);  // 2^-126 - 2, clamped
  EXPECT_EQ(MxScaleExponent(0.0f, MxScaleMode::kEven, 8, 0), -126);  // MXINT8
  EXPECT_EQ(MxScaleExponent(std::numeric_limits<float>::max(), MxScaleMode::kEven, 1, 2), 127);
  EXPECT_EQ(MxScaleExponent(std::ldexp(1.0f, -140), MxScaleMode::kFloor, 1, 2), -142);
  EXPECT_EQ(MxScaleExponent(std::ldexp(1.0f, -149), MxScaleMode::kFloor, 1, 2), -23);
  EXPECT_EQ(Pow2Wide(-142), std::ldexp(1.0f, -142));
  EXPECT_EQ(Pow2(-126), std::ldexp(1.0f, -126));
  EXPECT_EQ(Pow2(127), std::ldexp(1.0f, 127));
}

}  // namespace
}  // namespace quantd::quant
