#include "worker/io/gguf/ggml_types.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace quantd::gguf {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

void PutFp16(std::vector<uint8_t>* b, size_t at, uint16_t h) {
  (*b)[at] = h & 0xFF;
  (*b)[at + 1] = h >> 8;
}

TEST(GgmlTypesTest, TraitsMatchGgml) {
  EXPECT_EQ(GetGgmlTypeTraits(GgmlType::kQ4_0).type_size, 18u);
  EXPECT_EQ(GetGgmlTypeTraits(GgmlType::kQ4_1).type_size, 20u);
  EXPECT_EQ(GetGgmlTypeTraits(GgmlType::kQ8_0).type_size, 34u);
  EXPECT_EQ(GetGgmlTypeTraits(GgmlType::kQ4_K).type_size, 144u);
  EXPECT_EQ(GetGgmlTypeTraits(GgmlType::kQ6_K).type_size, 210u);
  EXPECT_EQ(GetGgmlTypeTraits(GgmlType::kQ6_K).block_size, 256);
  EXPECT_EQ(GetGgmlTypeTraits(30)->name, std::string("BF16"));
  EXPECT_FALSE(GetGgmlTypeTraits(31).has_value());  // removed Q4_0_4_4
  EXPECT_FALSE(GetGgmlTypeTraits(36).has_value());  // removed IQ4_NL_4_4
  // ggml.h as of today: MXFP4 39 (block_mxfp4 {e; qs[16]}), NVFP4 40
  // ({d[4]; qs[32]} per 64), Q1_0 41 ({fp16 d; qs[16]} per 128), Q2_0 42
  // ({fp16 d; qs[16]} per 64).
  EXPECT_EQ(GetGgmlTypeTraits(39)->name, std::string("MXFP4"));
  EXPECT_EQ(GetGgmlTypeTraits(GgmlType::kMXFP4).type_size, 17u);
  EXPECT_EQ(GetGgmlTypeTraits(GgmlType::kNVFP4).type_size, 36u);
  EXPECT_EQ(GetGgmlTypeTraits(GgmlType::kQ1_0).block_size, 128);
  EXPECT_EQ(GetGgmlTypeTraits(GgmlType::kQ2_0).type_size, 18u);
  EXPECT_FALSE(GetGgmlTypeTraits(43).has_value());
  EXPECT_FALSE(GetGgmlTypeTraits(1000).has_value());
  EXPECT_EQ(GgmlTypeFromName("Q4_K"), GgmlType::kQ4_K);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ4_K, 512), 288u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kF16, 3), 6u);
  EXPECT_EQ(GgmlRowBytes(GgmlType::kQ8_0, 33).status().code(), StatusCode::kInvalidArgument);
}

