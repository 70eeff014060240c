#include "worker/io/safetensors/safetensors_source.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/io/safetensors/safetensors_writer.h"
#include "worker/io/safetensors/tensor_io.h"

namespace quantd::io {
namespace {

using ::testing::HasSubstr;

const char kStories[] = "models/stories260K/model.safetensors";

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(base ? base : "/tmp") + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

bool BitEqual(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * a.element_size()) == 0;
}

TEST(SafetensorsSourceTest, ReadsStories260K) {
  auto src = SafetensorsSource::Open(kStories);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ((*src)->Names().size(), 47u);  // 5 blocks x 9 + embedding + final norm
  const TensorInfo* info = (*src)->Find("model.embed_tokens.weight");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(info->dtype, "F32");
  EXPECT_EQ(info->nbytes, 512u * 64 * 4);
  EXPECT_EQ(info->file, kStories);
  EXPECT_THAT((*src)->Metadata().at("source"), HasSubstr("stories260K"));

  // Values computed with numpy from the raw file bytes.
  auto emb = (*src)->Load("model.embed_tokens.weight");
  ASSERT_TRUE(emb.ok()) << emb.status();
  EXPECT_FLOAT_EQ(emb->index({0, 0}).item<float>(), -0.29474878311157227f);
  EXPECT_FLOAT_EQ(emb->index({0, 2}).item<float>(), 0.1754225343465805f);
  // A float64 sum of n terms in any order is within gamma_n sum |x|
  // (gamma_n = n u / (1 - n u), u = 2^-53) of the exact sum: so are this
  // one (LibTorch picks its kernel by CPU) and numpy's, hence twice that.
  // 32768 terms: ~5e-8; one wrong element would move the sum by ~0.1.
  const auto sum_tolerance = [](const at::Tensor& x) {
    const double nu = x.numel() * (DBL_EPSILON / 2);
    return 2 * nu / (1 - nu) * x.abs().sum().item<double>();
  };
  const at::Tensor emb64 = emb->to(at::kDouble);
  EXPECT_NEAR(emb64.sum().item<double>(), -752.3677446640068, sum_tolerance(emb64));
  auto down = (*src)->Load("model.layers.4.mlp.down_proj.weight", at::kDouble);
  ASSERT_TRUE(down.ok());
  EXPECT_EQ(down->scalar_type(), at::kDouble);
  EXPECT_EQ(down->sizes(), (at::IntArrayRef{64, 172}));
  EXPECT_NEAR(down->sum().item<double>(), 19.543787761240765, sum_tolerance(*down));
}

TEST(SafetensorsSourceTest, MissingTensorAndFileAreNotFound) {
  auto src = SafetensorsSource::Open(kStories);
  ASSERT_TRUE(src.ok());
  auto t = (*src)->Load("lm_head.weight");
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr("'lm_head.weight'"));
  EXPECT_THAT(t.status().message(), HasSubstr(kStories));
  EXPECT_EQ(SafetensorsSource::Open(TempDir("empty-dir")).status().code(), StatusCode::kNotFound);
}

