#include "worker/io/gguf/gguf_file.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quantd::gguf {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Serializes GGUF bytes by hand, independently of the writer, so the parser
// is tested against the format as specified.
class Bytes {
 public:
  template <typename T>
  Bytes& Pod(T v) {
    const char* p = reinterpret_cast<const char*>(&v);
    s_.append(p, sizeof(T));
    return *this;
  }
  Bytes& Str(const std::string& v) {
    Pod<uint64_t>(v.size());
    s_ += v;
    return *this;
  }
  Bytes& Kv(const std::string& key, uint32_t type) {
    Str(key);
    return Pod<uint32_t>(type);
  }
  Bytes& PadTo(size_t alignment) {
    while (s_.size() % alignment) s_.push_back('\0');
    return *this;
  }
  Bytes& Raw(const std::string& v) {
    s_ += v;
    return *this;
  }
  const std::string& str() const { return s_; }
  size_t size() const { return s_.size(); }

 private:
  std::string s_;
};

// A small v3 file with every metadata type, nested arrays, custom alignment
// and two tensors (F32 [3,2] and Q8_0 [32]).
std::string EveryTypeFile(uint32_t version = 3, uint32_t alignment = 64) {
  Bytes b;
  b.Pod<uint32_t>(0x46554747).Pod<uint32_t>(version).Pod<uint64_t>(2).Pod<uint64_t>(15);
  b.Kv("u8", 0).Pod<uint8_t>(200);
  b.Kv("i8", 1).Pod<int8_t>(-100);
  b.Kv("u16", 2).Pod<uint16_t>(60000);
  b.Kv("i16", 3).Pod<int16_t>(-30000);
  b.Kv("u32", 4).Pod<uint32_t>(4000000000u);
  b.Kv("i32", 5).Pod<int32_t>(-2000000000);
  b.Kv("f32", 6).Pod<float>(0.25f);
  b.Kv("bool", 7).Pod<uint8_t>(1);
  b.Kv("str", 8).Str("h\xC3\xA9llo");
  b.Kv("u64", 10).Pod<uint64_t>(1ull << 40);
  b.Kv("i64", 11).Pod<int64_t>(-(1ll << 40));
  b.Kv("f64", 12).Pod<double>(1e-300);
  b.Kv("general.alignment", 4).Pod<uint32_t>(alignment);
  b.Kv("strs", 9).Pod<uint32_t>(8).Pod<uint64_t>(3).Str("a").Str("").Str("c c");
  // An array of two arrays: [ [1.5, -2] (f32), [7] (i32) ].
  b.Kv("nested", 9).Pod<uint32_t>(9).Pod<uint64_t>(2);
  b.Pod<uint32_t>(6).Pod<uint64_t>(2).Pod<float>(1.5f).Pod<float>(-2.0f);
  b.Pod<uint32_t>(5).Pod<uint64_t>(1).Pod<int32_t>(7);
  // Tensor infos.
  b.Str("w").Pod<uint32_t>(2).Pod<uint64_t>(3).Pod<uint64_t>(2).Pod<uint32_t>(0).Pod<uint64_t>(0);
  b.Str("q").Pod<uint32_t>(1).Pod<uint64_t>(32).Pod<uint32_t>(8).Pod<uint64_t>(alignment);
  b.PadTo(alignment);
  for (int i = 0; i < 6; ++i) b.Pod<float>(i + 0.5f);
  b.PadTo(alignment);
  b.Pod<uint16_t>(0x3C00);  // Q8_0 d = 1
  for (int i = 0; i < 32; ++i) b.Pod<int8_t>(static_cast<int8_t>(i - 16));
  return b.str();
}

