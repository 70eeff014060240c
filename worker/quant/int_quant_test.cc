#include "worker/quant/int_quant.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "worker/quant/fake_quant.h"

namespace quantd::quant {
namespace {

QuantSpec Spec(DataType t, QScheme q, bool symmetric, std::optional<int> axis = std::nullopt,
               std::optional<int> group = std::nullopt) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = q;
  s.symmetric = symmetric;
  s.ch_axis = axis;
  s.group_size = group;
  return s;
}

at::Tensor RandomTensor(std::vector<int64_t> sizes, uint64_t seed, double spread = 3.0) {
  at::manual_seed(seed);
  // A few large values so the range is not symmetric.
  return at::randn(sizes, at::kFloat) * spread + 0.3;
}

FakeQuantOptions Path(KernelPath p) {
  FakeQuantOptions o;
  o.path = p;
  return o;
}

// Bitwise equality that treats every NaN as equal to every NaN.
void ExpectSameBits(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  ASSERT_EQ(a.scalar_type(), b.scalar_type()) << what;
  const at::Tensor fa = a.to(at::kFloat).contiguous();
  const at::Tensor fb = b.to(at::kFloat).contiguous();
  const float* pa = fa.data_ptr<float>();
  const float* pb = fb.data_ptr<float>();
  for (int64_t i = 0; i < fa.numel(); ++i) {
    if (std::isnan(pa[i]) && std::isnan(pb[i])) continue;
    ASSERT_EQ(BitsOf(pa[i]), BitsOf(pb[i]))
        << what << " element " << i << ": " << pa[i] << " vs " << pb[i];
  }
}

at::Tensor Fq(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
              KernelPath p = KernelPath::kAuto) {
  auto y = FakeQuantize(x, spec, qp, Path(p));
  EXPECT_TRUE(y.ok()) << y.status();
  return y.ok() ? *y : at::Tensor();
}

QParams Qp(const at::Tensor& x, const QuantSpec& spec) {
  auto qp = ComputeQParams(x, spec);
  EXPECT_TRUE(qp.ok()) << qp.status();
  return qp.ok() ? *qp : QParams();
}

TEST(IntQuantTest, PerTensorMatchesAtenFakeQuantizeBitForBit) {
  const at::Tensor x = RandomTensor({37, 129}, 1);
  for (DataType t : {DataType::kInt8, DataType::kUInt8, DataType::kInt4, DataType::kUInt4}) {
    for (bool sym : {true, false}) {
      const QuantSpec spec = Spec(t, QScheme::kPerTensor, sym);
      const QParams qp = Qp(x, spec);
      const IntRange r = IntRangeOf(t);
      const at::Tensor ref = at::fake_quantize_per_tensor_affine(
          x, qp.scale.item<float>(), qp.zero_point.item<int>(), r.qmin, r.qmax);
      for (KernelPath p : {KernelPath::kFused, KernelPath::kComposed, KernelPath::kReference}) {
        ExpectSameBits(Fq(x, spec, qp, p), ref, DescribeSpec(spec));
      }
    }
  }
}

TEST(IntQuantTest, PerChannelMatchesAtenFakeQuantizeBitForBit) {
  const at::Tensor x = RandomTensor({12, 33, 7}, 2);
  for (DataType t : {DataType::kInt8, DataType::kUInt8, DataType::kInt4}) {
    for (bool sym : {true, false}) {
      for (int axis : {0, 1, 2}) {
        const QuantSpec spec = Spec(t, QScheme::kPerChannel, sym, axis);
        const QParams qp = Qp(x, spec);
        ASSERT_EQ(qp.scale.numel(), x.size(axis));
        const IntRange r = IntRangeOf(t);
        const at::Tensor ref =
            at::fake_quantize_per_channel_affine(x, qp.scale, qp.zero_point, axis, r.qmin, r.qmax);
        for (KernelPath p : {KernelPath::kFused, KernelPath::kComposed, KernelPath::kReference}) {
          ExpectSameBits(Fq(x, spec, qp, p), ref,
                         DescribeSpec(spec) + " axis " + std::to_string(axis));
        }
      }
    }
  }
}

std::string GoldenPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir ? srcdir : ".") + "/quantd/tests/golden/quant_vectors.json";
}