TEST(GgmlTypesTest, Fp16KnownValues) {
  EXPECT_EQ(Fp16ToFp32(0x3C00), 1.0f);
  EXPECT_EQ(Fp16ToFp32(0xC000), -2.0f);
  EXPECT_EQ(Fp16ToFp32(0x7BFF), 65504.0f);
  EXPECT_EQ(Fp16ToFp32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(Fp16ToFp32(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(Fp16ToFp32(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(Bits(Fp16ToFp32(0x8000)), 0x80000000u);
  EXPECT_TRUE(std::isinf(Fp16ToFp32(0x7C00)));
  EXPECT_TRUE(std::isnan(Fp16ToFp32(0x7E00)));
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7C00);  // ties to even: rounds up to inf
  EXPECT_EQ(Fp32ToFp16(65519.0f), 0x7BFF);
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -25)), 0x0000);  // tie with 0: even
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(Fp32ToFp16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp ties to even 2
}

// Every half converts like PyTorch's (IEEE) conversion and back unchanged.
TEST(GgmlTypesTest, Fp16MatchesTorchForAllHalvesAndRandomFloats) {
  at::Tensor all = at::arange(0, 65536, at::kInt).to(at::kShort).view(at::kHalf);
  at::Tensor as_float = all.to(at::kFloat);
  const auto* h = reinterpret_cast<const uint16_t*>(all.data_ptr());
  const float* f = as_float.data_ptr<float>();
  for (int i = 0; i < 65536; ++i) {
    const float mine = Fp16ToFp32(h[i]);
    if (std::isnan(f[i])) {
      EXPECT_TRUE(std::isnan(mine));
      continue;
    }
    ASSERT_EQ(Bits(mine), Bits(f[i])) << "half 0x" << std::hex << h[i];
    ASSERT_EQ(Fp32ToFp16(mine), h[i]);
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  std::vector<float> xs;
  for (int i = 0; i < 200000; ++i) {
    // Random bit patterns in the half range (exponents around [-30, 17]).
    uint32_t u = (any(rng) & 0x81FFFFFFu) | (static_cast<uint32_t>(97 + any(rng) % 48) << 23);
    float x;
    std::memcpy(&x, &u, 4);
    xs.push_back(x);
  }
  at::Tensor ref =
      at::from_blob(xs.data(), {static_cast<int64_t>(xs.size())}, at::kFloat).to(at::kHalf);
  const auto* rh = reinterpret_cast<const uint16_t*>(ref.data_ptr());
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(Fp32ToFp16(xs[i]), rh[i]) << xs[i];
  }
}

TEST(GgmlTypesTest, Bf16MatchesTorch) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> any;
  std::vector<float> xs = {0.0f, -0.0f, 1.0f, 3.14159f, 1e-40f, 3.0e38f};
  for (int i = 0; i < 100000; ++i) {
    uint32_t u = any(rng);
    if ((u & 0x7F800000u) == 0x7F800000u) u &= 0xBFFFFFFFu;  // keep finite
    float x;
    std::memcpy(&x, &u, 4);
    xs.push_back(x);
  }
  at::Tensor ref =
      at::from_blob(xs.data(), {static_cast<int64_t>(xs.size())}, at::kFloat).to(at::kBFloat16);
  const auto* rb = reinterpret_cast<const uint16_t*>(ref.data_ptr());
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(Fp32ToBf16(xs[i]), rb[i]) << xs[i];
    ASSERT_EQ(Bits(Bf16ToFp32(rb[i])), static_cast<uint32_t>(rb[i]) << 16);
  }
}

TEST(GgmlTypesTest, Q4_0KnownBlock) {
  std::vector<uint8_t> b(18);
  PutFp16(&b, 0, 0x3800);  // d = 0.5
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> y(32);
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ4_0, b.data(), y.data(), 32).ok());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 0.5f) << j;
  }
}

TEST(GgmlTypesTest, Q4_1KnownBlock) {
  std::vector<uint8_t> b(20);
  PutFp16(&b, 0, 0x3400);  // d = 0.25
  PutFp16(&b, 2, 0xBC00);  // m = -1
  for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(j | (((j * 7) % 16) << 4));
  std::vector<float> y(32);
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ4_1, b.data(), y.data(), 32).ok());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.25f - 1.0f);
    EXPECT_EQ(y[j + 16], ((j * 7) % 16) * 0.25f - 1.0f);
  }
}

TEST(GgmlTypesTest, Q8_0KnownBlock) {
  std::vector<uint8_t> b(34 * 2);
  PutFp16(&b, 0, 0x3000);   // d = 0.125
  PutFp16(&b, 34, 0xC400);  // d = -4
  for (int j = 0; j < 32; ++j) {
    b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
    b[36 + j] = static_cast<uint8_t>(static_cast<int8_t>(127 - j));
  }
  std::vector<float> y(64);
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ8_0, b.data(), y.data(), 64).ok());
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y[j], (j * 8 - 128) * 0.125f);
    EXPECT_EQ(y[32 + j], (127 - j) * -4.0f);
  }
}

// Independent per-element formulation of ggml's Q4_K layout: element e lies
// in 64-element chunk e/64; its sub-block (e/32) has a 6-bit scale and min
// packed in the 12 scale bytes.
std::vector<double> RefQ4K(const std::vector<uint8_t>& b) {
  const double d = Fp16ToFp32(b[0] | (b[1] << 8));
  const double dmin = Fp16ToFp32(b[2] | (b[3] << 8));
  const uint8_t* s = &b[4];
  int sc[8], mn[8];
  for (int k = 0; k < 4; ++k) {
    sc[k] = s[k] & 63;
    mn[k] = s[k + 4] & 63;
    sc[k + 4] = (s[k + 8] & 15) | ((s[k] >> 6) << 4);
    mn[k + 4] = (s[k + 8] >> 4) | ((s[k + 4] >> 6) << 4);
  }
  std::vector<double> y(256);
  for (int e = 0; e < 256; ++e) {
    const int chunk = e / 64, within = e % 64, sub = e / 32, l = within % 32;
    const uint8_t byte = b[16 + chunk * 32 + l];
    const int q = within < 32 ? (byte & 15) : (byte >> 4);
    y[e] = d * sc[sub] * q - dmin * mn[sub];
  }
  return y;
}

