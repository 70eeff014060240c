#include "worker/quant/fp8.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/quant/fake_quant.h"

namespace quantd::quant {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

QuantSpec Fp8Spec(DataType t, QScheme q = QScheme::kPerTensor, std::optional<int> axis = {},
                  std::optional<int> group = {}) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = q;
  s.ch_axis = axis;
  s.group_size = group;
  return s;
}

QParams ScaleOne() {
  QParams qp;
  qp.scale = at::ones({}, at::kFloat);
  return qp;
}

FakeQuantOptions Path(KernelPath p) {
  FakeQuantOptions o;
  o.path = p;
  return o;
}

void ExpectSameBits(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  ASSERT_EQ(a.scalar_type(), b.scalar_type()) << what;
  const at::Tensor fa = a.to(at::kFloat).contiguous();
  const at::Tensor fb = b.to(at::kFloat).contiguous();
  for (int64_t i = 0; i < fa.numel(); ++i) {
    const float x = fa.data_ptr<float>()[i];
    const float y = fb.data_ptr<float>()[i];
    if (std::isnan(x) && std::isnan(y)) continue;
    ASSERT_EQ(BitsOf(x), BitsOf(y)) << what << " element " << i << ": " << x << " vs " << y;
  }
}

const std::vector<KernelPath> kPaths = {KernelPath::kFused, KernelPath::kComposed,
                                        KernelPath::kReference};

// All finite codes of a format and their values.
std::vector<std::pair<int, float>> FiniteCodes(DataType t) {
  std::vector<std::pair<int, float>> out;
  for (int c = 0; c < 256; ++c) {
    const float v = DecodeMinifloat(static_cast<uint8_t>(c), MinifloatFormatOf(t), fp8::KindOf(t));
    if (std::isfinite(v)) out.emplace_back(c, v);
  }
  return out;
}

TEST(Fp8Test, DecodingHasTheFormatsLandmarks) {
  const MinifloatFormat e4 = MinifloatFormatOf(DataType::kFp8E4M3);
  const MinifloatFormat e5 = MinifloatFormatOf(DataType::kFp8E5M2);
  EXPECT_EQ(DecodeMinifloat(0x38, e4, MinifloatKind::kE4M3Fn), 1.0f);
  EXPECT_EQ(DecodeMinifloat(0x7E, e4, MinifloatKind::kE4M3Fn), 448.0f);
  EXPECT_EQ(DecodeMinifloat(0x01, e4, MinifloatKind::kE4M3Fn), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(DecodeMinifloat(0x7F, e4, MinifloatKind::kE4M3Fn)));
  EXPECT_TRUE(std::isnan(DecodeMinifloat(0xFF, e4, MinifloatKind::kE4M3Fn)));
  EXPECT_EQ(DecodeMinifloat(0x3C, e5, MinifloatKind::kE5M2), 1.0f);
  EXPECT_EQ(DecodeMinifloat(0x7B, e5, MinifloatKind::kE5M2), 57344.0f);
  EXPECT_EQ(DecodeMinifloat(0x7C, e5, MinifloatKind::kE5M2), kInf);
  EXPECT_EQ(DecodeMinifloat(0xFC, e5, MinifloatKind::kE5M2), -kInf);
  EXPECT_EQ(DecodeMinifloat(0x01, e5, MinifloatKind::kE5M2), std::ldexp(1.0f, -16));
  EXPECT_EQ(FiniteCodes(DataType::kFp8E4M3).size(), 254u);
  EXPECT_EQ(FiniteCodes(DataType::kFp8E5M2).size(), 248u);
}

TEST(Fp8Test, EveryCodeRoundTripsExactly) {
  for (DataType t : {DataType::kFp8E4M3, DataType::kFp8E5M2}) {
    const auto codes = FiniteCodes(t);
    std::vector<float> values;
    for (const auto& cv : codes) values.push_back(cv.second);
    const at::Tensor x =
        at::from_blob(values.data(), {static_cast<int64_t>(values.size())}, at::kFloat).clone();
    const QuantSpec spec = Fp8Spec(t);
    for (KernelPath p : kPaths) {
      auto y = FakeQuantize(x, spec, ScaleOne(), Path(p));
      ASSERT_TRUE(y.ok()) << y.status();
      ExpectSameBits(*y, x, std::string(DataTypeName(t)) + " fake quant of every code");
    }
    for (KernelPath p : {KernelPath::kFused, KernelPath::kComposed}) {
      auto q = RealQuantize(x, spec, ScaleOne(), Path(p));
      ASSERT_TRUE(q.ok()) << q.status();
      ASSERT_EQ(q->codes.scalar_type(), at::kByte);
      for (size_t i = 0; i < codes.size(); ++i) {
        EXPECT_EQ(q->codes[i].item<int>(), codes[i].first) << "value " << codes[i].second;
      }
      auto back = Dequantize(*q, spec);
      ASSERT_TRUE(back.ok());
      ExpectSameBits(*back, x, "dequantized codes");
    }
  }
}