TEST(IntQuantTest, GoldenInt8Example) {
  std::ifstream in(GoldenPath());
  ASSERT_TRUE(in.good()) << GoldenPath();
  const nlohmann::json golden = nlohmann::json::parse(in);
  const nlohmann::json& ex = golden.at("int_examples").at(0);
  ASSERT_EQ(ex.at("dtype"), "int8");
  std::vector<float> xs = ex.at("x").get<std::vector<float>>();
  const std::vector<int> expected = ex.at("q").get<std::vector<int>>();
  const at::Tensor x = at::from_blob(xs.data(), {static_cast<int64_t>(xs.size())}, at::kFloat);
  const QuantSpec spec = Spec(DataType::kInt8, QScheme::kPerTensor, ex.at("symmetric"));
  for (KernelPath p : {KernelPath::kFused, KernelPath::kComposed}) {
    auto q = RealQuantize(x, spec, {}, Path(p));
    ASSERT_TRUE(q.ok()) << q.status();
    EXPECT_EQ(q->qparams.scale.item<float>(), 0.0078431377f);
    EXPECT_EQ(q->codes.scalar_type(), at::kChar);
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(q->codes[i].item<int>(), expected[i]) << "x=" << xs[i];
    }
  }
}

TEST(IntQuantTest, Int4PerGroupAgreesWithAFloat64Reference) {
  const int64_t rows = 16;
  const int64_t cols = 256;
  const int64_t group = 128;
  const at::Tensor x = RandomTensor({rows, cols}, 3);
  for (bool sym : {true, false}) {
    const QuantSpec spec = Spec(DataType::kInt4, QScheme::kPerGroup, sym, 1, group);
    auto q = RealQuantize(x, spec);
    ASSERT_TRUE(q.ok()) << q.status();
    const at::Tensor y = Fq(x, spec, q->qparams);
    ASSERT_EQ(q->qparams.scale.sizes(), (at::IntArrayRef{rows, cols / group}));
    const at::Tensor xd = x.to(at::kDouble);
    int near_ties = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t g = 0; g < cols / group; ++g) {
        // float64 reference of the group.
        double mn = 0, mx = 0;
        for (int64_t c = g * group; c < (g + 1) * group; ++c) {
          mn = std::min(mn, xd[r][c].item<double>());
          mx = std::max(mx, xd[r][c].item<double>());
        }
        double scale, zp;
        if (sym) {
          scale = std::max(-mn, mx) / 7.5;
          zp = 0;
        } else {
          scale = (mx - mn) / 15.0;
          zp = std::min(std::max(-8.0 - std::nearbyint(mn / scale), -8.0), 7.0);
        }
        EXPECT_NEAR(q->qparams.scale[r][g].item<float>(), scale, scale * 1e-6);
        EXPECT_EQ(q->qparams.zero_point[r][g].item<int>(), static_cast<int>(zp));
        for (int64_t c = g * group; c < (g + 1) * group; ++c) {
          const double v = xd[r][c].item<double>() / scale;
          const double code = std::min(std::max(std::nearbyint(v) + zp, -8.0), 7.0);
          const double frac = v - std::floor(v);
          if (std::fabs(frac - 0.5) < 1e-4) {
            ++near_ties;  // float32 may land on the other side of a tie
            continue;
          }
          ASSERT_EQ(q->codes[r][c].item<int>(), static_cast<int>(code)) << r << "," << c;
          EXPECT_NEAR(y[r][c].item<float>(), (code - zp) * scale, scale * 1e-5);
        }
      }
    }
    // Symmetric groups put their amax exactly on the tie 7.5.
    EXPECT_LT(near_ties, rows * (cols / group) + 10);
  }
}

