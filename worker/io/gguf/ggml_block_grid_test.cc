#include "worker/io/gguf/ggml_block_grid.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "worker/io/gguf/ggml_types.h"

namespace quantd::gguf {
namespace {

const GgmlType kGridTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                               GgmlType::kQ8_0, GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K,
                               GgmlType::kQ5_K, GgmlType::kQ6_K};

struct Blocks {
  int64_t n = 0;  // elements
  int block = 0;
  size_t bytes_per_block = 0;
  std::vector<uint8_t> bytes;
};

// Four blocks of `type` quantized by ggml's reference quantizer from
// normal floats.
Blocks Quantized(GgmlType type, uint32_t seed) {
  const auto& traits = GetGgmlTypeTraits(type);
  Blocks b;
  b.block = static_cast<int>(traits.block_size);
  b.bytes_per_block = traits.type_size;
  b.n = 4 * b.block;
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(b.n);
  for (float& v : x) v = normal(gen);
  b.bytes.resize(*GgmlRowBytes(type, b.n));
  EXPECT_TRUE(QuantizeRow(type, x.data(), b.bytes.data(), b.n).ok());
  return b;
}

// The grid of every element of the blocks.
void GridOf(GgmlType type, const Blocks& b, std::vector<float>* step, std::vector<float>* base) {
  const int granules = b.block / kGridGranule;
  std::vector<float> s(granules), z(granules);
  step->resize(b.n);
  base->resize(b.n);
  for (int64_t k = 0; k < b.n / b.block; ++k) {
    GgmlBlockGrid(type, b.bytes.data() + k * b.bytes_per_block, s.data(), z.data());
    for (int e = 0; e < b.block; ++e) {
      (*step)[k * b.block + e] = s[e / kGridGranule];
      (*base)[k * b.block + e] = z[e / kGridGranule];
    }
  }
}

// Random codes written into ggml's blocks decode, through the type's own
// dequantizer, to exactly the grid's values: the grid reads the scales as
// the dequantizer does, and the codes land where it reads them.
TEST(GgmlBlockGridTest, WrittenCodesDecodeToTheGridValues) {
  for (GgmlType type : kGridTypes) {
    SCOPED_TRACE(GetGgmlTypeTraits(type).name);
    const GgmlCodeRange range = *GgmlGridCodes(type);
    Blocks b = Quantized(type, 7);
    std::vector<float> step, base;
    GridOf(type, b, &step, &base);
    std::mt19937 gen(11);
    std::uniform_int_distribution<int> code(0, range.levels - 1);
    std::vector<uint8_t> codes(b.n);
    for (uint8_t& c : codes) c = static_cast<uint8_t>(code(gen));
    // The extremes of the range too.
    codes[0] = 0;
    codes[1] = static_cast<uint8_t>(range.levels - 1);
    for (int64_t k = 0; k < b.n / b.block; ++k)
      GgmlSetBlockCodes(type, codes.data() + k * b.block, b.bytes.data() + k * b.bytes_per_block);
    std::vector<float> decoded(b.n);
    ASSERT_TRUE(DequantizeRow(type, b.bytes.data(), decoded.data(), b.n).ok());
    int nonzero_steps = 0;
    for (int64_t e = 0; e < b.n; ++e) {
      ASSERT_EQ(decoded[e], GgmlGridValue(step[e], base[e], codes[e], range.offset))
          << "element " << e << " code " << int(codes[e]);
      nonzero_steps += step[e] != 0;
    }
    EXPECT_GT(nonzero_steps, b.n * 9 / 10);
  }
}

// Writing back the codes a block already decodes to leaves every byte as
// ggml's quantizer wrote it: the writer touches the codes and nothing else.
TEST(GgmlBlockGridTest, RewritingABlocksOwnCodesKeepsItsBytes) {
  for (GgmlType type : kGridTypes) {
    SCOPED_TRACE(GetGgmlTypeTraits(type).name);
    const GgmlCodeRange range = *GgmlGridCodes(type);
    const Blocks b = Quantized(type, 3);
    std::vector<float> step, base, decoded(b.n);
    GridOf(type, b, &step, &base);
    ASSERT_TRUE(DequantizeRow(type, b.bytes.data(), decoded.data(), b.n).ok());
    std::vector<uint8_t> codes(b.n);
    for (int64_t e = 0; e < b.n; ++e) {
      ASSERT_NE(step[e], 0.0f) << "element " << e;
      int found = -1;
      for (int c = 0; c < range.levels && found < 0; ++c)
        if (GgmlGridValue(step[e], base[e], c, range.offset) == decoded[e]) found = c;
      ASSERT_GE(found, 0) << "element " << e << " decodes off its grid";
      codes[e] = static_cast<uint8_t>(found);
    }
    std::vector<uint8_t> rewritten = b.bytes;
    for (int64_t k = 0; k < b.n / b.block; ++k)
      GgmlSetBlockCodes(type, codes.data() + k * b.block, rewritten.data() + k * b.bytes_per_block);
    EXPECT_EQ(rewritten, b.bytes);
  }
}

TEST(GgmlBlockGridTest, TypesWithoutAUniformGridHaveNone) {
  EXPECT_FALSE(GgmlGridCodes(GgmlType::kF16).has_value());
  EXPECT_FALSE(GgmlGridCodes(GgmlType::kMXFP4).has_value());
  EXPECT_FALSE(GgmlGridCodes(GgmlType::kIQ4_NL).has_value());
  EXPECT_EQ(GgmlGridCodes(GgmlType::kQ6_K)->levels, 64);
  EXPECT_EQ(GgmlGridCodes(GgmlType::kQ3_K)->offset, -4);
}

}  // namespace
}  // namespace quantd::gguf