TEST(SafetensorsSourceTest, RoundTripsEveryWritableDtype) {
  const std::string path = TempDir("rt") + "/model.safetensors";
  at::manual_seed(7);
  const at::Tensor f32 = at::randn({3, 5});
  const at::Tensor f16 = at::randn({4, 2}).to(at::kHalf);
  const at::Tensor bf16 = at::randn({7}).to(at::kBFloat16);
  const at::Tensor i8 = at::randint(-128, 128, {6}, at::kChar);
  const at::Tensor u8 = at::randint(0, 256, {2, 2}, at::kByte);
  const at::Tensor i32 = at::randint(-100000, 100000, {3}, at::kInt);
  const at::Tensor i64 = at::randint(-100000, 100000, {2}, at::kLong);
  // FP8 e4m3: 1.0, 448 (max normal), NaN, 2^-9 (smallest subnormal), -1.5.
  const at::Tensor f8 =
      at::tensor(std::vector<int64_t>{0x38, 0x7E, 0x7F, 0x01, 0xBC}).to(at::kByte);
  // FP8 e5m2: 1.0, 57344 (max normal), +inf, 2^-16 (smallest subnormal).
  const at::Tensor f8b = at::tensor(std::vector<int64_t>{0x3C, 0x7B, 0x7C, 0x01}).to(at::kByte);
  {
    auto w = SafetensorsWriter::Create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(AddTensor(**w, "f32", f32).ok());
    ASSERT_TRUE(AddTensor(**w, "f16", f16).ok());
    ASSERT_TRUE(AddTensor(**w, "bf16", bf16).ok());
    ASSERT_TRUE(AddTensor(**w, "i8", i8).ok());
    ASSERT_TRUE(AddTensor(**w, "u8", u8).ok());
    ASSERT_TRUE(AddTensor(**w, "i32", i32).ok());
    ASSERT_TRUE(AddTensor(**w, "i64", i64).ok());
    ASSERT_TRUE(AddTensor(**w, "f8", f8, SafetensorsDtype::kF8E4M3).ok());
    ASSERT_TRUE(AddTensor(**w, "f8b", f8b, SafetensorsDtype::kF8E5M2).ok());
    // A non-contiguous view is written in logical order.
    ASSERT_TRUE(AddTensor(**w, "t", f32.t()).ok());
    EXPECT_EQ(AddTensor(**w, "bad", f32, SafetensorsDtype::kBF16).code(),
              StatusCode::kInvalidArgument);
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto src = SafetensorsSource::Open(path);
  ASSERT_TRUE(src.ok()) << src.status();
  const std::vector<std::pair<std::string, at::Tensor>> stored = {
      {"f32", f32}, {"f16", f16}, {"bf16", bf16}, {"i8", i8},   {"u8", u8},
      {"i32", i32}, {"i64", i64}, {"f8", f8},     {"f8b", f8b}, {"t", f32.t().contiguous()}};
  for (const auto& [name, expect] : stored) {
    auto t = (*src)->LoadStored(name);
    ASSERT_TRUE(t.ok()) << name << ": " << t.status();
    EXPECT_TRUE(BitEqual(*t, expect)) << name;
  }
  EXPECT_EQ((*src)->Find("f8")->dtype, "F8_E4M3");
  EXPECT_EQ((*src)->Find("bf16")->dtype, "BF16");

  // Conversions on Load.
  auto h = (*src)->Load("f16");
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(BitEqual(*h, f16.to(at::kFloat)));
  auto b = (*src)->Load("bf16", at::kBFloat16);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(BitEqual(*b, bf16));
  auto d = (*src)->Load("f8");
  ASSERT_TRUE(d.ok());
  auto v = d->accessor<float, 1>();
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 448.0f);
  EXPECT_TRUE(std::isnan(v[2]));
  EXPECT_EQ(v[3], std::ldexp(1.0f, -9));
  EXPECT_EQ(v[4], -1.5f);
  auto e = (*src)->Load("f8b");
  ASSERT_TRUE(e.ok());
  auto ev = e->accessor<float, 1>();
  EXPECT_EQ(ev[0], 1.0f);
  EXPECT_EQ(ev[1], 57344.0f);
  EXPECT_EQ(ev[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(ev[3], std::ldexp(1.0f, -16));
  auto raw = (*src)->Load("f8", at::kByte);
  ASSERT_TRUE(raw.ok());
  EXPECT_TRUE(BitEqual(*raw, f8));
}

TEST(SafetensorsSourceTest, ConvertsLargeTensorsThroughStagingChunks) {
  const std::string path = TempDir("big") + "/model.safetensors";
  at::manual_seed(5);
  // Several 4 MB staging chunks each, with a partial last chunk.
  const at::Tensor bf16 = at::randn({3, 1000001}).to(at::kBFloat16);
  const at::Tensor f8 = at::randint(0, 256, {4500001}, at::kByte)
                            .masked_fill(at::randint(0, 256, {4500001}, at::kByte) == 0x7F, 0);
  {
    auto w = SafetensorsWriter::Create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(AddTensor(**w, "bf16", bf16).ok());
    ASSERT_TRUE(AddTensor(**w, "f8", f8, SafetensorsDtype::kF8E5M2).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto src = SafetensorsSource::Open(path);
  ASSERT_TRUE(src.ok());
  auto f = (*src)->Load("bf16");
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(BitEqual(*f, bf16.to(at::kFloat)));
  auto h = (*src)->Load("bf16", at::kHalf);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(BitEqual(*h, bf16.to(at::kHalf)));
  auto d = (*src)->Load("f8");
  ASSERT_TRUE(d.ok());
  const at::Tensor want = DecodeFp8(f8, SafetensorsDtype::kF8E5M2);
  EXPECT_TRUE(at::equal(d->isnan(), want.isnan()));
  EXPECT_TRUE(at::equal(d->nan_to_num(0), want.nan_to_num(0)));
}

TEST(SafetensorsSourceTest, ReadsLazilyAtLoadTime) {
  const std::string path = TempDir("lazy") + "/model.safetensors";
  {
    auto w = SafetensorsWriter::Create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(AddTensor(**w, "x", at::zeros({4})).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto src = SafetensorsSource::Open(path);
  ASSERT_TRUE(src.ok());
  // Overwrite the data in place after opening: Load must see the new bytes,
  // which proves nothing was read or copied at open time.
  auto header = ReadSafetensorsHeader(path);
  ASSERT_TRUE(header.ok());
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(header->data_offset));
    const float ones[4] = {1, 2, 3, 4};
    f.write(reinterpret_cast<const char*>(ones), sizeof(ones));
  }
  auto x = (*src)->Load("x");
  ASSERT_TRUE(x.ok());
  EXPECT_TRUE(at::equal(*x, at::arange(1, 5, at::kFloat)));
}

class ShardedTest : public ::testing::Test {
 protected:
  void WriteShard(const std::string& file, const std::vector<std::string>& names) {
    auto w = SafetensorsWriter::Create(dir_ + "/" + file);
    ASSERT_TRUE(w.ok());
    for (const auto& n : names) {
      ASSERT_TRUE(AddTensor(**w, n, at::full({2, 2}, static_cast<float>(n.size()))).ok());
    }
    ASSERT_TRUE((*w)->Finish().ok());
  }
  std::string dir_;
};

TEST_F(ShardedTest, OpensIndexAndReadsAcrossShards) {
  dir_ = TempDir("sharded");
  WriteShard("model-00001-of-00002.safetensors", {"a", "bb"});
  WriteShard("model-00002-of-00002.safetensors", {"ccc"});
  WriteText(
      dir_ + "/model.safetensors.index.json",
      R"({"metadata":{"total_size":48},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
      R"("bb":"model-00001-of-00002.safetensors","ccc":"model-00002-of-00002.safetensors"}})");
  auto src = SafetensorsSource::Open(dir_);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ((*src)->Names(), (std::vector<std::string>{"a", "bb", "ccc"}));
  EXPECT_EQ((*src)->Files().size(), 2u);
  EXPECT_EQ((*src)->Find("ccc")->file, dir_ + "/model-00002-of-00002.safetensors");
  EXPECT_EQ((*src)->Metadata().at("total_size"), "48");
  auto c = (*src)->Load("ccc");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(at::equal(*c, at::full({2, 2}, 3.0f)));
}

TEST_F(ShardedTest, InconsistentIndexIsDataLossNamingShardAndTensor) {
  dir_ = TempDir("sharded-bad");
  WriteShard("s1.safetensors", {"a"});
  WriteShard("s2.safetensors", {"a", "b"});
  const std::string index = dir_ + "/model.safetensors.index.json";

  WriteText(index, R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors"}})");
  auto missing = SafetensorsSource::Open(dir_);
  EXPECT_EQ(missing.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(missing.status().message(), HasSubstr(dir_ + "/s1.safetensors: tensor 'b'"));

  WriteText(index, R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
  auto dup = SafetensorsSource::Open(dir_);
  EXPECT_EQ(dup.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(dup.status().message(), HasSubstr("tensor 'a' is also stored in"));

  WriteText(index, R"({"weight_map":{"a":"../s1.safetensors"}})");
  auto escape = SafetensorsSource::Open(dir_);
  EXPECT_EQ(escape.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(escape.status().message(), HasSubstr("tensor 'a' maps to '../s1.safetensors'"));

  WriteText(index, R"({"weight_map":{"a":"gone.safetensors"}})");
  auto gone = SafetensorsSource::Open(dir_);
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(gone.status().message(), HasSubstr("gone.safetensors"));

  WriteText(index, R"({"weight_map": 5})");
  EXPECT_EQ(SafetensorsSource::Open(dir_).status().code(), StatusCode::kDataLoss);
  WriteText(index, "not json");
  EXPECT_EQ(SafetensorsSource::Open(dir_).status().code(), StatusCode::kDataLoss);
}

TEST(SafetensorsSourceTest, TruncatedFileIsDataLossNamingFileAndTensor) {
  const std::string path = TempDir("trunc") + "/model.safetensors";
  {
    auto w = SafetensorsWriter::Create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(AddTensor(**w, "first", at::ones({16})).ok());
    ASSERT_TRUE(AddTensor(**w, "second", at::ones({16})).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  ASSERT_EQ(::truncate(path.c_str(), st.st_size - 10), 0);
  auto src = SafetensorsSource::Open(path);
  ASSERT_FALSE(src.ok());
  EXPECT_EQ(src.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(src.status().message(), HasSubstr(path + ": tensor 'second'"));
  EXPECT_THAT(src.status().message(), HasSubstr("truncated"));

  // Cut inside the header.
  ASSERT_EQ(::truncate(path.c_str(), 20), 0);
  auto cut = SafetensorsSource::Open(path);
  EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(cut.status().message(), HasSubstr(path));
}

TEST(SafetensorsSourceTest, FileShrunkAfterOpenIsDataLossOnLoad) {
  const std::string path = TempDir("shrink") + "/model.safetensors";
  {
    auto w = SafetensorsWriter::Create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(AddTensor(**w, "w", at::ones({1024})).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto src = SafetensorsSource::Open(path);
  ASSERT_TRUE(src.ok());
  ASSERT_EQ(::truncate(path.c_str(), 200), 0);
  auto w = (*src)->Load("w");
  EXPECT_EQ(w.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(w.status().message(), HasSubstr("tensor 'w'"));
  EXPECT_THAT(w.status().message(), HasSubstr(path));
}

}  // namespace
}  // namespace quantd::io