std::vector<double> RefQ6K(const std::vector<uint8_t>& b) {
  const uint8_t* ql = &b[0];
  const uint8_t* qh = &b[128];
  const auto* scales = reinterpret_cast<const int8_t*>(&b[192]);
  const double d = Fp16ToFp32(b[208] | (b[209] << 8));
  std::vector<double> y(256);
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, r = e % 128, quad = r / 32, l = r % 32;
    const uint8_t low = ql[half * 64 + l + (quad & 1) * 32];
    const int nib = quad >= 2 ? (low >> 4) : (low & 15);
    const int hi = (qh[half * 32 + l] >> (2 * quad)) & 3;
    const int q = (nib | (hi << 4)) - 32;
    y[e] = d * scales[half * 8 + quad * 2 + l / 16] * q;
  }
  return y;
}

// Random fp16 scales keep every product exact in float, so ggml's float
// arithmetic rounds once, like casting the exact float64 value.
uint16_t RandomFp16(std::mt19937& rng, int min_exp, int max_exp) {
  std::uniform_int_distribution<int> e(min_exp + 15, max_exp + 15), m(0, 1023), sign(0, 1);
  return static_cast<uint16_t>((sign(rng) << 15) | (e(rng) << 10) | m(rng));
}

TEST(GgmlTypesTest, Q4_KMatchesIndependentReference) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint8_t> b(144);
    for (auto& x : b) x = static_cast<uint8_t>(byte(rng));
    PutFp16(&b, 0, RandomFp16(rng, -12, 2));
    PutFp16(&b, 2, RandomFp16(rng, -12, 2));
    std::vector<float> y(256);
    ASSERT_TRUE(DequantizeRow(GgmlType::kQ4_K, b.data(), y.data(), 256).ok());
    const auto ref = RefQ4K(b);
    for (int e = 0; e < 256; ++e) ASSERT_EQ(y[e], static_cast<float>(ref[e])) << trial << " " << e;
  }
}

TEST(GgmlTypesTest, Q6_KMatchesIndependentReference) {
  std::mt19937 rng(13);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint8_t> b(210 * 2);
    for (auto& x : b) x = static_cast<uint8_t>(byte(rng));
    PutFp16(&b, 208, RandomFp16(rng, -12, 2));
    PutFp16(&b, 418, RandomFp16(rng, -12, 2));
    std::vector<float> y(512);
    ASSERT_TRUE(DequantizeRow(GgmlType::kQ6_K, b.data(), y.data(), 512).ok());
    for (int blk = 0; blk < 2; ++blk) {
      const auto ref =
          RefQ6K(std::vector<uint8_t>(b.begin() + blk * 210, b.begin() + blk * 210 + 210));
      for (int e = 0; e < 256; ++e) {
        ASSERT_EQ(y[blk * 256 + e], static_cast<float>(ref[e])) << trial << " " << e;
      }
    }
  }
}

