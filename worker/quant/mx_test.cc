#include "worker/quant/mx.h"

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

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

QuantSpec Mx(DataType t, MxScaleMode mode = MxScaleMode::kEven, int axis = -1) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = QScheme::kPerGroup;
  s.group_size = 32;
  s.ch_axis = axis;
  s.mx_scale_mode = mode;
  return s;
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

const std::vector<DataType> kMxTypes = {DataType::kMxFp8E4M3, DataType::kMxFp8E5M2,
                                        DataType::kMxFp6E3M2, DataType::kMxFp6E2M3,
                                        DataType::kMxFp4,     DataType::kMxInt8};

at::Tensor Tensor2d(const nlohmann::json& rows) {
  std::vector<float> flat;
  for (const auto& r : rows) {
    for (const auto& v : r) flat.push_back(v.get<float>());
  }
  const int64_t n = static_cast<int64_t>(rows.size());
  return at::from_blob(flat.data(), {n, static_cast<int64_t>(flat.size()) / n}, at::kFloat).clone();
}

TEST(MxTest, GoldenVectorsInBothScaleModes) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const std::string path =
      std::string(srcdir ? srcdir : ".") + "/quantd/tests/golden/quant_vectors.json";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  const nlohmann::json golden = nlohmann::json::parse(in);
  const at::Tensor x = Tensor2d(golden.at("input_rows_float32"));
  int cases = 0;
  for (const nlohmann::json& c : golden.at("cases")) {
    auto type = MxTypeFromElementName(c.at("element_dtype").get<std::string>());
    auto mode = MxScaleModeFromName(c.at("scale_mode").get<std::string>());
    ASSERT_TRUE(type.has_value() && mode.has_value()) << c.at("element_dtype");
    const QuantSpec spec = Mx(*type, *mode);
    const std::string what = DescribeSpec(spec);
    const at::Tensor expected = Tensor2d(c.at("expected_rows"));
    const std::vector<float> scales = c.at("scales").get<std::vector<float>>();
    for (KernelPath p : {KernelPath::kFused, KernelPath::kComposed, KernelPath::kReference}) {
      QParams used;
      auto y = FakeQuantizeDynamic(x, spec, Path(p), &used);
      ASSERT_TRUE(y.ok()) << y.status();
      ExpectSameBits(*y, expected, what + " dynamic");
      ASSERT_EQ(used.scale.sizes(), (at::IntArrayRef{8, 1}));
      for (int r = 0; r < 8; ++r) EXPECT_EQ(used.scale[r][0].item<float>(), scales[r]) << what;
      auto ys = FakeQuantize(x, spec, used, Path(p));
      ASSERT_TRUE(ys.ok());
      ExpectSameBits(*ys, expected, what + " static");
    }
    auto q = RealQuantize(x, spec);
    ASSERT_TRUE(q.ok());
    for (int r = 0; r < 8; ++r) {
      EXPECT_EQ(q->e8m0[r][0].item<int>(), static_cast<int>(std::log2(scales[r])) + 127);
    }
    ++cases;
  }
  EXPECT_EQ(cases, 10);
}

// MXINT8 against a float64 reference written here: even-mode exponent
// (amax's mantissa rounded half-up at 8 bits), elements in units of 2^X / 64.
TEST(MxTest, MxInt8AgreesWithAFloat64Reference) {
  at::manual_seed(21);
  const at::Tensor x = at::randn({7, 96}) * at::pow(10.0, at::rand({7, 1}) * 6 - 3);
  auto y = FakeQuantizeDynamic(x, Mx(DataType::kMxInt8));
  ASSERT_TRUE(y.ok());
  const at::Tensor xd = x.to(at::kDouble);
  for (int64_t r = 0; r < 7; ++r) {
    for (int64_t b = 0; b < 3; ++b) {
      double amax = 0;
      for (int64_t c = b * 32; c < (b + 1) * 32; ++c) {
        amax = std::max(amax, std::fabs(xd[r][c].item<double>()));
      }
      int e = 0;
      const double m = 2 * std::frexp(amax, &e);  // amax = m * 2^(e-1), m in [1, 2)
      const int x_exp = (e - 1) + (m + std::ldexp(1.0, -9) >= 2.0 ? 1 : 0);
      const double unit = std::ldexp(1.0, x_exp - 6);
      for (int64_t c = b * 32; c < (b + 1) * 32; ++c) {
        const double q =
            std::min(std::max(std::nearbyint(xd[r][c].item<double>() / unit), -127.0), 127.0);
        ASSERT_EQ((*y)[r][c].item<float>(), static_cast<float>(q * unit)) << r << "," << c;
      }
    }
  }
}