TEST(GgufFileTest, ParsesEveryMetadataType) {
  const std::string bytes = EveryTypeFile();
  auto src = MemoryByteSource(bytes, "every.gguf");
  auto f = ParseGguf(*src);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->version, 3u);
  EXPECT_EQ(f->alignment, 64u);
  EXPECT_EQ(f->metadata.size(), 15u);
  EXPECT_EQ(*f->GetInt("u8"), 200);
  EXPECT_EQ(*f->GetInt("i8"), -100);
  EXPECT_EQ(*f->GetInt("u16"), 60000);
  EXPECT_EQ(*f->GetInt("i16"), -30000);
  EXPECT_EQ(*f->GetInt("u32"), 4000000000ll);
  EXPECT_EQ(*f->GetInt("i32"), -2000000000);
  EXPECT_EQ(*f->GetFloat("f32"), 0.25);
  EXPECT_EQ(*f->GetBool("bool"), true);
  EXPECT_EQ(*f->GetString("str"), "h\xC3\xA9llo");
  EXPECT_EQ(*f->GetInt("u64"), 1ll << 40);
  EXPECT_EQ(*f->GetInt("i64"), -(1ll << 40));
  EXPECT_EQ(*f->GetFloat("f64"), 1e-300);
  EXPECT_THAT(*f->GetStringArray("strs"), ElementsAre("a", "", "c c"));
  const GgufValue* nested = f->Find("nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->array.size(), 2u);
  EXPECT_THAT(nested->array[0].af, ElementsAre(1.5, -2.0));
  EXPECT_THAT(nested->array[1].ai, ElementsAre(7));
  EXPECT_EQ(nested->ToText(), "[[1.5,-2.0],[7]]");
  EXPECT_EQ(f->Find("strs")->ToText(2), "[3 string values]");
  EXPECT_EQ(f->Find("f32")->ToText(), "0.25");
  EXPECT_EQ(f->Find("bool")->ToText(), "true");

  // Typed access errors name the key and the types.
  auto wrong = f->GetString("u8");
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(), HasSubstr("u8 is uint8, expected string"));
  EXPECT_EQ(f->GetInt("missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(*f->GetIntOr("missing", 5), 5);
  EXPECT_EQ(f->GetIntOr("str", 5).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(f->GetIntArray("strs").ok());
}

TEST(GgufFileTest, TensorDirectoryAndData) {
  const std::string bytes = EveryTypeFile();
  auto src = MemoryByteSource(bytes, "every.gguf");
  auto f = ParseGguf(*src);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->tensors.size(), 2u);
  const GgufTensorInfo& w = f->tensors[0];
  EXPECT_EQ(w.name, "w");
  EXPECT_THAT(w.ne, ElementsAre(3, 2));
  EXPECT_THAT(w.torch_shape(), ElementsAre(2, 3));
  EXPECT_EQ(w.nbytes, 24u);
  EXPECT_EQ(f->data_offset % 64, 0u);
  auto wf = ReadGgufTensorAsFloat(*f, *src, w);
  ASSERT_TRUE(wf.ok()) << wf.status();
  EXPECT_THAT(*wf, ElementsAre(0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f));
  const GgufTensorInfo* q = f->FindTensor("q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, GgmlType::kQ8_0);
  EXPECT_EQ(q->nbytes, 34u);
  auto qf = ReadGgufTensorAsFloat(*f, *src, *q);
  ASSERT_TRUE(qf.ok()) << qf.status();
  EXPECT_EQ((*qf)[0], -16.0f);
  EXPECT_EQ((*qf)[31], 15.0f);
}

TEST(GgufFileTest, Version2ParsesAlike) {
  const std::string bytes = EveryTypeFile(2, 32);
  auto f = ParseGguf(*MemoryByteSource(bytes));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->version, 2u);
  EXPECT_EQ(f->alignment, 32u);
}

// Every proper prefix of a valid file is an error (never a crash).
TEST(GgufFileTest, EveryTruncationIsDataLoss) {
  const std::string bytes = EveryTypeFile();
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto f = ParseGguf(*MemoryByteSource(std::string_view(bytes).substr(0, n), "cut.gguf"));
    ASSERT_FALSE(f.ok()) << "prefix of " << n << " bytes parsed";
    EXPECT_EQ(f.status().code(), StatusCode::kDataLoss) << n << ": " << f.status();
    EXPECT_THAT(f.status().message(), HasSubstr("cut.gguf"));
  }
}