TEST(IntQuantTest, FusedReferenceAndComposedAgreeOnEveryVariant) {
  const at::Tensor base = RandomTensor({4, 24, 20}, 4);
  std::vector<QuantSpec> specs;
  for (DataType t : {DataType::kInt2, DataType::kInt3, DataType::kInt4, DataType::kInt8,
                     DataType::kUInt2, DataType::kUInt3, DataType::kUInt4, DataType::kUInt8}) {
    for (bool sym : {true, false}) {
      specs.push_back(Spec(t, QScheme::kPerTensor, sym));
      specs.push_back(Spec(t, QScheme::kPerChannel, sym, 1));
      specs.push_back(Spec(t, QScheme::kPerChannel, sym, -1));
      specs.push_back(Spec(t, QScheme::kPerGroup, sym, -1, 5));
      specs.push_back(Spec(t, QScheme::kPerGroup, sym, 1, 8));
    }
  }
  QuantSpec floor_round = Spec(DataType::kInt4, QScheme::kPerGroup, true, -1, 4);
  floor_round.round_method = RoundMethod::kFloor;
  specs.push_back(floor_round);
  QuantSpec half_away = Spec(DataType::kUInt8, QScheme::kPerChannel, false, 0);
  half_away.round_method = RoundMethod::kRound;
  specs.push_back(half_away);
  QuantSpec float_zp = Spec(DataType::kUInt4, QScheme::kPerGroup, false, -1, 10);
  float_zp.zero_point_type = ZeroPointType::kFloat32;
  specs.push_back(float_zp);
  QuantSpec pof2 = Spec(DataType::kInt8, QScheme::kPerChannel, true, 0);
  pof2.scale_type = ScaleType::kPowerOf2;
  specs.push_back(pof2);
  QuantSpec f16_scale = Spec(DataType::kInt8, QScheme::kPerTensor, false);
  f16_scale.scale_type = ScaleType::kFloat16;
  specs.push_back(f16_scale);

  for (at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    const at::Tensor x = base.to(dtype);
    for (const QuantSpec& spec : specs) {
      const std::string what = DescribeSpec(spec) + " " + c10::toString(dtype);
      const QParams qp = Qp(x, spec);
      auto composed_qp = ComputeQParams(x, spec, Path(KernelPath::kComposed));
      ASSERT_TRUE(composed_qp.ok());
      ExpectSameBits(composed_qp->scale, qp.scale, what + " scale");
      ExpectSameBits(composed_qp->zero_point.to(at::kFloat), qp.zero_point.to(at::kFloat),
                     what + " zero point");
      const at::Tensor fused = Fq(x, spec, qp, KernelPath::kFused);
      EXPECT_EQ(fused.scalar_type(), dtype);
      ExpectSameBits(Fq(x, spec, qp, KernelPath::kReference), fused, what + " reference");
      ExpectSameBits(Fq(x, spec, qp, KernelPath::kComposed), fused, what + " composed");
      // Codes: dequantizing them gives the fake-quantized values.
      auto q = RealQuantize(x, spec, qp);
      ASSERT_TRUE(q.ok()) << q.status();
      auto qc = RealQuantize(x, spec, qp, Path(KernelPath::kComposed));
      ASSERT_TRUE(qc.ok());
      EXPECT_TRUE(at::equal(q->codes, qc->codes)) << what;
      const IntRange r = IntRangeOf(spec.dtype);
      EXPECT_GE(q->codes.to(at::kInt).min().item<int>(), r.qmin) << what;
      EXPECT_LE(q->codes.to(at::kInt).max().item<int>(), r.qmax) << what;
      auto dq = Dequantize(*q, spec, dtype);
      ASSERT_TRUE(dq.ok()) << dq.status();
      ExpectSameBits(*dq, fused, what + " dequantized codes");
    }
  }
}

