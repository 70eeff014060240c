#include "worker/export/hf/quark_packing.h"

#include "gtest/gtest.h"
#include "worker/export/hf/quark_tensors.h"
#include "worker/quant/fake_quant.h"

namespace quantd::exporter {
namespace {

TEST(QuarkPacking, Int4WordHoldsElementsInReorderOrder) {
  // Codes 0..7: nibble i holds element kInt4Reorder[i].
  at::Tensor codes = at::arange(8, at::kChar).reshape({1, 8});
  auto packed = PackInt4Reorder(codes);
  ASSERT_TRUE(packed.ok()) << packed.status();
  ASSERT_EQ(packed->sizes().vec(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(static_cast<uint32_t>(packed->item<int32_t>()), 0x75316420u);
  // Signed codes keep their two's-complement nibble; -1 is 0xF.
  at::Tensor neg = at::tensor({-1, 0, 0, 0, 0, 0, 0, -8}, at::kChar).reshape({1, 8});
  EXPECT_EQ(static_cast<uint32_t>(PackInt4Reorder(neg)->item<int32_t>()), 0x8000000Fu);
}

TEST(QuarkPacking, Int4RoundTripsWithPaddingAndRanks) {
  at::manual_seed(3);
  for (bool is_signed : {true, false}) {
    at::Tensor codes =
        is_signed ? at::randint(-8, 8, {5, 21}, at::kChar) : at::randint(0, 16, {5, 21}, at::kByte);
    auto packed = PackInt4Reorder(codes);
    ASSERT_TRUE(packed.ok());
    EXPECT_EQ(packed->sizes().vec(), (std::vector<int64_t>{5, 3}));
    auto back = UnpackInt4Reorder(*packed, 21, is_signed);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(at::equal(back->to(at::kInt), codes.to(at::kInt)));
    // Elements 21..23 (offsets 5, 6, 7 -> nibbles 6, 3, 7) are zero padding.
    EXPECT_EQ(static_cast<uint32_t>((*packed)[0][2].item<int32_t>()) & 0xFF00F000u, 0u);
  }
  at::Tensor vec = at::tensor({3, -2, 7, -8, 1, 0, 5, -1, 2}, at::kChar);
  auto p1 = PackInt4Reorder(vec);
  ASSERT_EQ(p1->sizes().vec(), (std::vector<int64_t>{2}));
  EXPECT_TRUE(at::equal(UnpackInt4Reorder(*p1, 9, true)->to(at::kInt), vec.to(at::kInt)));
  at::Tensor scalar = at::tensor(-3, at::kChar).reshape({});
  auto p0 = PackInt4Reorder(scalar);
  EXPECT_EQ(p0->dim(), 0);
  EXPECT_EQ(p0->item<int32_t>(), -3);
  EXPECT_FALSE(UnpackInt4Reorder(*p1, 17, true).ok());
}

TEST(QuarkPacking, Fp4PairsAndFp6Triples) {
  at::Tensor fp4 = at::tensor({1, 2, 3, 4, 15}, at::kByte).reshape({1, 5});
  auto p = PackFp4Pairs(fp4);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(at::equal(*p, at::tensor({0x21, 0x43, 0x0F}, at::kByte).reshape({1, 3})));
  EXPECT_TRUE(at::equal(*UnpackFp4Pairs(*p, 5), fp4));

  at::Tensor fp6 = at::tensor({0x01, 0x3F, 0x20, 0x15}, at::kByte).reshape({1, 4});
  auto p6 = PackFp6(fp6);
  ASSERT_TRUE(p6.ok());
  // word = 0x01 | 0x3F << 6 | 0x20 << 12 | 0x15 << 18 = 0x0000_0000_0101_0110_0000_1111_1100_0001
  const uint32_t word = 0x01u | 0x3Fu << 6 | 0x20u << 12 | 0x15u << 18;
  EXPECT_TRUE(at::equal(
      *p6, at::tensor({static_cast<int>(word & 0xFF), static_cast<int>((word >> 8) & 0xFF),
                       static_cast<int>(word >> 16)},
                      at::kByte)
               .reshape({1, 3})));
  EXPECT_TRUE(at::equal(*UnpackFp6(*p6, 4), fp6));
  EXPECT_EQ(PackFp6(at::zeros({2, 6}, at::kByte)).status().code(), StatusCode::kInvalidArgument);
}

// Every layout round-trips: Decode(Encode(w)) gives RealQuantize(w)'s codes
// and parameters, and its dequantization is the fake-quantized weight.
TEST(QuarkTensors, EncodeDecodeRoundTripsEveryLayout) {
  at::manual_seed(7);
  at::Tensor w = at::randn({24, 64}) * 0.3;
  std::vector<quant::QuantSpec> specs(9);
  specs[0].dtype = quant::DataType::kInt4;
  specs[0].qscheme = quant::QScheme::kPerGroup;
  specs[0].group_size = 16;
  specs[1] = specs[0];
  specs[1].dtype = quant::DataType::kUInt4;
  specs[1].symmetric = false;
  specs[2].dtype = quant::DataType::kInt8;
  specs[2].qscheme = quant::QScheme::kPerChannel;
  specs[3].dtype = quant::DataType::kUInt8;
  specs[3].qscheme = quant::QScheme::kPerGroup;
  specs[3].group_size = 8;
  specs[3].symmetric = false;
  specs[4].dtype = quant::DataType::kFp8E4M3;
  specs[5].dtype = quant::DataType::kMxFp4;
  specs[6].dtype = quant::DataType::kMxFp6E3M2;
  specs[7].dtype = quant::DataType::kMxFp8E5M2;
  specs[8].dtype = quant::DataType::kUInt4;
  specs[8].qscheme = quant::QScheme::kPerChannel;
  specs[8].symmetric = false;
  for (const auto& spec : specs) {
    SCOPED_TRACE(quant::DescribeSpec(spec));
    auto qp = quant::ComputeQParams(w, spec);
    ASSERT_TRUE(qp.ok()) << qp.status();
    auto fq = quant::FakeQuantize(w, spec, *qp);
    ASSERT_TRUE(fq.ok());
    auto stored = EncodeQuarkWeight(*fq, spec, *qp);
    ASSERT_TRUE(stored.ok()) << stored.status();
    auto q = DecodeQuarkWeight(*stored, spec, {24, 64});
    ASSERT_TRUE(q.ok()) << q.status();
    auto deq = quant::Dequantize(*q, spec);
    ASSERT_TRUE(deq.ok()) << deq.status();
    EXPECT_TRUE(at::equal(*deq, *fq));
    EXPECT_TRUE(at::equal(q->qparams.scale.to(at::kFloat), qp->scale.to(at::kFloat)));
  }
  // A wrong stored dtype is DATA_LOSS naming the tensor.
  auto stored = EncodeQuarkWeight(w, specs[2], *quant::ComputeQParams(w, specs[2]));
  ASSERT_TRUE(stored.ok());
  stored->weight.dtype = io::SafetensorsDtype::kU8;
  auto bad = DecodeQuarkWeight(*stored, specs[2], {24, 64});
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("weight is U8"), std::string::npos);
  quant::QuantSpec int2;
  int2.dtype = quant::DataType::kInt2;
  EXPECT_EQ(CheckQuarkWeightSpec(int2).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quantd::exporter
