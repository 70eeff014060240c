// The engine's path on QUANTD_TEST_DEVICE (default cpu; tools/gpu_check.sh
// sets cuda:0) agrees bit for bit with the fused CPU kernels: every data type
// and granularity on random tensors with awkward values, the golden MX rows
// and the golden int8 codes. On cpu it checks the composed ATen path, the
// one a GPU runs.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "worker/quant/fake_quant.h"
#include "worker/quant/mx.h"

namespace quantd::quant {
namespace {

at::Device TestDevice() {
  const char* d = std::getenv("QUANTD_TEST_DEVICE");
  return at::Device(d != nullptr && *d != '\0' ? d : "cpu");
}

FakeQuantOptions DevicePath() {
  FakeQuantOptions o;
  // The engine's own choice on a GPU (the fused CUDA kernels when the build
  // has them); on cpu ask for the composed path explicitly.
  o.path = TestDevice().is_cpu() ? KernelPath::kComposed : KernelPath::kAuto;
  return o;
}

// Every path a tensor on the test device can take: on a GPU the engine's
// choice and the composed path (the same when the build has no CUDA
// kernels); on cpu the composed path.
std::vector<FakeQuantOptions> DevicePaths() {
  std::vector<FakeQuantOptions> paths = {DevicePath()};
  if (!TestDevice().is_cpu()) {
    FakeQuantOptions composed;
    composed.path = KernelPath::kComposed;
    paths.push_back(composed);
  }
  return paths;
}

FakeQuantOptions CpuFused() {
  FakeQuantOptions o;
  o.path = KernelPath::kFused;
  return o;
}

// Equal float bits (NaNs of any payload count as equal).
::testing::AssertionResult SameBits(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor a = got.cpu().to(at::kFloat).contiguous();
  const at::Tensor b = want.cpu().to(at::kFloat).contiguous();
  if (a.sizes() != b.sizes()) return ::testing::AssertionFailure() << "shapes differ";
  const at::Tensor both_nan = a.isnan() & b.isnan();
  const at::Tensor diff = (a.view(at::kInt) != b.view(at::kInt)) & ~both_nan;
  const int64_t n = diff.sum().item<int64_t>();
  if (n == 0) return ::testing::AssertionSuccess();
  const int64_t i = diff.reshape({-1}).nonzero()[0][0].item<int64_t>();
  return ::testing::AssertionFailure() << n << " of " << a.numel() << " elements differ; first at "
                                       << i << ": " << a.reshape({-1})[i].item<float>() << " vs "
                                       << b.reshape({-1})[i].item<float>();
}

// Random weights with the values that trip kernels up: exact zeros, ties at
// half a step, tiny and huge magnitudes, a constant row.
at::Tensor AwkwardTensor(int64_t rows, int64_t cols, uint64_t seed) {
  at::manual_seed(seed);
  at::Tensor x = at::randn({rows, cols}) * 0.05;
  x[0].zero_();
  x[1].fill_(0.25);
  x[2] = at::linspace(-1, 1, cols);
  x[3] = x[3] * 1e-20;
  x[4] = x[4] * 3e4;
  return x;
}

struct NamedSpec {
  std::string name;
  QuantSpec spec;
};

std::vector<NamedSpec> Specs() {
  std::vector<NamedSpec> out;
  for (DataType t : {DataType::kInt8, DataType::kInt4, DataType::kInt2, DataType::kUInt8,
                     DataType::kUInt4}) {
    for (bool sym : {true, false}) {
      const bool is_uint = t == DataType::kUInt8 || t == DataType::kUInt4;
      if (is_uint && sym) continue;
      QuantSpec s;
      s.dtype = t;
      s.symmetric = sym;
      const std::string base = std::string(DataTypeName(t)) + (sym ? " sym" : " asym");
      s.qscheme = QScheme::kPerTensor;
      out.push_back({base + " per-tensor", s});
      s.qscheme = QScheme::kPerChannel;
      s.ch_axis = 0;
      out.push_back({base + " per-channel", s});
      s.qscheme = QScheme::kPerGroup;
      s.ch_axis = -1;
      s.group_size = 32;
      out.push_back({base + " per-group 32", s});
    }
  }
  for (DataType t : {DataType::kFp8E4M3, DataType::kFp8E5M2}) {
    QuantSpec s;
    s.dtype = t;
    out.push_back({std::string(DataTypeName(t)) + " per-tensor", s});
    s.qscheme = QScheme::kPerChannel;
    s.ch_axis = 0;
    out.push_back({std::string(DataTypeName(t)) + " per-channel", s});
  }
  for (DataType t : {DataType::kMxFp8E4M3, DataType::kMxFp8E5M2, DataType::kMxFp6E3M2,
                     DataType::kMxFp6E2M3, DataType::kMxFp4, DataType::kMxInt8}) {
    for (MxScaleMode mode : {MxScaleMode::kEven, MxScaleMode::kFloor}) {
      QuantSpec s;
      s.dtype = t;
      s.qscheme = QScheme::kPerGroup;
      s.group_size = 32;
      s.mx_scale_mode = mode;
      out.push_back({std::string(DataTypeName(t)) + (mode == MxScaleMode::kEven ? " even" : " floor"),
                     s});
    }
  }
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    QuantSpec s;
    s.dtype = t;
    out.push_back({std::string(DataTypeName(t)), s});
  }
  return out;
}

// One tensor through every spec on every device path, against the fused
// CPU kernel: parameters from the data (the weight path) then fake
// quantization, and the dynamic variant (per-token activations, MX
// in-kernel scales). Returns the number of specs checked.
int CheckEverySpec(const at::Tensor& x, const std::string& what) {
  const at::Device device = TestDevice();
  const at::Tensor xd = x.to(device);
  int checked = 0;
  for (const FakeQuantOptions& path : DevicePaths()) {
    for (const NamedSpec& c : Specs()) {
      SCOPED_TRACE(c.name + ", " + what + " on " + device.str() +
                   (path.path == KernelPath::kComposed ? " (composed)" : " (engine's path)"));
      auto qp_cpu = ComputeQParams(x, c.spec, CpuFused());
      auto qp_dev = ComputeQParams(xd, c.spec, path);
      EXPECT_TRUE(qp_cpu.ok()) << qp_cpu.status();
      EXPECT_TRUE(qp_dev.ok()) << qp_dev.status();
      if (!qp_cpu.ok() || !qp_dev.ok()) continue;
      if (qp_cpu->scale.defined()) {
        EXPECT_TRUE(SameBits(qp_dev->scale, qp_cpu->scale)) << "scales";
        EXPECT_EQ(qp_dev->scale.device(), device);
      }
      if (qp_cpu->zero_point.defined())
        EXPECT_TRUE(at::equal(qp_dev->zero_point.cpu(), qp_cpu->zero_point)) << "zero points";
      auto y_cpu = FakeQuantize(x, c.spec, *qp_cpu, CpuFused());
      auto y_dev = FakeQuantize(xd, c.spec, *qp_dev, path);
      EXPECT_TRUE(y_cpu.ok()) << y_cpu.status();
      EXPECT_TRUE(y_dev.ok()) << y_dev.status();
      if (!y_cpu.ok() || !y_dev.ok()) continue;
      EXPECT_EQ(y_dev->device(), device);
      EXPECT_EQ(y_dev->scalar_type(), x.scalar_type());
      EXPECT_TRUE(SameBits(*y_dev, *y_cpu)) << "fake-quantized values";
      QuantSpec dyn = c.spec;
      dyn.is_dynamic = true;
      QParams used_cpu, used_dev;
      auto d_cpu = FakeQuantizeDynamic(x, dyn, CpuFused(), &used_cpu);
      auto d_dev = FakeQuantizeDynamic(xd, dyn, path, &used_dev);
      EXPECT_TRUE(d_cpu.ok()) << d_cpu.status();
      EXPECT_TRUE(d_dev.ok()) << d_dev.status();
      if (!d_cpu.ok() || !d_dev.ok()) continue;
      EXPECT_TRUE(SameBits(*d_dev, *d_cpu)) << "dynamic";
      if (used_cpu.scale.defined()) {
        EXPECT_TRUE(SameBits(used_dev.scale, used_cpu.scale)) << "dynamic scales";
      }
      ++checked;
    }
  }
  return checked;
}

TEST(DeviceAgreementTest, EveryFormatMatchesTheFusedCpuKernelBitForBit) {
  int checked = 0;
  for (uint64_t seed : {1, 2}) checked += CheckEverySpec(AwkwardTensor(48, 256, seed), "48x256");
  EXPECT_EQ(checked, 2 * static_cast<int>(Specs().size() * DevicePaths().size()));
}

// float16 / bfloat16 storage goes through the same kernels with other loads
// and stores.
TEST(DeviceAgreementTest, HalfPrecisionInputsMatchBitForBit) {
  for (at::ScalarType t : {at::kHalf, at::kBFloat16}) {
    const at::Tensor x = AwkwardTensor(16, 128, 3).clamp(-6e4, 6e4).to(t);
    EXPECT_EQ(CheckEverySpec(x, c10::toString(t)),
              static_cast<int>(Specs().size() * DevicePaths().size()));
  }
}

// Shapes the vectorised kernel path does not take: an odd column count
// (MX tail blocks, per-channel rows of 33), a 3-D tensor whose group axis
// is not the last (slots that step along the inner axis) and a tensor
// whose storage is offset by one element (unaligned).
TEST(DeviceAgreementTest, OddShapesMatchBitForBit) {
  const at::Tensor odd = AwkwardTensor(33, 70, 4).slice(1, 0, 69).contiguous();
  const at::Device device = TestDevice();
  for (const FakeQuantOptions& path : DevicePaths()) {
    for (const NamedSpec& c : Specs()) {
      if (c.spec.qscheme == QScheme::kPerGroup && !IsMxType(c.spec.dtype)) continue;
      SCOPED_TRACE(c.name + " 33x69");
      QuantSpec dyn = c.spec;
      dyn.is_dynamic = true;
      auto want = FakeQuantizeDynamic(odd, dyn, CpuFused());
      auto got = FakeQuantizeDynamic(odd.to(device), dyn, path);
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(SameBits(*got, *want));
    }
  }
  // int4 groups of 32 along axis 1 of [4, 64, inner]: slot (o, g, i), with
  // an inner size the vectorised path takes (8) and one it does not (6).
  QuantSpec g;
  g.dtype = DataType::kInt4;
  g.symmetric = false;
  g.qscheme = QScheme::kPerGroup;
  g.ch_axis = 1;
  g.group_size = 32;
  auto grouped = [](int64_t inner) {
    return AwkwardTensor(4 * inner, 64, 5).reshape({4, inner, 64}).transpose(1, 2).contiguous();
  };
  // per-channel along the last axis: one slot per column.
  QuantSpec last;
  last.dtype = DataType::kInt8;
  last.qscheme = QScheme::kPerChannel;
  last.ch_axis = -1;
  // Storage offset by one element on the device itself (a copy would align it).
  auto unaligned = [](const at::Tensor& t) { return t.reshape({-1}).slice(0, 1, 513).view({8, 64}); };
  const at::Tensor base = AwkwardTensor(8, 65, 6);
  struct Case {
    std::string name;
    QuantSpec spec;
    at::Tensor cpu;
    at::Tensor dev;
  };
  const std::vector<Case> cases = {
      {"int4 g32 axis 1, inner 8", g, grouped(8), grouped(8).to(device)},
      {"int4 g32 axis 1, inner 6", g, grouped(6), grouped(6).to(device)},
      {"int8 per-channel axis -1", last, AwkwardTensor(16, 64, 7), AwkwardTensor(16, 64, 7).to(device)},
      {"int8 per-channel unaligned", last, unaligned(base), unaligned(base.to(device))},
  };
  for (const FakeQuantOptions& path : DevicePaths()) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      auto qp = ComputeQParams(c.cpu, c.spec, CpuFused());
      ASSERT_TRUE(qp.ok()) << qp.status();
      auto want = FakeQuantize(c.cpu, c.spec, *qp, CpuFused());
      QParams qpd = *qp;
      qpd.scale = qpd.scale.to(device);
      qpd.zero_point = qpd.zero_point.to(device);
      auto got = FakeQuantize(c.dev, c.spec, qpd, path);
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(SameBits(*got, *want));
    }
  }
}