TEST(GgufFileTest, RejectsCorruptHeaders) {
  auto parse = [](const std::string& bytes) { return ParseGguf(*MemoryByteSource(bytes, "x")); };
  auto header = [](uint32_t version, uint64_t nt, uint64_t nkv) {
    Bytes b;
    b.Pod<uint32_t>(0x46554747).Pod<uint32_t>(version).Pod<uint64_t>(nt).Pod<uint64_t>(nkv);
    return b;
  };
  EXPECT_THAT(parse("GGML" + std::string(20, '\0')).status().message(), HasSubstr("bad magic"));
  EXPECT_EQ(parse(header(1, 0, 0).str()).status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(parse(header(0x03000000, 0, 0).str()).status().message(), HasSubstr("big-endian"));
  // Counts far beyond the file.
  EXPECT_THAT(parse(header(3, 0, 1ull << 60).str()).status().message(),
              HasSubstr("metadata count"));
  EXPECT_THAT(parse(header(3, ~0ull, 0).str()).status().message(), HasSubstr("tensor count"));
  // A string length beyond the file.
  {
    Bytes b = header(3, 0, 1);
    b.Pod<uint64_t>(~0ull - 3).Raw("abcd").Pod<uint32_t>(4).Pod<uint32_t>(1);
    EXPECT_THAT(parse(b.str()).status().message(), HasSubstr("exceeds the file"));
  }
  // An array longer than the file.
  {
    Bytes b = header(3, 0, 1);
    b.Kv("a", 9).Pod<uint32_t>(10).Pod<uint64_t>(1ull << 40).Pod<uint64_t>(1);
    EXPECT_THAT(parse(b.str()).status().message(), HasSubstr("exceeds the file"));
  }
  // Unknown value type, bad bool, duplicate key.
  {
    Bytes b = header(3, 0, 1);
    b.Kv("k", 13).Pod<uint32_t>(0);
    EXPECT_THAT(parse(b.str()).status().message(), HasSubstr("unknown type 13"));
  }
  {
    Bytes b = header(3, 0, 1);
    b.Kv("k", 7).Pod<uint8_t>(2);
    EXPECT_THAT(parse(b.str()).status().message(), HasSubstr("not 0 or 1"));
  }
  {
    Bytes b = header(3, 0, 2);
    b.Kv("k", 4).Pod<uint32_t>(1).Kv("k", 4).Pod<uint32_t>(2);
    EXPECT_THAT(parse(b.str()).status().message(), HasSubstr("duplicate metadata key k"));
  }
  // Arrays nested too deep.
  {
    Bytes b = header(3, 0, 1);
    b.Kv("deep", 9);
    for (int d = 0; d < 6; ++d) b.Pod<uint32_t>(9).Pod<uint64_t>(1);
    b.Pod<uint32_t>(4).Pod<uint64_t>(0);
    EXPECT_THAT(parse(b.str()).status().message(), HasSubstr("nested deeper"));
  }
  // Alignment not a power of two.
  {
    Bytes b = header(3, 0, 1);
    b.Kv("general.alignment", 4).Pod<uint32_t>(48);
    EXPECT_THAT(parse(b.str()).status().message(), HasSubstr("power-of-two"));
  }
}

TEST(GgufFileTest, RejectsBadTensorInfos) {
  auto one_tensor = [](uint32_t n_dims, std::vector<uint64_t> dims, uint32_t type, uint64_t offset,
                       size_t data_bytes) {
    Bytes b;
    b.Pod<uint32_t>(0x46554747).Pod<uint32_t>(3).Pod<uint64_t>(1).Pod<uint64_t>(0);
    b.Str("t").Pod<uint32_t>(n_dims);
    for (uint64_t d : dims) b.Pod<uint64_t>(d);
    b.Pod<uint32_t>(type).Pod<uint64_t>(offset).PadTo(32);
    b.Raw(std::string(data_bytes, '\0'));
    return ParseGguf(*MemoryByteSource(b.str(), "t.gguf"));
  };
  EXPECT_TRUE(one_tensor(2, {4, 2}, 0, 0, 32).ok());
  EXPECT_THAT(one_tensor(5, {1, 1, 1, 1, 1}, 0, 0, 32).status().message(),
              HasSubstr("5 dimensions"));
  EXPECT_THAT(one_tensor(2, {4, 2}, 0, 0, 31).status().message(), HasSubstr("outside"));
  EXPECT_THAT(one_tensor(2, {4, 2}, 0, 16, 64).status().message(), HasSubstr("not aligned"));
  EXPECT_THAT(one_tensor(2, {4, 2}, 99, 0, 32).status().message(),
              HasSubstr("unknown ggml type 99"));
  EXPECT_THAT(one_tensor(1, {31}, 8, 0, 64).status().message(), HasSubstr("Q8_0 blocks"));
  // Every type ggml.h defines today parses; removed ids (36..38) do not.
  EXPECT_TRUE(one_tensor(1, {32}, 39, 0, 32).ok());   // MXFP4, 17 bytes
  EXPECT_TRUE(one_tensor(1, {64}, 40, 0, 64).ok());   // NVFP4, 36 bytes
  EXPECT_TRUE(one_tensor(1, {128}, 41, 0, 32).ok());  // Q1_0, 18 bytes
  EXPECT_TRUE(one_tensor(1, {64}, 42, 0, 32).ok());   // Q2_0, 18 bytes
  EXPECT_THAT(one_tensor(1, {32}, 37, 0, 32).status().message(), HasSubstr("unknown ggml type 37"));
  EXPECT_THAT(one_tensor(2, {1ull << 62, 1ull << 62}, 0, 0, 32).status().message(),
              HasSubstr("overflowing shape"));
  EXPECT_THAT(one_tensor(2, {1ull << 40, 1ull << 20}, 0, 0, 32).status().message(),
              HasSubstr("outside"));
}

// A type that parses but has no dequantizer here is named when a tensor of
// it is read, not when the file is opened.
TEST(GgufFileTest, UndequantizableTypesAreNamedWhenRead) {
  Bytes b;
  b.Pod<uint32_t>(0x46554747).Pod<uint32_t>(3).Pod<uint64_t>(2).Pod<uint64_t>(0);
  b.Str("nv").Pod<uint32_t>(1).Pod<uint64_t>(64).Pod<uint32_t>(40).Pod<uint64_t>(0);
  b.Str("mx").Pod<uint32_t>(1).Pod<uint64_t>(32).Pod<uint32_t>(39).Pod<uint64_t>(64);
  b.PadTo(32);
  b.Raw(std::string(64, '\0'));
  b.Pod<uint8_t>(127);                                // MXFP4 e = 127: scale 2^0
  for (int j = 0; j < 16; ++j) b.Pod<uint8_t>(0x72);  // codes 2 (1.0) and 7 (6.0)
  b.Raw(std::string(15, '\0'));
  auto src = MemoryByteSource(b.str(), "types.gguf");
  auto f = ParseGguf(*src);
  ASSERT_TRUE(f.ok()) << f.status();
  auto nv = ReadGgufTensorAsFloat(*f, *src, *f->FindTensor("nv"));
  EXPECT_EQ(nv.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(nv.status().message(), HasSubstr("NVFP4"));
  auto mx = ReadGgufTensorAsFloat(*f, *src, *f->FindTensor("mx"));
  ASSERT_TRUE(mx.ok()) << mx.status();
  EXPECT_EQ((*mx)[0], 1.0f);
  EXPECT_EQ((*mx)[16], 6.0f);
}

TEST(GgufFileTest, ReadsStories260K) {
  auto f = ReadGgufFile("models/stories260K/stories260K-f32.gguf");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->version, 3u);
  EXPECT_EQ(f->tensors.size(), 48u);
  EXPECT_EQ(f->metadata.size(), 19u);
  EXPECT_EQ(f->data_offset, 14176u);  // 14152 rounded up to 32
  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
  EXPECT_EQ(*f->GetInt("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(static_cast<float>(*f->GetFloat("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(*f->GetInt("tokenizer.ggml.seperator_token_id"), 4294967295ll);
  auto tokens = f->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[1], "<s>");
  const GgufTensorInfo* k = f->FindTensor("blk.0.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_THAT(k->ne, ElementsAre(64, 32));
  EXPECT_EQ(k->offset, 278784u);
  EXPECT_EQ(k->nbytes, 64u * 32 * 4);
}

TEST(GgufFileTest, ReadsVocabOnlyFile) {
  auto f = ReadGgufFile("tests/golden/tokenizers/ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->tensors.empty());
  EXPECT_EQ(f->GetStringArray("tokenizer.ggml.tokens")->size(), 50257u);
  auto merges = f->GetStringArray("tokenizer.ggml.merges");
  ASSERT_TRUE(merges.ok());
  EXPECT_EQ(merges->size(), 50000u);
  EXPECT_EQ((*merges)[0], "\xC4\xA0 t");  // "Ġ t"
  EXPECT_EQ(ReadGgufFile("no/such.gguf").status().code(), StatusCode::kNotFound);
}

// Metadata arrays are bounded per array, in total, in nesting and in the
// number of arrays inside arrays, whatever the options ask for.
TEST(GgufFileTest, MetadataArraysAreBoundedInAll) {
  auto header = [](uint64_t nkv) {
    Bytes b;
    b.Pod<uint32_t>(0x46554747).Pod<uint32_t>(3).Pod<uint64_t>(0).Pod<uint64_t>(nkv);
    return b;
  };
  auto u8_array = [](Bytes& b, const std::string& key, uint64_t n) {
    b.Kv(key, 9).Pod<uint32_t>(0).Pod<uint64_t>(n).Raw(std::string(n, '\1'));
  };
  GgufParseOptions o;
  o.max_total_array_elements = 100;
  {
    Bytes b = header(2);
    u8_array(b, "a", 60);
    u8_array(b, "b", 40);
    auto f = ParseGguf(*MemoryByteSource(b.str(), "x"), o);
    ASSERT_TRUE(f.ok()) << f.status();
  }
  {
    Bytes b = header(2);
    u8_array(b, "a", 60);
    u8_array(b, "b", 41);
    auto f = ParseGguf(*MemoryByteSource(b.str(), "x"), o);
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(f.status().message(),
              "metadata b: x: arrays hold 101 elements in all (so far), over the limit of 100");
  }
  // 1000 empty arrays inside one array, over a limit of 999.
  {
    Bytes b = header(1);
    b.Kv("outer", 9).Pod<uint32_t>(9).Pod<uint64_t>(1000);
    for (int i = 0; i < 1000; ++i) b.Pod<uint32_t>(0).Pod<uint64_t>(0);
    GgufParseOptions nested;
    nested.max_nested_arrays = 999;
    auto f = ParseGguf(*MemoryByteSource(b.str(), "x"), nested);
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(f.status().message(), HasSubstr("1000 arrays inside arrays"));
    nested.max_nested_arrays = 1000;
    EXPECT_TRUE(ParseGguf(*MemoryByteSource(b.str(), "x"), nested).ok());
  }
  // Nesting past kMaxGgufArrayDepth is refused even when the options allow
  // more: the parser recurses once per level.
  {
    Bytes b = header(1);
    b.Kv("deep", 9);
    for (int d = 0; d < 300000; ++d) b.Pod<uint32_t>(9).Pod<uint64_t>(1);
    b.Pod<uint32_t>(4).Pod<uint64_t>(0);
    GgufParseOptions lax;
    lax.max_array_depth = 1 << 30;
    auto f = ParseGguf(*MemoryByteSource(b.str(), "x"), lax);
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(f.status().message(), "metadata deep: x: arrays nested deeper than 8");
  }
}

}  // namespace
}  // namespace quantd::gguf
