#include "worker/quant/fake_quant.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/quant/kernel_common.h"

namespace quantd::quant {
namespace {

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

// One spec per data type, with a granularity that type uses in practice.
std::vector<QuantSpec> OneSpecPerType() {
  std::vector<QuantSpec> out;
  for (int t = static_cast<int>(DataType::kInt2); t <= static_cast<int>(DataType::kBFloat16); ++t) {
    QuantSpec s;
    s.dtype = static_cast<DataType>(t);
    if (IsMxType(s.dtype)) {
      s.qscheme = QScheme::kPerGroup;
    } else if (IsIntType(s.dtype)) {
      s.qscheme = QScheme::kPerGroup;
      s.group_size = 16;
      s.symmetric = t % 2 == 0;
    } else if (IsFp8Type(s.dtype)) {
      s.qscheme = QScheme::kPerChannel;
    }
    out.push_back(s);
  }
  return out;
}

TEST(FakeQuantTest, EveryDataTypeAgreesAcrossPathsAndRoundTripsThroughCodes) {
  at::manual_seed(31);
  const at::Tensor base = at::randn({8, 48}) * 3;
  for (const QuantSpec& spec : OneSpecPerType()) {
    for (at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
      const at::Tensor x = base.to(dtype);
      const std::string what = DescribeSpec(spec) + " " + c10::toString(dtype);
      auto qp = ComputeQParams(x, spec);
      ASSERT_TRUE(qp.ok()) << what << ": " << qp.status();
      auto fused = FakeQuantize(x, spec, *qp, Path(KernelPath::kFused));
      ASSERT_TRUE(fused.ok()) << what << ": " << fused.status();
      EXPECT_EQ(fused->scalar_type(), dtype);
      for (KernelPath p : {KernelPath::kComposed, KernelPath::kReference, KernelPath::kAuto}) {
        auto y = FakeQuantize(x, spec, *qp, Path(p));
        ASSERT_TRUE(y.ok()) << what;
        ExpectSameBits(*y, *fused, what);
      }
      auto dyn = FakeQuantizeDynamic(x, spec);
      ASSERT_TRUE(dyn.ok()) << what;
      ExpectSameBits(*dyn, *fused, what + " dynamic");
      auto q = RealQuantize(x, spec);
      ASSERT_TRUE(q.ok()) << what << ": " << q.status();
      auto dq = Dequantize(*q, spec, dtype);
      ASSERT_TRUE(dq.ok()) << what << ": " << dq.status();
      ExpectSameBits(*dq, *fused, what + " real quantization");
      // Quantization error shrinks with more bits: never worse than int2.
      const double err = (fused->to(at::kFloat) - x.to(at::kFloat)).abs().mean().item<double>();
      EXPECT_LT(err, 1.5) << what;
    }
  }
}

// The AVX2 and the baseline instantiations of the fused loops give the
// same bits (the rest of the tests run whichever the CPU supports).
TEST(FakeQuantTest, BaselineAndAvx2LoopsAgree) {
  at::manual_seed(33);
  const at::Tensor base = at::randn({6, 208}) * at::pow(10.0, at::rand({6, 208}) * 6 - 3);
  struct ResetSimd {
    ~ResetSimd() { kernel::ForceBaselineSimdForTesting(false); }
  } reset;
  for (const QuantSpec& spec : OneSpecPerType()) {
    for (at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
      const at::Tensor x = base.to(dtype);
      const std::string what = DescribeSpec(spec) + " " + c10::toString(dtype);
      kernel::ForceBaselineSimdForTesting(false);
      auto simd = FakeQuantizeDynamic(x, spec);
      kernel::ForceBaselineSimdForTesting(true);
      auto baseline = FakeQuantizeDynamic(x, spec);
      auto qp = ComputeQParams(x, spec);
      ASSERT_TRUE(qp.ok());
      auto baseline_static = FakeQuantize(x, spec, *qp);
      kernel::ForceBaselineSimdForTesting(false);
      auto simd_static = FakeQuantize(x, spec, *qp);
      ASSERT_TRUE(simd.ok() && baseline.ok() && baseline_static.ok() && simd_static.ok());
      ExpectSameBits(*baseline, *simd, what + " dynamic");
      ExpectSameBits(*baseline_static, *simd_static, what + " static");
    }
  }
  EXPECT_FALSE(kernel::BaselineSimdForced().load());
}

TEST(FakeQuantTest, CastsRoundToNearestEvenAndKeepSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const at::Tensor x = at::tensor(
      {1.0f + 1.0f / 512, 1.0f + 3.0f / 512, 70000.0f, -inf, std::nanf(""), 1e-30f, 3.14159265f});
  QuantSpec bf16;
  bf16.dtype = DataType::kBFloat16;
  QuantSpec fp16;
  fp16.dtype = DataType::kFloat16;
  for (KernelPath p : {KernelPath::kFused, KernelPath::kComposed, KernelPath::kReference}) {
    auto yb = FakeQuantize(x, bf16, {}, Path(p));
    auto yh = FakeQuantize(x, fp16, {}, Path(p));
    ASSERT_TRUE(yb.ok() && yh.ok());
    EXPECT_EQ((*yb)[0].item<float>(), 1.0f);               // tie -> even
    EXPECT_EQ((*yb)[1].item<float>(), 1.0f + 4.0f / 512);  // tie -> even (up)
    EXPECT_EQ((*yb)[2].item<float>(), 70144.0f);
    EXPECT_EQ((*yh)[2].item<float>(), inf);  // beyond float16's range
    EXPECT_EQ((*yb)[3].item<float>(), -inf);
    EXPECT_TRUE(std::isnan((*yh)[4].item<float>()));
    EXPECT_EQ((*yh)[5].item<float>(), 0.0f);
    EXPECT_EQ((*yb)[6].item<float>(), static_cast<float>(c10::BFloat16(3.14159265f)));
    EXPECT_EQ((*yh)[6].item<float>(), static_cast<float>(c10::Half(3.14159265f)));
  }
  auto q = RealQuantize(x, bf16);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->codes.scalar_type(), at::kBFloat16);
  // A bfloat16 input cast to bfloat16 is unchanged.
  const at::Tensor xb = x.to(at::kBFloat16);
  auto same = FakeQuantize(xb, bf16, {});
  ASSERT_TRUE(same.ok());
  ExpectSameBits(*same, xb, "bf16 identity");
}

TEST(FakeQuantTest, IntoWritesThePreallocatedOutput) {
  at::manual_seed(32);
  const at::Tensor x = at::randn({16, 64});
  QuantSpec spec;
  spec.dtype = DataType::kInt8;
  spec.qscheme = QScheme::kPerChannel;
  auto qp = ComputeQParams(x, spec);
  ASSERT_TRUE(qp.ok());
  at::Tensor out = at::empty_like(x);
  ASSERT_TRUE(FakeQuantizeInto(x, spec, *qp, out).ok());
  auto y = FakeQuantize(x, spec, *qp);
  ASSERT_TRUE(y.ok());
  ExpectSameBits(out, *y, "into");
  at::Tensor wrong = at::empty({16, 63});
  EXPECT_EQ(FakeQuantizeInto(x, spec, *qp, wrong).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FakeQuantizeInto(x, spec, *qp, out, Path(KernelPath::kComposed)).code(),
            StatusCode::kInvalidArgument);
}

TEST(FakeQuantTest, ErrorsAreStatuses) {
  QuantSpec spec;
  spec.dtype = DataType::kMxFp4;
  spec.qscheme = QScheme::kPerGroup;
  EXPECT_EQ(FakeQuantizeDynamic(at::Tensor(), spec).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FakeQuantizeDynamic(at::ones({4, 4}, at::kDouble), spec).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(FakeQuantizeDynamic(at::ones({}), spec).status().code(),
            StatusCode::kInvalidArgument);  // a scalar has no axis to block
  QParams wrong;
  wrong.scale = at::ones({7});
  EXPECT_EQ(FakeQuantize(at::ones({4, 64}), spec, wrong).status().code(),
            StatusCode::kInvalidArgument);
  QuantizedTensor empty;
  EXPECT_EQ(Dequantize(empty, spec).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quantd::quant
