#include "worker/pipeline/freeze.h"

#include "gtest/gtest.h"
#include "worker/models/registry.h"
#include "worker/pipeline/weight_quantizer.h"

namespace quantd::pipeline {
namespace {

using quant::DataType;
using quant::QScheme;

quant::QuantSpec Spec(DataType t, QScheme s, bool sym = true) {
  quant::QuantSpec q;
  q.dtype = t;
  q.qscheme = s;
  q.symmetric = sym;
  if (s == QScheme::kPerChannel) q.ch_axis = 0;
  if (s == QScheme::kPerGroup) q.ch_axis = -1;
  return q;
}

TEST(FreezeTest, FrozenBlockMatchesTheFakeQuantizedBlockWithLessMemory) {
  auto model = models::OpenCausalLM("models/stories260K", {});
  ASSERT_TRUE(model.ok()) << model.status();
  at::manual_seed(3);
  const at::Tensor hidden = at::randn({2, 32, (*model)->config().hidden_size});
  struct Case {
    quant::QuantSpec spec;
    double max_ratio;  // frozen / fp32 bytes
  };
  // int4 packed two per byte plus a float32 scale and int32 zero point per
  // 64-wide row (stories260K is tiny, so those are 3% of the fp32 bytes);
  // int8 and fp8 one
  // byte per weight; MXFP4 packed plus one E8M0 byte per 32.
  for (const Case& c : {Case{Spec(DataType::kInt4, QScheme::kPerChannel), 0.16},
                        Case{Spec(DataType::kUInt4, QScheme::kPerChannel, false), 0.16},
                        Case{Spec(DataType::kInt8, QScheme::kPerChannel), 0.28},
                        Case{Spec(DataType::kFp8E4M3, QScheme::kPerTensor), 0.26},
                        Case{Spec(DataType::kMxFp4, QScheme::kPerGroup), 0.17}}) {
    const std::string what = quant::DescribeSpec(c.spec);
    auto fake = (*model)->LoadBlock(1);
    auto frozen = (*model)->LoadBlock(1);
    ASSERT_TRUE(fake.ok() && frozen.ok());
    std::map<std::string, LayerPlan> plans;
    std::map<std::string, quant::QParams> qparams;
    for (models::Linear* l : (*fake)->linears()) {
      plans[l->name()].weight = c.spec;
      auto qp = quant::ComputeQParams(l->weight(), c.spec);
      ASSERT_TRUE(qp.ok()) << what << qp.status();
      auto fq = quant::FakeQuantize(l->weight(), c.spec, *qp);
      ASSERT_TRUE(fq.ok()) << what;
      l->weight() = *fq;
      (*frozen)->FindLinear(l->name())->weight() = *fq;  // as the scratch store holds it
      qparams[l->name()] = *qp;
    }
    auto report = FreezeBlock(**frozen, plans, qparams);
    ASSERT_TRUE(report.ok()) << what << report.status();
    EXPECT_EQ(report->layers, 7) << what;
    EXPECT_TRUE(report->kept_float.empty()) << what;
    for (models::Linear* l : (*frozen)->linears()) EXPECT_FALSE(l->weight().defined()) << what;
    const double ratio = static_cast<double>(report->frozen_bytes) / report->float_bytes;
    std::printf("%-32s frozen/fp32 bytes %.3f\n", what.c_str(), ratio);
    EXPECT_LE(ratio, c.max_ratio) << what;

    auto a = (*fake)->Forward(hidden);
    auto b = (*frozen)->Forward(hidden);
    ASSERT_TRUE(a.ok() && b.ok()) << what << b.status();
    EXPECT_TRUE(at::equal(*a, *b)) << what << " max diff " << (*a - *b).abs().max().item<float>();
    // Freezing twice is refused, not silently repeated.
    EXPECT_EQ(FreezeBlock(**frozen, plans).status().code(), StatusCode::kFailedPrecondition);
  }
}

TEST(FreezeTest, WeightsTheCodesCannotExpressStayFloat) {
  auto model = models::OpenCausalLM("models/stories260K", {});
  ASSERT_TRUE(model.ok());
  auto block = (*model)->LoadBlock(0);
  ASSERT_TRUE(block.ok());
  std::map<std::string, LayerPlan> plans;
  const quant::QuantSpec int8 = Spec(DataType::kInt8, QScheme::kPerChannel);
  for (models::Linear* l : (*block)->linears()) plans[l->name()].weight = int8;
  // Float weights (never fake-quantized) do not round-trip through codes.
  auto report = FreezeBlock(**block, plans);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->layers, 0);
  EXPECT_EQ(report->kept_float.size(), 7u);
  for (models::Linear* l : (*block)->linears()) EXPECT_TRUE(l->weight().defined());
}

// QuantEmbedding frozen: looking rows up in the real-quantized table gives
// exactly the fake-quantized table's rows, for every way the parameters
// index (per tensor, per row, per column, groups along a row, groups down
// the rows, MX blocks), with the float table dropped.
TEST(FreezeTest, FrozenEmbeddingLooksUpTheFakeQuantizedRowsWithLessMemory) {
  at::manual_seed(11);
  const at::Tensor table = at::randn({96, 64}) * 0.05;
  const at::Tensor ids = at::randint(0, 96, {3, 7}, at::kLong);
  struct Case {
    std::string name;
    quant::QuantSpec spec;
    double max_ratio;
  };
  quant::QuantSpec columns = Spec(DataType::kInt8, QScheme::kPerChannel);
  columns.ch_axis = 1;
  quant::QuantSpec g32 = Spec(DataType::kInt4, QScheme::kPerGroup);
  g32.group_size = 32;
  quant::QuantSpec u4 = Spec(DataType::kUInt4, QScheme::kPerGroup, false);
  u4.group_size = 32;
  quant::QuantSpec down = g32;
  down.ch_axis = 0;
  quant::QuantSpec mx = Spec(DataType::kMxFp4, QScheme::kPerGroup);
  mx.group_size = 32;
  const std::vector<Case> cases = {
      {"int8 per tensor", Spec(DataType::kInt8, QScheme::kPerTensor), 0.26},
      {"int8 per row", Spec(DataType::kInt8, QScheme::kPerChannel), 0.29},
      {"int8 per column", columns, 0.28},
      {"int4 g32 along rows", g32, 0.19},
      {"uint4 asym g32", u4, 0.19},
      {"int4 g32 down the rows", down, 0.19},
      {"mxfp4", mx, 0.17},
      {"fp8 per tensor", Spec(DataType::kFp8E4M3, QScheme::kPerTensor), 0.26},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto qp = quant::ComputeQParams(table, c.spec);
    ASSERT_TRUE(qp.ok()) << qp.status();
    auto fake = quant::FakeQuantize(table, c.spec, *qp);
    ASSERT_TRUE(fake.ok()) << fake.status();
    models::Embedding e({"model.embed_tokens", 96, 64}, *fake);
    const at::Tensor want = e.Forward(ids);
    auto r = FreezeEmbedding(e, c.spec, *qp);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->layers, 1) << "kept float";
    EXPECT_FALSE(e.weight().defined());
    const at::Tensor got = e.Forward(ids);
    EXPECT_EQ(got.sizes(), (at::IntArrayRef{3, 7, 64}));
    EXPECT_TRUE(at::equal(got, want));
    EXPECT_EQ(r->float_bytes, 96 * 64 * 4);
    EXPECT_LE(r->frozen_bytes, c.max_ratio * r->float_bytes) << r->frozen_bytes;
    EXPECT_EQ(FreezeEmbedding(e, c.spec, *qp).status().code(), StatusCode::kFailedPrecondition);
  }
}