TEST(Fp8Test, MidpointsRoundToEvenAndOverflowSaturates) {
  for (DataType t : {DataType::kFp8E4M3, DataType::kFp8E5M2}) {
    std::vector<float> positives;
    for (const auto& cv : FiniteCodes(t)) {
      if (cv.second > 0) positives.push_back(cv.second);
    }
    std::sort(positives.begin(), positives.end());
    std::vector<float> mids, want;
    for (size_t i = 0; i + 1 < positives.size(); ++i) {
      const float a = positives[i];
      const float b = positives[i + 1];
      mids.push_back((a + b) / 2);
      mids.push_back(-(a + b) / 2);
      // Even mantissa: the code's lowest bit is 0.
      auto q = RealQuantize(at::tensor({a}), Fp8Spec(t), ScaleOne());
      ASSERT_TRUE(q.ok());
      const float even = (q->codes[0].item<int>() & 1) == 0 ? a : b;
      want.push_back(even);
      want.push_back(-even);
    }
    const float max = MinifloatFormatOf(t).max_norm;
    for (float big : {max * 1.1f, max * 4.0f, 1e30f}) {
      mids.push_back(big);
      want.push_back(max);
      mids.push_back(-big);
      want.push_back(-max);
    }
    const at::Tensor x =
        at::from_blob(mids.data(), {static_cast<int64_t>(mids.size())}, at::kFloat).clone();
    const at::Tensor expected =
        at::from_blob(want.data(), {static_cast<int64_t>(want.size())}, at::kFloat).clone();
    for (KernelPath p : kPaths) {
      auto y = FakeQuantize(x, Fp8Spec(t), ScaleOne(), Path(p));
      ASSERT_TRUE(y.ok());
      ExpectSameBits(*y, expected, std::string(DataTypeName(t)) + " midpoints");
    }
  }
}

TEST(Fp8Test, NanAndInfinityPassThroughAndScaleIsAmaxOverMax) {
  const at::Tensor x = at::tensor({kNaN, kInf, -kInf, 896.0f, -100.0f, 0.0f, -0.0f, 1e-30f});
  const QuantSpec spec = Fp8Spec(DataType::kFp8E4M3);
  auto qp = ComputeQParams(x.slice(0, 3), spec);
  ASSERT_TRUE(qp.ok());
  EXPECT_EQ(qp->scale.item<float>(), 2.0f);  // 896 / 448
  for (KernelPath p : kPaths) {
    auto y = FakeQuantize(x, spec, *qp, Path(p));
    ASSERT_TRUE(y.ok());
    EXPECT_TRUE(std::isnan((*y)[0].item<float>()));
    EXPECT_EQ((*y)[1].item<float>(), kInf);
    EXPECT_EQ((*y)[2].item<float>(), -kInf);
    EXPECT_EQ((*y)[3].item<float>(), 896.0f);
    EXPECT_EQ((*y)[4].item<float>(), -96.0f);  // -50 -> -48 on the e4m3 grid
    EXPECT_TRUE(std::signbit((*y)[6].item<float>()));
    EXPECT_EQ((*y)[7].item<float>(), 0.0f);
  }
  // Codes saturate infinities and keep NaN.
  auto q = RealQuantize(x, spec, *qp);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->codes[0].item<int>(), 0x7F);
  EXPECT_EQ(q->codes[1].item<int>(), 0x7E);
  EXPECT_EQ(q->codes[2].item<int>(), 0xFE);
  auto qc = RealQuantize(x, spec, *qp, Path(KernelPath::kComposed));
  ASSERT_TRUE(qc.ok());
  EXPECT_TRUE(at::equal(q->codes, qc->codes));
  // e5m2: amax / 57344.
  auto qp5 = ComputeQParams(at::tensor({-114688.0f, 3.0f}), Fp8Spec(DataType::kFp8E5M2));
  ASSERT_TRUE(qp5.ok());
  EXPECT_EQ(qp5->scale.item<float>(), 2.0f);
}