std::string GoldenPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* direct = std::getenv("QUANTD_GOLDEN_VECTORS");
  if (direct != nullptr) return direct;
  return std::string(srcdir ? srcdir : ".") + "/quantd/tests/golden/quant_vectors.json";
}

at::Tensor Rows(const nlohmann::json& rows) {
  std::vector<float> flat;
  for (const auto& r : rows)
    for (const auto& v : r) flat.push_back(v.get<float>());
  const int64_t n = static_cast<int64_t>(rows.size());
  return at::from_blob(flat.data(), {n, static_cast<int64_t>(flat.size()) / n}, at::kFloat)
      .clone();
}

TEST(DeviceAgreementTest, GoldenVectorsOnTheDevice) {
  std::ifstream in(GoldenPath());
  ASSERT_TRUE(in.good()) << GoldenPath();
  const nlohmann::json golden = nlohmann::json::parse(in);
  const at::Device device = TestDevice();
  const at::Tensor x = Rows(golden.at("input_rows_float32")).to(device);
  int cases = 0;
  for (const nlohmann::json& c : golden.at("cases")) {
    auto type = MxTypeFromElementName(c.at("element_dtype").get<std::string>());
    auto mode = MxScaleModeFromName(c.at("scale_mode").get<std::string>());
    ASSERT_TRUE(type.has_value() && mode.has_value()) << c.at("element_dtype");
    QuantSpec s;
    s.dtype = *type;
    s.qscheme = QScheme::kPerGroup;
    s.group_size = 32;
    s.mx_scale_mode = *mode;
    SCOPED_TRACE(DescribeSpec(s));
    for (const FakeQuantOptions& path : DevicePaths()) {
      auto y = FakeQuantizeDynamic(x, s, path);
      ASSERT_TRUE(y.ok()) << y.status();
      EXPECT_TRUE(SameBits(*y, Rows(c.at("expected_rows"))));
    }
    ++cases;
  }
  EXPECT_GE(cases, 8);
  const nlohmann::json& ex = golden.at("int_examples").at(0);
  std::vector<float> xs = ex.at("x").get<std::vector<float>>();
  const std::vector<int> want = ex.at("q").get<std::vector<int>>();
  QuantSpec s;
  s.dtype = DataType::kInt8;
  s.symmetric = ex.at("symmetric").get<bool>();
  const at::Tensor xi =
      at::from_blob(xs.data(), {static_cast<int64_t>(xs.size())}, at::kFloat).clone().to(device);
  auto q = RealQuantize(xi, s, {}, DevicePath());
  ASSERT_TRUE(q.ok()) << q.status();
  const at::Tensor codes = q->codes.cpu().to(at::kInt);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(codes[i].item<int>(), want[i]) << "x=" << xs[i];
}

}  // namespace
}  // namespace quantd::quant