// Model sizes and evaluation's size line count every code at its real bit
// width (issue 25: 3-bit codes were counted as 8-bit): a [48, 64] weight
// takes ceil(3072 * bits / 8) bytes of codes plus its parameters, float32
// scales (and zero points when asymmetric), one E8M0 byte per MX block.
TEST(FreezeTest, PackedBytesCountEachBitWidth) {
  at::manual_seed(5);
  const at::Tensor w = at::randn({48, 64}) * 0.1;
  const int64_t numel = 48 * 64;
  struct Case {
    quant::QuantSpec spec;
    int bits;
    int64_t params;  // bytes
  };
  auto mx = [](DataType t) {
    quant::QuantSpec s = Spec(t, QScheme::kPerGroup);
    s.group_size = 32;
    return s;
  };
  std::vector<Case> cases;
  for (auto [t, bits] : {std::pair{DataType::kInt2, 2}, {DataType::kInt3, 3}, {DataType::kInt4, 4},
                         {DataType::kInt8, 8}}) {
    cases.push_back({Spec(t, QScheme::kPerChannel), bits, 48 * 4});
  }
  for (auto [t, bits] : {std::pair{DataType::kUInt2, 2}, {DataType::kUInt3, 3},
                         {DataType::kUInt4, 4}, {DataType::kUInt8, 8}}) {
    cases.push_back({Spec(t, QScheme::kPerChannel, false), bits, 48 * 8});
  }
  cases.push_back({Spec(DataType::kFp8E4M3, QScheme::kPerTensor), 8, 4});
  cases.push_back({Spec(DataType::kFp8E5M2, QScheme::kPerChannel), 8, 48 * 4});
  cases.push_back({mx(DataType::kMxFp4), 4, 48 * 2});
  cases.push_back({mx(DataType::kMxFp6E3M2), 6, 48 * 2});
  cases.push_back({mx(DataType::kMxFp6E2M3), 6, 48 * 2});
  cases.push_back({mx(DataType::kMxFp8E4M3), 8, 48 * 2});
  cases.push_back({mx(DataType::kMxInt8), 8, 48 * 2});
  for (const Case& c : cases) {
    const std::string what = quant::DescribeSpec(c.spec);
    auto qp = quant::ComputeQParams(w, c.spec);
    ASSERT_TRUE(qp.ok()) << what << qp.status();
    auto fq = quant::FakeQuantize(w, c.spec, *qp);
    ASSERT_TRUE(fq.ok()) << what;
    auto frozen = FreezeWeight(*fq, c.spec, *qp, "w");
    ASSERT_TRUE(frozen.ok()) << what << frozen.status();
    ASSERT_TRUE(frozen->has_value()) << what << " kept float";
    const int64_t want = (numel * c.bits + 7) / 8 + c.params;
    EXPECT_EQ((*frozen)->packed_bytes(), want) << what;
    EXPECT_EQ(QuantizedStorageBytes({48, 64}, c.spec), want) << what;
    // Memory holds codes of at least 4 bits each, so never less.
    EXPECT_GE((*frozen)->bytes(), want - c.params) << what;
  }
  // A plain float16 cast: two bytes a weight, no parameters.
  quant::QuantSpec f16;
  f16.dtype = DataType::kFloat16;
  EXPECT_EQ(QuantizedStorageBytes({48, 64}, f16), numel * 2);
}

TEST(FreezeTest, NibblePackingRoundTripsSignedAndUnsignedCodes) {
  at::Tensor s = at::arange(-8, 8, at::kChar).repeat({3}).narrow(0, 0, 47);  // odd count
  at::Tensor packed = PackNibbles(s);
  EXPECT_EQ(packed.numel(), 24);
  EXPECT_EQ(packed[0].item<uint8_t>(), 0x98);  // -8 -> 0x8 low, -7 -> 0x9 high
  EXPECT_TRUE(at::equal(UnpackNibbles(packed, 47, true), s));
  at::Tensor u = at::arange(0, 16, at::kByte).repeat({2});
  EXPECT_TRUE(at::equal(UnpackNibbles(PackNibbles(u), 32, false), u));
}

}  // namespace
}  // namespace quantd::pipeline