// A hand-packed Q4_K block with known scales: sub-block k has scale k+1
// (k < 4) or 40+k (k >= 4, using the high bits) and min 2k.
TEST(GgmlTypesTest, Q4_KKnownScalesAndMins) {
  std::vector<uint8_t> b(144, 0);
  PutFp16(&b, 0, 0x3C00);  // d = 1
  PutFp16(&b, 2, 0x3800);  // dmin = 0.5
  const int sc[8] = {1, 2, 3, 4, 44, 45, 46, 47};
  const int mn[8] = {0, 2, 4, 6, 8, 10, 12, 14};
  for (int k = 0; k < 4; ++k) {
    b[4 + k] = static_cast<uint8_t>(sc[k] | ((sc[k + 4] >> 4) << 6));
    b[8 + k] = static_cast<uint8_t>(mn[k] | ((mn[k + 4] >> 4) << 6));
    b[12 + k] = static_cast<uint8_t>((sc[k + 4] & 15) | ((mn[k + 4] & 15) << 4));
  }
  for (int l = 0; l < 128; ++l) b[16 + l] = static_cast<uint8_t>((l % 16) | (((l + 3) % 16) << 4));
  std::vector<float> y(256);
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ4_K, b.data(), y.data(), 256).ok());
  EXPECT_EQ(y[0], 1 * 0 - 0.0f);
  EXPECT_EQ(y[5], 1 * 5 - 0.0f);
  EXPECT_EQ(y[32], 2 * 3 - 1.0f);          // sub-block 1: high nibble of byte 0 = 3
  EXPECT_EQ(y[64 + 7], 3 * 7 - 2.0f);      // sub-block 2: low nibble of byte 32+7
  EXPECT_EQ(y[192 + 40], 47 * 11 - 7.0f);  // sub-block 7: high nibble of byte 96+8 = 11
}

// MXFP4 against the OCP MX definition computed in double: element code c
// (sign bit 3, e2m1 in bits 0..2) times 2^(e - 127), for every code and
// exponents from the two subnormal ones to large.
TEST(GgmlTypesTest, Mxfp4MatchesTheMxDefinition) {
  const double e2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int e : {0, 1, 2, 100, 127, 130, 254}) {
    SCOPED_TRACE(e);
    uint8_t codes[32];
    for (int j = 0; j < 32; ++j) codes[j] = static_cast<uint8_t>((j * 7 + e) % 16);
    uint8_t block[17];
    WriteBlockMXFP4(codes, static_cast<uint8_t>(e), block);
    EXPECT_EQ(block[0], e);
    EXPECT_EQ(block[1], codes[0] | (codes[16] << 4));
    float out[32];
    ASSERT_TRUE(DequantizeRow(GgmlType::kMXFP4, block, out, 32).ok());
    for (int j = 0; j < 32; ++j) {
      const double want =
          (codes[j] & 8 ? -1.0 : 1.0) * e2m1[codes[j] & 7] * std::ldexp(1.0, e - 127);
      // Rounded to float as ggml's product is (past 2^128 that is inf).
      EXPECT_EQ(out[j], static_cast<float>(want)) << j;
    }
  }
}

// kquants_golden.c's 512 floats: xorshift32 in [-1, 1), every 97th scaled
// by 8.
std::vector<float> GoldenInput() {
  std::vector<float> x(512);
  uint32_t s = 12345u;
  for (size_t i = 0; i < x.size(); ++i) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    float v = static_cast<float>(static_cast<double>(s) / 4294967296.0 * 2.0 - 1.0);
    if (i % 97 == 0) v *= 8.0f;
    x[i] = v;
  }
  return x;
}

// testdata/kquants_golden.txt: name -> the blocks ggml wrote, in hex.
std::map<std::string, std::string> GoldenBlocks() {
  std::ifstream in("worker/io/gguf/testdata/kquants_golden.txt");
  std::map<std::string, std::string> golden;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.find(' ');
    golden[line.substr(0, space)] = line.substr(space + 1);
  }
  return golden;
}

std::string Hex(const std::vector<uint8_t>& bytes) {
  std::string out;
  char buf[3];
  for (uint8_t b : bytes) {
    std::snprintf(buf, sizeof(buf), "%02x", b);
    out += buf;
  }
  return out;
}

