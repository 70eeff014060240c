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
  // A GPU has one path (composed); on cpu ask for it explicitly.
  o.path = TestDevice().is_cpu() ? KernelPath::kComposed : KernelPath::kAuto;
  return o;
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

TEST(DeviceAgreementTest, EveryFormatMatchesTheFusedCpuKernelBitForBit) {
  const at::Device device = TestDevice();
  int checked = 0;
  for (uint64_t seed : {1, 2}) {
    const at::Tensor x = AwkwardTensor(48, 256, seed);
    const at::Tensor xd = x.to(device);
    for (const NamedSpec& c : Specs()) {
      SCOPED_TRACE(c.name + " seed " + std::to_string(seed) + " on " + device.str());
      // Parameters from the data (the weight path), then fake quantization.
      auto qp_cpu = ComputeQParams(x, c.spec, CpuFused());
      auto qp_dev = ComputeQParams(xd, c.spec, DevicePath());
      ASSERT_TRUE(qp_cpu.ok()) << qp_cpu.status();
      ASSERT_TRUE(qp_dev.ok()) << qp_dev.status();
      if (qp_cpu->scale.defined()) {
        EXPECT_TRUE(SameBits(qp_dev->scale, qp_cpu->scale)) << "scales";
        EXPECT_EQ(qp_dev->scale.device(), device);
      }
      if (qp_cpu->zero_point.defined())
        EXPECT_TRUE(at::equal(qp_dev->zero_point.cpu(), qp_cpu->zero_point)) << "zero points";
      auto y_cpu = FakeQuantize(x, c.spec, *qp_cpu, CpuFused());
      auto y_dev = FakeQuantize(xd, c.spec, *qp_dev, DevicePath());
      ASSERT_TRUE(y_cpu.ok()) << y_cpu.status();
      ASSERT_TRUE(y_dev.ok()) << y_dev.status();
      EXPECT_EQ(y_dev->device(), device);
      EXPECT_TRUE(SameBits(*y_dev, *y_cpu)) << "fake-quantized values";
      // Dynamic (per-token activations, MX in-kernel scales).
      QuantSpec dyn = c.spec;
      dyn.is_dynamic = true;
      auto d_cpu = FakeQuantizeDynamic(x, dyn, CpuFused());
      auto d_dev = FakeQuantizeDynamic(xd, dyn, DevicePath());
      ASSERT_TRUE(d_cpu.ok()) << d_cpu.status();
      ASSERT_TRUE(d_dev.ok()) << d_dev.status();
      EXPECT_TRUE(SameBits(*d_dev, *d_cpu)) << "dynamic";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * static_cast<int>(Specs().size()));
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
    auto y = FakeQuantizeDynamic(x, s, DevicePath());
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_TRUE(SameBits(*y, Rows(c.at("expected_rows"))));
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
