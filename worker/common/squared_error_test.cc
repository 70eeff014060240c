// SumSquaredError / SumOfSquares against a long-double loop over the
// elements, across slice boundaries, for every storage dtype and for
// non-contiguous views; on QUANTD_TEST_DEVICE (tools/gpu_check.sh sets
// cuda:0) against the same sums taken on the CPU.
#include "worker/common/squared_error.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>

namespace quantd {
namespace {

// How far a float64 sum of n squares may be from the exact one, whatever
// kernel computes it (OpenBLAS picks its dot kernel by CPU model; a GPU
// reduces in another order again). Each rounding multiplies a value by
// (1 + d), |d| <= u (the unit roundoff), and k such factors together lie
// within 1 +- gamma_k, gamma_k = k u / (1 - k u). However a dot product is
// evaluated (any tree of additions, several accumulators, FMA or not), and
// with SumSquaredError's accumulation of the slice sums on top (one tree over
// all n terms; 0 + s_1 is exact), a term passes through at most n - 1
// additions after its square is rounded once; the difference out - ref was
// rounded once before, which the square doubles. So every term carries at
// most n + 2 roundings, and as all terms are >= 0 the sum's relative error is
// within gamma_{n+2}: about n u, 1.0e-9 for the 9 M elements below. (The
// random-sign estimate sqrt(n) u, 3e-13, is what one CPU shows; another
// measured 1.7e-12; only the worst-case bound holds on every CPU.)
double Gamma(double n, double unit_roundoff) {
  return n * unit_roundoff / (1 - n * unit_roundoff);
}
constexpr double kU = DBL_EPSILON / 2;

// Relative error bound of a float64 sum of n squares computed by SumSquaredError.
double SumBound(int64_t n) { return Gamma(static_cast<double>(n) + 2, kU); }

// Relative error bound of Reference() below: long double (unit roundoff
// LDBL_EPSILON / 2: 2^-64 on x86-64, 2^-113 on aarch64) with the difference
// and the square rounded and n - 1 additions in sequence, then one rounding
// to float64.
double ReferenceBound(int64_t n) {
  return (1 + Gamma(static_cast<double>(n) + 2, LDBL_EPSILON / 2)) * (1 + kU) - 1;
}

// |got - want| for got within SumBound of the exact sum S and want (the
// reference) within ReferenceBound of it: (a + b) S, and S <= want / (1 - b).
double Tolerance(int64_t n, double want) {
  const double a = SumBound(n), b = ReferenceBound(n);
  return (a + b) / (1 - b) * want;
}

// |x - y| for two sums of n squares, each computed by SumSquaredError in its
// own order: 2 a S, and S <= x / (1 - a).
double TwoSumsTolerance(int64_t n, double x) {
  const double a = SumBound(n);
  return 2 * a / (1 - a) * x;
}

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
    const int64_t n = ref.numel();
    // 1.0e-9 relative: a float32 accumulator (errors of 1e-8 and more on
    // 9 M terms) or a slice dropped or counted twice (1e-1) still fails.
    EXPECT_NEAR(got.reference, want.reference, Tolerance(n, want.reference)) << dtype;
    EXPECT_NEAR(got.error, want.error, Tolerance(n, want.error)) << dtype;
    // SumOfSquares rounds no difference: within the same bound.
    EXPECT_NEAR(SumOfSquares(ref), want.reference, Tolerance(n, want.reference)) << dtype;
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
  // out = fl(r + 0.5) and d = fl(out - r) differ from 0.5 by at most
  // u |r + 0.5| + u (0.5 + u |r + 0.5|) <= 1.01 u (|r| + 1) (each rounding
  // is relative u; the 1.01 covers the second-order terms while |r| < 4e13),
  // so |d^2 - 0.25| = |d - 0.5| |d + 0.5| <= 1.01 u (|r| + 1) as well; the
  // sum of the d^2 then adds its gamma_n.
  const int64_t n = ref.numel();
  const double terms = 1.01 * kU * (ref.abs().sum().item<double>() + n);
  EXPECT_NEAR(s.error, 0.25 * n, terms + SumBound(n) * (0.25 * n + terms));
  // A transposed view holds the same elements in another order.
  const SquaredError t = SumSquaredError(out.t(), ref.t());
  EXPECT_NEAR(t.reference, s.reference, TwoSumsTolerance(n, s.reference));
  EXPECT_NEAR(t.error, s.error, TwoSumsTolerance(n, s.error));
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
  // The device reduces in its own order: both sums within SumBound.
  const int64_t n = ref.numel();
  EXPECT_NEAR(dev.reference, host.reference, TwoSumsTolerance(n, host.reference)) << device;
  EXPECT_NEAR(dev.error, host.error, TwoSumsTolerance(n, host.error)) << device;
}

}  // namespace
}  // namespace quantd