// The K-quant quantizers against blocks ggml's own reference quantizers
// wrote for the same floats (testdata/kquants_golden.txt: provenance in its
// header, generator in kquants_golden.c): byte for byte. Dequantized, each
// type's error is what its bit width allows.
TEST(GgmlTypesTest, KQuantsAreByteIdenticalToGgmlsReferenceQuantizers) {
  const std::vector<float> x = GoldenInput();
  const std::map<std::string, std::string> golden = GoldenBlocks();
  ASSERT_FALSE(golden.empty());
  const std::vector<std::pair<GgmlType, double>> types = {
      {GgmlType::kQ2_K, 0.5},  {GgmlType::kQ3_K, 0.25}, {GgmlType::kQ4_K, 0.12},
      {GgmlType::kQ5_K, 0.06}, {GgmlType::kQ6_K, 0.03}};
  for (const auto& [type, max_rel_rmse] : types) {
    const std::string name = GetGgmlTypeTraits(type).name;
    SCOPED_TRACE(name);
    std::vector<uint8_t> bytes(*GgmlRowBytes(type, 512));
    ASSERT_TRUE(QuantizeRow(type, x.data(), bytes.data(), 512).ok());
    const std::string key = "q" + name.substr(1);  // ggml's spelling: q4_K
    ASSERT_EQ(golden.count(key), 1u) << key;
    EXPECT_EQ(Hex(bytes), golden.at(key));
    std::vector<float> back(512);
    ASSERT_TRUE(DequantizeRow(type, bytes.data(), back.data(), 512).ok());
    if (golden.count("dq_" + key)) {  // ggml's own dequantization of the blocks
      std::vector<uint8_t> floats(512 * 4);
      std::memcpy(floats.data(), back.data(), floats.size());
      EXPECT_EQ(Hex(floats), golden.at("dq_" + key));
    }
    double err = 0, sig = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      err += (back[i] - x[i]) * static_cast<double>(back[i] - x[i]);
      sig += x[i] * static_cast<double>(x[i]);
    }
    EXPECT_LT(std::sqrt(err / sig), max_rel_rmse);
  }
  EXPECT_EQ(QuantizeRow(GgmlType::kQ4_K, x.data(), nullptr, 255).code(),
            StatusCode::kInvalidArgument);
}

// The 5-bit reference quantizers and every importance-weighted one (what
// llama.cpp runs with an imatrix) against the blocks ggml wrote for the same
// floats and importance (kquants_golden.txt): byte for byte.
TEST(GgmlTypesTest, WeightedQuantizersAreByteIdenticalToGgmls) {
  const std::vector<float> x = GoldenInput();
  std::vector<float> importance(256);
  for (int j = 0; j < 256; ++j) importance[j] = 0.25f + static_cast<float>(j * 37 % 17) / 8.0f;
  const std::map<std::string, std::string> golden = GoldenBlocks();
  ASSERT_FALSE(golden.empty());
  for (GgmlType type : {GgmlType::kQ5_0, GgmlType::kQ5_1}) {
    std::vector<uint8_t> bytes(*GgmlRowBytes(type, 512));
    ASSERT_TRUE(QuantizeRow(type, x.data(), bytes.data(), 512).ok());
    std::string key = GetGgmlTypeTraits(type).name;
    key[0] = 'q';
    EXPECT_EQ(Hex(bytes), golden.at(key)) << key;
  }
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                        GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,
                        GgmlType::kQ6_K}) {
    std::vector<uint8_t> bytes(*GgmlRowBytes(type, 512));
    ASSERT_TRUE(QuantizeRows(type, x.data(), bytes.data(), 2, 256, importance.data()).ok());
    std::string key = std::string("w_") + GetGgmlTypeTraits(type).name;
    key[2] = 'q';
    EXPECT_EQ(Hex(bytes), golden.at(key)) << key;
    // The weights change the blocks (not merely pass through).
    std::vector<uint8_t> plain(bytes.size());
    ASSERT_TRUE(QuantizeRow(type, x.data(), plain.data(), 512).ok());
    EXPECT_NE(plain, bytes) << key;
  }
  // Types ggml quantizes without importance ignore it; null importance is
  // QuantizeRow.
  std::vector<uint8_t> a(*GgmlRowBytes(GgmlType::kQ8_0, 512)), b(a.size());
  ASSERT_TRUE(QuantizeRows(GgmlType::kQ8_0, x.data(), a.data(), 2, 256, importance.data()).ok());
  ASSERT_TRUE(QuantizeRow(GgmlType::kQ8_0, x.data(), b.data(), 512).ok());
  EXPECT_EQ(a, b);
  ASSERT_TRUE(QuantizeRows(GgmlType::kQ4_K, x.data(), a.data(), 2, 256, nullptr).ok());
  EXPECT_EQ(QuantizeRows(GgmlType::kQ4_K, x.data(), a.data(), 2, 255, importance.data()).code(),
            StatusCode::kInvalidArgument);
}