TEST(MxTest, TailBlockIsZeroPaddedAndAxisIsRespected) {
  at::manual_seed(22);
  const at::Tensor x = at::randn({5, 40}) * 4;
  for (DataType t : kMxTypes) {
    const QuantSpec spec = Mx(t);
    auto y = FakeQuantizeDynamic(x, spec);
    ASSERT_TRUE(y.ok());
    // The 8-element tail block alone gives the same result.
    auto tail = FakeQuantizeDynamic(x.slice(1, 32, 40).contiguous(), spec);
    ASSERT_TRUE(tail.ok());
    ExpectSameBits(y->slice(1, 32, 40).contiguous(), *tail, std::string(DataTypeName(t)) + " tail");
    // Blocks along axis 0 of the transpose are the same blocks.
    auto yt = FakeQuantizeDynamic(x.t().contiguous(), Mx(t, MxScaleMode::kEven, 0));
    ASSERT_TRUE(yt.ok());
    ExpectSameBits(yt->t().contiguous(), *y, std::string(DataTypeName(t)) + " axis 0");
  }
}

TEST(MxTest, FusedReferenceAndComposedAgreeOnEveryFormatAndMode) {
  at::manual_seed(23);
  at::Tensor base = at::randn({4, 70, 6}) * at::pow(10.0, at::rand({4, 70, 6}) * 8 - 4);
  // Special blocks: all zeros, one non-zero value, NaN / Inf, tiny values.
  base.select(0, 0).select(1, 0).zero_();
  base.select(0, 1).select(1, 1).zero_();
  base[1][3][1] = 5.0f;
  base[2][0][2] = kNaN;
  base[2][5][2] = kInf;
  base[2][9][2] = -kInf;
  base.select(0, 3).select(1, 3).mul_(1e-38);
  for (DataType t : kMxTypes) {
    for (MxScaleMode mode : {MxScaleMode::kEven, MxScaleMode::kFloor, MxScaleMode::kCeil}) {
      for (int axis : {1, -1}) {
        for (at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
          const at::Tensor x = base.to(dtype);
          const QuantSpec spec = Mx(t, mode, axis);
          const std::string what =
              DescribeSpec(spec) + " axis " + std::to_string(axis) + " " + c10::toString(dtype);
          QParams used_f, used_c, used_r;
          auto fused = FakeQuantizeDynamic(x, spec, Path(KernelPath::kFused), &used_f);
          auto composed = FakeQuantizeDynamic(x, spec, Path(KernelPath::kComposed), &used_c);
          auto ref = FakeQuantizeDynamic(x, spec, Path(KernelPath::kReference), &used_r);
          ASSERT_TRUE(fused.ok() && composed.ok() && ref.ok()) << what;
          ExpectSameBits(*composed, *fused, what + " composed");
          ExpectSameBits(*ref, *fused, what + " reference");
          ExpectSameBits(used_c.scale, used_f.scale, what + " scales");
          ExpectSameBits(used_r.scale, used_f.scale, what + " reference scales");
          // Real quantization round trip.
          auto q = RealQuantize(x, spec, used_f);
          auto qc = RealQuantize(x, spec, used_f, Path(KernelPath::kComposed));
          ASSERT_TRUE(q.ok() && qc.ok()) << what;
          EXPECT_TRUE(at::equal(q->codes, qc->codes)) << what;
          const at::Tensor finite = at::isfinite(x.to(at::kFloat));
          auto dq = Dequantize(*q, spec, dtype);
          ASSERT_TRUE(dq.ok()) << dq.status();
          ExpectSameBits(at::where(finite, *dq, *fused), *fused, what + " dequantized codes");
          if (t == DataType::kMxFp4) {
            EXPECT_LT(q->codes.max().item<int>(), 16);
          } else if (t == DataType::kMxFp6E2M3 || t == DataType::kMxFp6E3M2) {
            EXPECT_LT(q->codes.max().item<int>(), 64);
          }
        }
      }
    }
  }
}

