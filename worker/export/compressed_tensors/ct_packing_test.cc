// The words are computed by hand from the layout in ct_packing.h; the same
// inputs through compressed-tensors' own pack_to_int32 (ac8e2ba) give the
// same words.
#include "worker/export/compressed_tensors/ct_packing.h"

#include <vector>

#include "gtest/gtest.h"

namespace quantd::exporter {
namespace {

at::Tensor Row(const std::vector<int64_t>& v) {
  return at::tensor(v, at::kLong).reshape({1, static_cast<int64_t>(v.size())});
}

std::vector<int32_t> Words(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::vector<int32_t>(c.data_ptr<int32_t>(), c.data_ptr<int32_t>() + c.numel());
}

TEST(CtPacking, Int4EightPerWordInOrderOffsetByEight) {
  // -8..7 stored as 0..15: nibble j of word 0 holds 0..7, of word 1 8..15.
  std::vector<int64_t> codes;
  for (int q = -8; q < 8; ++q) codes.push_back(q);
  auto packed = PackCtInt32(Row(codes), 4);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(packed->sizes().vec(), (std::vector<int64_t>{1, 2}));
  // 0x76543210 and 0xFEDCBA98.
  EXPECT_EQ(Words(*packed), (std::vector<int32_t>{0x76543210, static_cast<int32_t>(0xFEDCBA98u)}));
}

TEST(CtPacking, Int8FourPerWord) {
  auto packed = PackCtInt32(Row({-128, -1, 0, 127}), 8);
  ASSERT_TRUE(packed.ok()) << packed.status();
  // 0, 127, 128, 255 from the low byte up.
  EXPECT_EQ(Words(*packed), (std::vector<int32_t>{static_cast<int32_t>(0xFF807F00u)}));
}

TEST(CtPacking, RaggedRowIsZeroPadded) {
  auto packed = PackCtInt32(Row({0, 1, -1}), 4);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(Words(*packed), (std::vector<int32_t>{0x798}));
  auto back = UnpackCtInt32(*packed, 4, 3);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(at::equal(back->to(at::kLong), Row({0, 1, -1})));
}

TEST(CtPacking, ThreeBitValueCrossesTheWordBoundary) {
  // Element 10 starts at bit 30: its low two bits end word 0, its high bit
  // starts word 1 (3 + 4 = 7 = 0b111).
  const at::Tensor codes = Row({-4, -3, -2, -1, 0, 1, 2, 3, 3, -4, 3});
  auto packed = PackCtInt32(codes, 3);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(Words(*packed), (std::vector<int32_t>{static_cast<int32_t>(0xC7FAC688u), 1}));
  auto back = UnpackCtInt32(*packed, 3, 11);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(at::equal(back->to(at::kLong), codes));
}

TEST(CtPacking, ZeroPointsPackAlongTheOutputAxis) {
  std::vector<int64_t> col;
  for (int q = -8; q < 8; ++q) col.push_back(q);
  const at::Tensor zp = at::tensor(col, at::kLong).reshape({16, 1});
  auto packed = PackCtInt32(zp, 4, /*packed_dim=*/0);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(packed->sizes().vec(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(Words(*packed), (std::vector<int32_t>{0x76543210, static_cast<int32_t>(0xFEDCBA98u)}));
  auto back = UnpackCtInt32(*packed, 4, 16, 0);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(at::equal(back->to(at::kLong), zp));
}

TEST(CtPacking, RandomRoundTripEveryWidth) {
  at::manual_seed(7);
  for (int bits = 1; bits <= 8; ++bits) {
    const int64_t lo = -(int64_t{1} << (bits - 1)), hi = (int64_t{1} << (bits - 1));
    const at::Tensor codes = at::randint(lo, hi, {5, 37}, at::kLong);
    auto packed = PackCtInt32(codes, bits);
    ASSERT_TRUE(packed.ok()) << packed.status();
    EXPECT_EQ(packed->size(1), (37 * bits + 31) / 32) << bits;
    auto back = UnpackCtInt32(*packed, bits, 37);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(at::equal(back->to(at::kLong), codes)) << bits;
  }
}

TEST(CtPacking, RefusesOutOfRangeCodesAndWrongWordCounts) {
  EXPECT_EQ(PackCtInt32(Row({8}), 4).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PackCtInt32(Row({-9}), 4).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PackCtInt32(Row({0}), 9).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(UnpackCtInt32(at::zeros({1, 2}, at::kInt), 4, 8).status().code(),
            StatusCode::kDataLoss);
  EXPECT_EQ(UnpackCtInt32(at::zeros({1, 1}, at::kLong), 4, 8).status().code(),
            StatusCode::kDataLoss);
}

}  // namespace
}  // namespace quantd::exporter