TEST(GgmlTypesTest, UnsupportedTypesAreRefusedByName) {
  std::vector<uint8_t> b(84);
  std::vector<float> y(256);
  Status s = DequantizeRow(GgmlType::kIQ2_XXS, b.data(), y.data(), 256);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("IQ2_XXS"), std::string::npos);
  s = QuantizeRow(GgmlType::kIQ2_XXS, y.data(), b.data(), 256);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("IQ2_XXS"), std::string::npos);
  EXPECT_EQ(DequantizeRow(GgmlType::kQ8_0, b.data(), y.data(), 31).code(),
            StatusCode::kInvalidArgument);
}

// Q5_0 and Q5_1 keep every code's fifth bit: a block holding each of the 32
// codes once comes back exactly, and the bytes are where ggml puts them.
TEST(GgmlTypesTest, FiveBitBlocksKeepAllThirtyTwoCodes) {
  std::vector<float> x(32), y(32);
  // Q5_0: element j is (j - 16) / 8; the largest magnitude is -2 (j = 0),
  // so d = -2 / -16 = 0.125 and element j gets code j.
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16) / 8.0f;
  std::vector<uint8_t> q(*GgmlRowBytes(GgmlType::kQ5_0, 32));
  ASSERT_EQ(q.size(), 22u);
  ASSERT_TRUE(QuantizeRow(GgmlType::kQ5_0, x.data(), q.data(), 32).ok());
  EXPECT_EQ(Fp16ToFp32(static_cast<uint16_t>(q[0] | q[1] << 8)), 0.125f);
  // qh: codes 16..31 have the fifth bit, i.e. bits 16..31 of the word.
  EXPECT_EQ(q[2], 0x00);
  EXPECT_EQ(q[3], 0x00);
  EXPECT_EQ(q[4], 0xFF);
  EXPECT_EQ(q[5], 0xFF);
  EXPECT_EQ(q[6], 0x00);       // elements 0 and 16: low nibbles 0 and 0
  EXPECT_EQ(q[6 + 15], 0xFF);  // elements 15 and 31: low nibbles 15 and 15
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ5_0, q.data(), y.data(), 32).ok());
  EXPECT_EQ(x, y);

  // Q5_1: min -1, max 2.875 -> d = 0.125, m = -1; element j gets code j.
  for (int j = 0; j < 32; ++j) x[j] = -1.0f + static_cast<float>(j) / 8.0f;
  q.assign(*GgmlRowBytes(GgmlType::kQ5_1, 32), 0);
  ASSERT_EQ(q.size(), 24u);
  ASSERT_TRUE(QuantizeRow(GgmlType::kQ5_1, x.data(), q.data(), 32).ok());
  EXPECT_EQ(Fp16ToFp32(static_cast<uint16_t>(q[0] | q[1] << 8)), 0.125f);
  EXPECT_EQ(Fp16ToFp32(static_cast<uint16_t>(q[2] | q[3] << 8)), -1.0f);
  EXPECT_EQ(q[4] | q[5] << 8 | q[6] << 16 | static_cast<uint32_t>(q[7]) << 24, 0xFFFF0000u);
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ5_1, q.data(), y.data(), 32).ok());
  EXPECT_EQ(x, y);
}

