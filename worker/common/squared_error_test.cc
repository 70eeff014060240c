// SumSquaredError / SumOfSquares against a long-double loop over the
// elements, across slice boundaries, for every storage dtype and for
// non-contiguous views; on QUANTD_TEST_DEVICE (tools/gpu_check.sh sets
// cuda:0) against the same sums taken on the CPU.
#include "worker/common/squared_error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

namespace quantd {
namespace {

at::Device TestDevice() {
  const char* d = std::getenv("QUANTD_TEST_DEVICE");
  return at::Device(d != nullptr && *d != '\0' ? d : "cpu");
}

// The sums element by element in long double, from float64 copies.
SquaredError Reference(const at::Tensor& out, const at::Tensor& ref) {
  const at::Tensor o = out.to(at::kCPU, at::kDouble).contiguous().view(-1);
  const at::Tensor r = ref.to(at::kCPU, at::kDouble).contiguous().view(-1);
  const double* op = o.data_ptr<double>();
  const double* rp = r.data_ptr<double>();
  long double energy = 0, error = 0;
  for (int64_t i = 0; i < r.numel(); ++i) {
    energy += static_cast<long double>(rp[i]) * rp[i];
    const long double d = static_cast<long double>(op[i]) - rp[i];
    error += d * d;
  }
  return {static_cast<double>(energy), static_cast<double>(error)};
}

TEST(SquaredErrorTest, ExactOnSmallIntegers) {
  const at::Tensor ref = at::tensor({0.0f, 4.0f, -3.0f});
  const at::Tensor out = at::tensor({1.0f, 2.0f, -3.0f});
  const SquaredError s = SumSquaredError(out, ref);
  EXPECT_EQ(s.reference, 25.0);
  EXPECT_EQ(s.error, 5.0);  // 1 + 4 + 0
  EXPECT_EQ(SumOfSquares(out), 14.0);
  const SquaredError empty = SumSquaredError(at::empty({0, 8}), at::empty({0, 8}));
  EXPECT_EQ(empty.reference, 0.0);
  EXPECT_EQ(empty.error, 0.0);
}

// 2^22 elements a slice: 9 M elements take three slices, the last partial.
TEST(SquaredErrorTest, MatchesALongDoubleLoopAcrossSlices) {
  at::manual_seed(7);
  for (auto dtype : {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}) {
    const at::Tensor ref = at::randn({3, 1500, 2003}).to(dtype);
    const at::Tensor out = (ref.to(at::kFloat) + 0.01 * at::randn(ref.sizes())).to(dtype);
    const SquaredError want = Reference(out, ref);
    const SquaredError got = SumSquaredError(out, ref);
    EXPECT_NEAR(got.reference, want.reference, 1e-12 * want.reference) << dtype;
    EXPECT_NEAR(got.error, want.error, 1e-12 * want.error) << dtype;
    EXPECT_NEAR(SumOfSquares(ref), want.reference, 1e-12 * want.reference) << dtype;
    EXPECT_GT(got.error, 0) << dtype;
  }
}

TEST(SquaredErrorTest, LeavesFloat64InputsAloneAndTakesStridedViews) {
  at::manual_seed(8);
  const at::Tensor ref = at::randn({700, 900}, at::kDouble);
  const at::Tensor out = ref + 0.5;
  const at::Tensor ref_copy = ref.clone(), out_copy = out.clone();
  const SquaredError s = SumSquaredError(out, ref);
  EXPECT_TRUE(at::equal(ref, ref_copy));
  EXPECT_TRUE(at::equal(out, out_copy));
  EXPECT_NEAR(s.error, 0.25 * ref.numel(), 1e-9 * ref.numel());
  // A transposed view holds the same elements in another order.
  const SquaredError t = SumSquaredError(out.t(), ref.t());
  EXPECT_NEAR(t.reference, s.reference, 1e-12 * s.reference);
  EXPECT_NEAR(t.error, s.error, 1e-12 * s.error);
}

TEST(SquaredErrorTest, RejectsTensorsOfDifferentSizes) {
  EXPECT_THROW(SumSquaredError(at::zeros({4}), at::zeros({5})), c10::Error);
}

TEST(SquaredErrorTest, DeviceSumsMatchTheHostsOnQuantdTestDevice) {
  const at::Device device = TestDevice();
  at::manual_seed(9);
  const at::Tensor ref = at::randn({2, 2048, 2048});
  const at::Tensor out = ref + 0.02 * at::randn(ref.sizes());
  const SquaredError host = SumSquaredError(out, ref);
  const SquaredError dev = SumSquaredError(out.to(device), ref.to(device));
  EXPECT_NEAR(dev.reference, host.reference, 1e-12 * host.reference) << device;
  EXPECT_NEAR(dev.error, host.error, 1e-12 * host.error) << device;
}

}  // namespace
}  // namespace quantd