TEST(MxTest, SpecialValuesSaturationAndZeroBlocks) {
  // NaN / Inf pass through and do not set the block scale.
  std::vector<float> row(32, 0.0f);
  row[0] = 3.0f;
  row[1] = kNaN;
  row[2] = kInf;
  row[3] = -kInf;
  row[4] = 7.9f;
  const at::Tensor x = at::from_blob(row.data(), {1, 32}, at::kFloat).clone();
  QParams used;
  auto y = FakeQuantizeDynamic(x, Mx(DataType::kMxFp6E2M3, MxScaleMode::kFloor), {}, &used);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(used.scale.item<float>(), 1.0f);  // floor(log2 7.9) - 2 = 0
  EXPECT_EQ((*y)[0][0].item<float>(), 3.0f);
  EXPECT_TRUE(std::isnan((*y)[0][1].item<float>()));
  EXPECT_EQ((*y)[0][2].item<float>(), kInf);
  EXPECT_EQ((*y)[0][3].item<float>(), -kInf);
  EXPECT_EQ((*y)[0][4].item<float>(), 7.5f);  // saturates at e2m3's max normal
  // An all-zero block: zeros out, scale 2^-127 (even) or epsilon (floor).
  const at::Tensor zeros = at::zeros({2, 32});
  for (auto [mode, scale] :
       std::vector<std::pair<MxScaleMode, float>>{{MxScaleMode::kEven, std::ldexp(1.0f, -127)},
                                                  {MxScaleMode::kFloor, std::ldexp(1.0f, -23)}}) {
    QParams zq;
    auto yz = FakeQuantizeDynamic(zeros, Mx(DataType::kMxFp4, mode), {}, &zq);
    ASSERT_TRUE(yz.ok());
    EXPECT_TRUE(at::equal(*yz, zeros));
    EXPECT_EQ(zq.scale[0][0].item<float>(), scale);
  }
  // E8M0 codes of a few scales.
  const at::Tensor codes =
      mx::E8M0Codes(at::tensor({1.0f, 128.0f, std::ldexp(1.0f, -127), std::ldexp(1.0f, 127)}));
  EXPECT_EQ(codes[0].item<int>(), 127);
  EXPECT_EQ(codes[1].item<int>(), 134);
  EXPECT_EQ(codes[2].item<int>(), 0);
  EXPECT_EQ(codes[3].item<int>(), 254);
}

TEST(MxTest, StaticScalesFromCalibrationAreUsedAsGiven) {
  // A calibrated (larger) block scale applies to a later, smaller batch.
  const at::Tensor calib = at::full({1, 32}, 100.0f);
  const at::Tensor batch = at::full({1, 32}, 3.0f);
  const QuantSpec spec = Mx(DataType::kMxFp4, MxScaleMode::kFloor);
  auto qp = ComputeQParams(calib, spec);
  ASSERT_TRUE(qp.ok());
  EXPECT_EQ(qp->scale.item<float>(), 16.0f);  // floor(log2 100) - 2 = 4
  for (KernelPath p : {KernelPath::kFused, KernelPath::kComposed, KernelPath::kReference}) {
    auto y = FakeQuantize(batch, spec, *qp, Path(p));
    ASSERT_TRUE(y.ok());
    EXPECT_EQ((*y)[0][0].item<float>(), 0.0f);  // 3/16 = 0.1875 rounds to 0 on the fp4 grid
  }
}

}  // namespace
}  // namespace quantd::quant