// Values on a block's grid come back exactly; off-grid values land on the
// nearest grid point as ggml's reference quantizers define it.
TEST(GgmlTypesTest, ReferenceQuantizersRoundTripTheirGrids) {
  std::vector<float> x(64), y(64);
  // Q4_0: block 0 holds -8..7 (x 0.25) twice; the element of largest
  // magnitude is -2, so d = 0.25 and every value is a code.
  for (int j = 0; j < 32; ++j) x[j] = 0.25f * static_cast<float>((j % 16) - 8);
  for (int j = 0; j < 32; ++j) x[32 + j] = 0.0f;  // d = 0: all codes 8
  std::vector<uint8_t> q(*GgmlRowBytes(GgmlType::kQ4_0, 64));
  ASSERT_TRUE(QuantizeRow(GgmlType::kQ4_0, x.data(), q.data(), 64).ok());
  EXPECT_EQ(Fp16ToFp32(static_cast<uint16_t>(q[0] | q[1] << 8)), 0.25f);
  EXPECT_EQ(q[2], 0x00);       // elements 0 (-2 -> nibble 0) and 16 (-2 -> nibble 0)
  EXPECT_EQ(q[2 + 15], 0xFF);  // elements 15 and 31: 1.75 -> nibble 15
  EXPECT_EQ(q[18 + 2], 0x88);
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ4_0, q.data(), y.data(), 64).ok());
  EXPECT_EQ(x, y);

  // Q4_1: min -1, max 2 -> d = 0.2, m = -1 (both rounded to fp16 on store).
  for (int j = 0; j < 32; ++j) x[j] = -1.0f + 3.0f * static_cast<float>(j % 16) / 15.0f;
  for (int j = 0; j < 32; ++j) x[32 + j] = 0.5f + 0.0625f * static_cast<float>(j % 16);
  q.assign(*GgmlRowBytes(GgmlType::kQ4_1, 64), 0);
  ASSERT_TRUE(QuantizeRow(GgmlType::kQ4_1, x.data(), q.data(), 64).ok());
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ4_1, q.data(), y.data(), 64).ok());
  for (int j = 0; j < 64; ++j) {
    const int nibble = (q[(j / 32) * 20 + 4 + (j % 32) % 16] >> ((j % 32) >= 16 ? 4 : 0)) & 0xF;
    EXPECT_EQ(nibble, j % 16) << j;
  }
  for (int j = 32; j < 64; ++j) EXPECT_EQ(y[j], x[j]) << j;         // 1/16 steps are exact in fp16
  for (int j = 0; j < 32; ++j) EXPECT_NEAR(y[j], x[j], 2e-3) << j;  // 0.2 is not

  // Q8_0: d = amax / 127, q = round half away from zero.
  for (int j = 0; j < 64; ++j) x[j] = static_cast<float>(j - 32) * 0.5f;  // block 0 amax 16
  q.assign(*GgmlRowBytes(GgmlType::kQ8_0, 64), 0);
  ASSERT_TRUE(QuantizeRow(GgmlType::kQ8_0, x.data(), q.data(), 64).ok());
  const float d0 = 16.0f / 127.0f;
  EXPECT_EQ(Fp16ToFp32(static_cast<uint16_t>(q[0] | q[1] << 8)), Fp16ToFp32(Fp32ToFp16(d0)));
  for (int j = 0; j < 32; ++j) {
    const float id = 1.0f / d0;
    EXPECT_EQ(static_cast<int8_t>(q[2 + j]), static_cast<int>(std::roundf(x[j] * id))) << j;
  }
  EXPECT_EQ(static_cast<int8_t>(q[2 + 0]), -127);
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ8_0, q.data(), y.data(), 64).ok());
  for (int j = 0; j < 64; ++j) EXPECT_NEAR(y[j], x[j], 0.5 * d0 + 1e-3) << j;
  EXPECT_EQ(QuantizeRow(GgmlType::kQ8_0, x.data(), q.data(), 48).code(),
            StatusCode::kInvalidArgument);
}

TEST(GgmlTypesTest, BlockWritersStoreGivenCodes) {
  int8_t codes[32];
  uint8_t nibbles[32];
  for (int j = 0; j < 32; ++j) {
    codes[j] = static_cast<int8_t>(j * 8 - 128);
    nibbles[j] = static_cast<uint8_t>(j % 16);
  }
  uint8_t b8[34], b40[18], b41[20];
  WriteBlockQ8_0(codes, 0.5f, b8);
  WriteBlockQ4_0(nibbles, 0.25f, b40);
  WriteBlockQ4_1(nibbles, 0.125f, -1.0f, b41);
  float y[32];
  DequantizeRowQ8_0(b8, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], codes[j] * 0.5f);
  DequantizeRowQ4_0(b40, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (nibbles[j] - 8) * 0.25f);
  DequantizeRowQ4_1(b41, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], nibbles[j] * 0.125f - 1.0f);
  EXPECT_EQ(b40[2], 0x00);  // element 0 (low nibble) and 16 (high nibble)
  EXPECT_EQ(b40[3], 0x11);
}

}  // namespace
}  // namespace quantd::gguf