TEST(IntQuantTest, IdempotentAndErrorWithinHalfAScale) {
  const at::Tensor x = RandomTensor({64, 96}, 5);
  for (DataType t : {DataType::kInt8, DataType::kInt4, DataType::kUInt4, DataType::kInt3}) {
    for (bool sym : {true, false}) {
      const QuantSpec spec = Spec(t, QScheme::kPerChannel, sym, 0);
      const QParams qp = Qp(x, spec);
      const at::Tensor y = Fq(x, spec, qp);
      ExpectSameBits(Fq(y, spec, qp), y, DescribeSpec(spec) + " idempotence");
      // Inside the representable range the error is at most scale / 2.
      const IntRange r = IntRangeOf(t);
      const at::Tensor scale = qp.scale.unsqueeze(1);
      const at::Tensor zp = qp.zero_point.to(at::kFloat).unsqueeze(1);
      const at::Tensor lo = (r.qmin - zp) * scale;
      const at::Tensor hi = (r.qmax - zp) * scale;
      const at::Tensor inside = x.ge(lo).logical_and(x.le(hi));
      const at::Tensor err = (y - x).abs();
      const at::Tensor bound = (scale / 2) * (1 + 1e-5);
      EXPECT_TRUE(err.le(bound).logical_or(inside.logical_not()).all().item<bool>())
          << DescribeSpec(spec);
      EXPECT_GT(inside.sum().item<int64_t>(), x.numel() * 9 / 10);
    }
  }
}

TEST(IntQuantTest, DynamicPerTokenEqualsStaticQuantizationOfEachToken) {
  // [tokens, hidden]: per-token is per_channel on the token axis.
  const at::Tensor x = RandomTensor({9, 130}, 6).to(at::kBFloat16);
  QuantSpec spec = Spec(DataType::kInt8, QScheme::kPerChannel, true, 0);
  spec.is_dynamic = true;
  QParams used;
  auto y = FakeQuantizeDynamic(x, spec, {}, &used);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(used.scale.sizes(), (at::IntArrayRef{9}));
  const QuantSpec per_tensor = Spec(DataType::kInt8, QScheme::kPerTensor, true);
  for (int64_t t = 0; t < 9; ++t) {
    const at::Tensor token = x[t].contiguous();
    const QParams qp = Qp(token, per_tensor);
    EXPECT_EQ(qp.scale.item<float>(), used.scale[t].item<float>());
    ExpectSameBits(Fq(token, per_tensor, qp), (*y)[t], "token " + std::to_string(t));
  }
  // The reference's [batch, seq, hidden] form with ch_axis 1, batch 1.
  QuantSpec axis1 = Spec(DataType::kInt8, QScheme::kPerChannel, true, 1);
  axis1.is_dynamic = true;
  auto y3 = FakeQuantizeDynamic(x.unsqueeze(0), axis1);
  ASSERT_TRUE(y3.ok());
  ExpectSameBits((*y3)[0], *y, "ch_axis 1");
}

TEST(IntQuantTest, DynamicPathsAgree) {
  const at::Tensor x = RandomTensor({3, 16, 64}, 7);
  std::vector<QuantSpec> specs = {
      Spec(DataType::kInt8, QScheme::kPerTensor, true),
      Spec(DataType::kUInt8, QScheme::kPerTensor, false),
      Spec(DataType::kInt8, QScheme::kPerChannel, true, 1),
      Spec(DataType::kInt8, QScheme::kPerChannel, false, -1),
      Spec(DataType::kInt4, QScheme::kPerGroup, true, -1, 32),
      Spec(DataType::kUInt4, QScheme::kPerGroup, false, 1, 4),
  };
  for (QuantSpec spec : specs) {
    spec.is_dynamic = true;
    QParams fused_qp, composed_qp, ref_qp;
    auto fused = FakeQuantizeDynamic(x, spec, Path(KernelPath::kFused), &fused_qp);
    auto composed = FakeQuantizeDynamic(x, spec, Path(KernelPath::kComposed), &composed_qp);
    auto ref = FakeQuantizeDynamic(x, spec, Path(KernelPath::kReference), &ref_qp);
    ASSERT_TRUE(fused.ok() && composed.ok() && ref.ok()) << DescribeSpec(spec);
    ExpectSameBits(*composed, *fused, DescribeSpec(spec) + " composed");
    ExpectSameBits(*ref, *fused, DescribeSpec(spec) + " reference");
    ExpectSameBits(composed_qp.scale, fused_qp.scale, DescribeSpec(spec) + " scale");
    EXPECT_EQ(fused_qp.scale.sizes(), ref_qp.scale.sizes());
  }
}