TEST(Fp8Test, FusedReferenceAndComposedAgreeOnEveryGranularity) {
  at::manual_seed(11);
  // Magnitudes from 1e-6 to 1e3 so subnormals and saturation both occur.
  const at::Tensor base = at::randn({6, 40, 12}) * at::pow(10.0, at::rand({6, 40, 12}) * 9 - 6);
  for (DataType t : {DataType::kFp8E4M3, DataType::kFp8E5M2}) {
    const std::vector<QuantSpec> specs = {
        Fp8Spec(t),
        Fp8Spec(t, QScheme::kPerChannel, 0),
        Fp8Spec(t, QScheme::kPerChannel, -1),
        Fp8Spec(t, QScheme::kPerGroup, -1, 4),
        Fp8Spec(t, QScheme::kPerGroup, 1, 8),
    };
    for (at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
      const at::Tensor x = base.to(dtype);
      for (const QuantSpec& spec : specs) {
        const std::string what = DescribeSpec(spec) + " " + c10::toString(dtype);
        auto qp = ComputeQParams(x, spec);
        auto qpc = ComputeQParams(x, spec, Path(KernelPath::kComposed));
        ASSERT_TRUE(qp.ok() && qpc.ok()) << what;
        ExpectSameBits(qpc->scale, qp->scale, what + " scale");
        auto fused = FakeQuantize(x, spec, *qp, Path(KernelPath::kFused));
        ASSERT_TRUE(fused.ok()) << fused.status();
        for (KernelPath p : {KernelPath::kComposed, KernelPath::kReference}) {
          auto y = FakeQuantize(x, spec, *qp, Path(p));
          ASSERT_TRUE(y.ok());
          ExpectSameBits(*y, *fused, what);
        }
        // Idempotent with the same scales.
        auto again = FakeQuantize(*fused, spec, *qp);
        ASSERT_TRUE(again.ok());
        ExpectSameBits(*again, *fused, what + " idempotence");
        auto q = RealQuantize(x, spec, *qp);
        auto qc = RealQuantize(x, spec, *qp, Path(KernelPath::kComposed));
        ASSERT_TRUE(q.ok() && qc.ok());
        EXPECT_TRUE(at::equal(q->codes, qc->codes)) << what;
        auto dq = Dequantize(*q, spec, dtype);
        ASSERT_TRUE(dq.ok());
        ExpectSameBits(*dq, *fused, what + " dequantized codes");
        // Dynamic paths.
        QuantSpec dyn = spec;
        dyn.is_dynamic = true;
        QParams used_f, used_c;
        auto df = FakeQuantizeDynamic(x, dyn, Path(KernelPath::kFused), &used_f);
        auto dc = FakeQuantizeDynamic(x, dyn, Path(KernelPath::kComposed), &used_c);
        ASSERT_TRUE(df.ok() && dc.ok());
        ExpectSameBits(*df, *fused, what + " dynamic fused");
        ExpectSameBits(*dc, *fused, what + " dynamic composed");
        ExpectSameBits(used_f.scale, qp->scale, what + " dynamic scales");
      }
    }
  }
}

TEST(Fp8Test, DynamicPerTokenEqualsStaticPerToken) {
  at::manual_seed(12);
  const at::Tensor x = at::randn({5, 64}) * 10;
  QuantSpec token = Fp8Spec(DataType::kFp8E4M3, QScheme::kPerChannel, 0);
  token.is_dynamic = true;
  auto y = FakeQuantizeDynamic(x, token);
  ASSERT_TRUE(y.ok());
  for (int64_t t = 0; t < 5; ++t) {
    const at::Tensor row = x[t].contiguous();
    auto qp = ComputeQParams(row, Fp8Spec(DataType::kFp8E4M3));
    ASSERT_TRUE(qp.ok());
    auto yr = FakeQuantize(row, Fp8Spec(DataType::kFp8E4M3), *qp);
    ASSERT_TRUE(yr.ok());
    ExpectSameBits(*yr, (*y)[t], "token " + std::to_string(t));
  }
}

}  // namespace
}  // namespace quantd::quant