TEST(IntQuantTest, RoundMethodsAndSpecialValues) {
  const float nan = std::nanf("");
  const float inf = std::numeric_limits<float>::infinity();
  const at::Tensor x = at::tensor({0.5f, 1.5f, -0.5f, 2.7f, -2.7f, 2.5f, nan, inf, -inf, 300.0f});
  QParams qp;
  qp.scale = at::ones({}, at::kFloat);
  qp.zero_point = at::zeros({}, at::kInt);
  QuantSpec spec = Spec(DataType::kInt8, QScheme::kPerTensor, true);
  auto expect = [&](RoundMethod m, std::vector<float> want) {
    spec.round_method = m;
    for (KernelPath p : {KernelPath::kFused, KernelPath::kComposed, KernelPath::kReference}) {
      const at::Tensor y = Fq(x, spec, qp, p);
      for (size_t i = 0; i < want.size(); ++i) {
        const float v = y[i].item<float>();
        if (std::isnan(want[i])) {
          EXPECT_TRUE(std::isnan(v)) << i;
        } else {
          EXPECT_EQ(v, want[i]) << RoundMethodName(m) << " element " << i;
        }
      }
    }
  };
  expect(RoundMethod::kHalfEven, {0, 2, 0, 3, -3, 2, nan, 127, -128, 127});
  expect(RoundMethod::kRound, {1, 2, -1, 3, -3, 3, nan, 127, -128, 127});
  expect(RoundMethod::kFloor, {0, 1, -1, 2, -3, 2, nan, 127, -128, 127});
}

TEST(IntQuantTest, BadInputsAreStatusesNotCrashes) {
  const at::Tensor x = RandomTensor({4, 10}, 8);
  const QuantSpec group = Spec(DataType::kInt4, QScheme::kPerGroup, true, 1, 4);
  auto r = ComputeQParams(x, group);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not a multiple of group_size 4"), std::string::npos);

  const QuantSpec channel = Spec(DataType::kInt8, QScheme::kPerChannel, true, 0);
  QParams wrong;
  wrong.scale = at::ones({3}, at::kFloat);
  wrong.zero_point = at::zeros({3}, at::kInt);
  auto y = FakeQuantize(x, channel, wrong);
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(FakeQuantize(x, channel, wrong, Path(KernelPath::kComposed)).ok());

  auto ints = FakeQuantizeDynamic(at::ones({4}, at::kInt), channel);
  ASSERT_FALSE(ints.ok());
  EXPECT_EQ(ints.status().code(), StatusCode::kInvalidArgument);

  const QuantSpec axis5 = Spec(DataType::kInt8, QScheme::kPerChannel, true, 5);
  EXPECT_EQ(FakeQuantizeDynamic(x, axis5).status().code(), StatusCode::kInvalidArgument);

  // Empty tensors are fine.
  auto empty = FakeQuantizeDynamic(at::empty({0, 8}), channel);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->numel(), 0);
}

TEST(IntQuantTest, NonContiguousInputIsQuantizedAsItsContiguousCopy) {
  const at::Tensor x = RandomTensor({32, 48}, 9);
  const at::Tensor xt = x.t();  // non-contiguous view
  const QuantSpec spec = Spec(DataType::kInt8, QScheme::kPerChannel, true, 0);
  const QParams qp = Qp(xt, spec);
  ExpectSameBits(Fq(xt, spec, qp), Fq(xt.contiguous(), spec, qp), "transposed view");
}

}  // namespace
}  // namespace quantd::quant
