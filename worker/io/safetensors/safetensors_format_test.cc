#include "worker/io/safetensors/safetensors_format.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/common/bounded_json.h"
#include "worker/io/safetensors/safetensors_writer.h"

namespace quantd::io {
namespace {

using ::testing::HasSubstr;

std::string LengthPrefix(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return s;
}

std::string MakeFile(const std::string& header, const std::string& data) {
  return LengthPrefix(header.size()) + header + data;
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

TEST(SafetensorsFormatTest, ParsesEntriesMetadataAndOffsets) {
  const std::string header = R"({"__metadata__":{"format":"pt","n":3},)"
                             R"("b":{"dtype":"BF16","shape":[2,3],"data_offsets":[16,28]},)"
                             R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                             R"("s":{"dtype":"I64","shape":[],"data_offsets":[28,36]},)"
                             R"("z":{"dtype":"F8_E4M3","shape":[0,5],"data_offsets":[36,36]}})";
  auto h = ParseSafetensorsBuffer(MakeFile(header, std::string(36, 'x')), "m.safetensors");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->data_offset, 8 + header.size());
  EXPECT_EQ(h->data_size, 36u);
  ASSERT_EQ(h->tensors.size(), 4u);
  EXPECT_EQ(h->tensors[0].name, "a");  // sorted by name
  EXPECT_EQ(h->tensors[1].name, "b");
  const SafetensorsEntry* b = h->Find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, SafetensorsDtype::kBF16);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b->begin, 16u);
  EXPECT_EQ(b->end, 28u);
  EXPECT_EQ(b->numel(), 6);
  EXPECT_EQ(h->Find("s")->numel(), 1);
  EXPECT_EQ(h->Find("z")->nbytes(), 0u);
  EXPECT_EQ(h->Find("nope"), nullptr);
  EXPECT_EQ(h->metadata.at("format"), "pt");
  EXPECT_EQ(h->metadata.at("n"), "3");
}

TEST(SafetensorsFormatTest, DtypeTable) {
  EXPECT_EQ(ParseSafetensorsDtype("F8_E5M2"), SafetensorsDtype::kF8E5M2);
  EXPECT_EQ(ParseSafetensorsDtype("f32"), std::nullopt);
  EXPECT_EQ(SafetensorsDtypeSize(SafetensorsDtype::kBF16), 2);
  EXPECT_EQ(SafetensorsDtypeSize(SafetensorsDtype::kI64), 8);
  EXPECT_EQ(SafetensorsDtypeSize(SafetensorsDtype::kF8E4M3), 1);
  EXPECT_STREQ(SafetensorsDtypeName(SafetensorsDtype::kU16), "U16");
}

struct BadHeaderCase {
  const char* label;
  std::string file;
  const char* expect_in_message;
};

TEST(SafetensorsFormatTest, MalformedInputIsDataLossNamingFileAndTensor) {
  const std::string entry_ok = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::vector<BadHeaderCase> cases = {
      {"short file", "abc", "shorter than the 8-byte length prefix"},
      {"length past end", LengthPrefix(1000) + "{}", "runs past the end"},
      {"huge length", LengthPrefix(1ull << 62) + "{}", "exceeds the"},
      {"not json", MakeFile("{nope", ""), "not valid JSON"},
      {"not object", MakeFile("[1,2]", ""), "does not start with '{'"},
      {"deep nesting",
       MakeFile("{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}", ""),
       "header nests 101 levels deep; at most 64"},
      {"no dtype", MakeFile(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", std::string(8, 0)),
       "tensor 'w': missing or non-string \"dtype\""},
      {"unknown dtype",
       MakeFile(R"({"w":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}})", std::string(8, 0)),
       "tensor 'w': unknown dtype \"F7\""},
      {"negative dim",
       MakeFile(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, 0)),
       "tensor 'w': shape [-2]"},
      {"float dim",
       MakeFile(R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", std::string(8, 0)),
       "non-integer"},
      {"offsets shape",
       MakeFile(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", std::string(8, 0)),
       "[begin, end]"},
      {"begin after end",
       MakeFile(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", std::string(8, 0)),
       "begin > end"},
      {"truncated data", MakeFile("{" + entry_ok + "}", std::string(5, 0)),
       "tensor 'w': data_offsets [0,8] run past the end of the data section (5 bytes"},
      {"size mismatch",
       MakeFile(R"({"w":{"dtype":"F16","shape":[3],"data_offsets":[0,8]}})", std::string(8, 0)),
       "tensor 'w': dtype F16 and shape [3] need 6 bytes but data_offsets [0,8] hold 8"},
      {"overflowing shape",
       MakeFile(
           R"({"w":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904],"data_offsets":[0,8]}})",
           std::string(8, 0)),
       "need more bytes than data_offsets [0,8] hold (8)"},
      {"metadata not object", MakeFile(R"({"__metadata__":[1]})", ""), "\"__metadata__\" is not"},
      {"entry not object", MakeFile(R"({"w":7})", ""), "tensor 'w': entry is not a JSON object"},
  };
  for (const auto& c : cases) {
    auto h = ParseSafetensorsBuffer(c.file, "/ckpt/model.safetensors");
    ASSERT_FALSE(h.ok()) << c.label;
    EXPECT_EQ(h.status().code(), StatusCode::kDataLoss) << c.label;
    EXPECT_THAT(h.status().message(), HasSubstr("/ckpt/model.safetensors")) << c.label;
    EXPECT_THAT(h.status().message(), HasSubstr(c.expect_in_message)) << c.label;
  }
}

TEST(SafetensorsWriterTest, WritesExactLayout) {
  const std::string path = TempPath("exact.safetensors");
  auto w = SafetensorsWriter::Create(path);
  ASSERT_TRUE(w.ok()) << w.status();
  const float a[2] = {1.0f, -2.0f};
  const uint8_t b[3] = {7, 8, 9};
  ASSERT_TRUE((*w)->Add("a", SafetensorsDtype::kF32, {2}, a, sizeof(a)).ok());
  ASSERT_TRUE((*w)->Add("b", SafetensorsDtype::kF8E4M3, {1, 3}, b, sizeof(b)).ok());
  ASSERT_TRUE((*w)->Finish().ok());

  std::string header = R"({"__metadata__":{"format":"pt"},)"
                       R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F8_E4M3","shape":[1,3],"data_offsets":[8,11]}})";
  while ((header.size() + 8) % 8 != 0) header.push_back(' ');
  std::string data(reinterpret_cast<const char*>(a), sizeof(a));
  data.append(reinterpret_cast<const char*>(b), sizeof(b));
  EXPECT_EQ(ReadAll(path), MakeFile(header, data));
  EXPECT_FALSE(Exists(path + ".tmp"));
  EXPECT_FALSE(Exists(path + ".data.tmp"));
}

TEST(SafetensorsWriterTest, RoundTripsThroughTheParser) {
  const std::string path = TempPath("roundtrip.safetensors");
  SafetensorsWriterOptions opts;
  opts.metadata = {{"format", "pt"}, {"quant", "int8"}};
  auto w = SafetensorsWriter::Create(path, opts);
  ASSERT_TRUE(w.ok());
  std::vector<int32_t> ints = {1, -2, 3, -4, 5, -6};
  std::vector<uint16_t> halves(10, 0x3C00);
  ASSERT_TRUE((*w)->Add("layer.w", SafetensorsDtype::kI32, {2, 3}, ints.data(), 24).ok());
  ASSERT_TRUE((*w)->Add("layer.h", SafetensorsDtype::kF16, {10}, halves.data(), 20).ok());
  (*w)->SetMetadata("extra", "yes");
  ASSERT_TRUE((*w)->Finish().ok());

  auto h = ReadSafetensorsHeader(path);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->data_offset % 8, 0u);
  EXPECT_EQ(h->data_size, 44u);
  EXPECT_EQ(h->metadata.at("quant"), "int8");
  EXPECT_EQ(h->metadata.at("extra"), "yes");
  const SafetensorsEntry* e = h->Find("layer.w");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->begin, 0u);
  EXPECT_EQ(e->end, 24u);
  const std::string bytes = ReadAll(path);
  int32_t back[6];
  std::memcpy(back, bytes.data() + h->data_offset + e->begin, 24);
  EXPECT_EQ(std::vector<int32_t>(back, back + 6), ints);
  EXPECT_EQ(h->Find("layer.h")->begin, 24u);
}

TEST(SafetensorsWriterTest, RejectsBadTensorsAndCleansUp) {
  const std::string path = TempPath("bad.safetensors");
  {
    auto w = SafetensorsWriter::Create(path);
    ASSERT_TRUE(w.ok());
    const float x[4] = {0, 0, 0, 0};
    ASSERT_TRUE((*w)->Add("x", SafetensorsDtype::kF32, {4}, x, 16).ok());
    Status dup = (*w)->Add("x", SafetensorsDtype::kF32, {4}, x, 16);
    EXPECT_EQ(dup.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(dup.message(), HasSubstr("'x' was already added"));
    Status size = (*w)->Add("y", SafetensorsDtype::kBF16, {4}, x, 16);
    EXPECT_EQ(size.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(size.message(), HasSubstr("needs 8 bytes, got 16"));
    EXPECT_EQ((*w)->Add("__metadata__", SafetensorsDtype::kF32, {4}, x, 16).code(),
              StatusCode::kInvalidArgument);
    EXPECT_TRUE(Exists(path + ".data.tmp"));
    // Dropped without Finish(): nothing may be left behind.
  }
  EXPECT_FALSE(Exists(path));
  EXPECT_FALSE(Exists(path + ".data.tmp"));
}

TEST(SafetensorsFormatTest, ReadHeaderFromMissingFileIsNotFound) {
  auto h = ReadSafetensorsHeader(TempPath("does-not-exist.safetensors"));
  EXPECT_EQ(h.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace quantd::io

namespace quantd::io {
namespace {

TEST(SafetensorsWriterTest, PlannedModeWritesTheSameBytesInOnePass) {
  const float a[3] = {1, 2, 3};
  const uint16_t b[2] = {0x3F80, 0xBF80};
  const std::string streamed = TempPath("streamed.safetensors");
  const std::string planned = TempPath("planned.safetensors");
  {
    auto w = SafetensorsWriter::Create(streamed);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Add("a", SafetensorsDtype::kF32, {3}, a, 12).ok());
    ASSERT_TRUE((*w)->Add("b", SafetensorsDtype::kBF16, {2, 1}, b, 4).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  SafetensorsWriterOptions opts;
  opts.plan = {{"a", SafetensorsDtype::kF32, {3}}, {"b", SafetensorsDtype::kBF16, {2, 1}}};
  {
    auto w = SafetensorsWriter::Create(planned, opts);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_FALSE(Exists(planned + ".data.tmp"));  // no side file
    Status wrong = (*w)->Add("b", SafetensorsDtype::kBF16, {2, 1}, b, 4);
    EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(wrong.message(), HasSubstr("does not match the plan (next planned: 'a')"));
    ASSERT_TRUE((*w)->Add("a", SafetensorsDtype::kF32, {3}, a, 12).ok());
    Status early = (*w)->Finish();
    EXPECT_EQ(early.code(), StatusCode::kFailedPrecondition);
    EXPECT_THAT(early.message(), HasSubstr("planned tensor 'b' not written"));
    ASSERT_TRUE((*w)->Add("b", SafetensorsDtype::kBF16, {2, 1}, b, 4).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  EXPECT_EQ(ReadAll(planned), ReadAll(streamed));
  EXPECT_FALSE(Exists(planned + ".tmp"));
}

TEST(SafetensorsIndexTest, ParsesWeightMapAndMetadata) {
  auto index = ParseSafetensorsIndex(
      R"({"metadata":{"total_size":48,"format":"pt"},"weight_map":{"b":"s2.safetensors","a":"s1.safetensors"}})",
      "m/model.safetensors.index.json");
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->weight_map,
            (std::vector<std::pair<std::string, std::string>>{{"a", "s1.safetensors"},
                                                              {"b", "s2.safetensors"}}));
  EXPECT_EQ(index->metadata.at("total_size"), "48");
  EXPECT_EQ(index->metadata.at("format"), "pt");
}

TEST(SafetensorsIndexTest, HostileIndexesAreDataLossNotCrashes) {
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"metadata": )" + deep + R"(, "weight_map": {"a": "s.safetensors"}})",
       "i.json nests 300001 levels deep; at most 64"},
      {std::string(json_limits::kSafetensorsIndex + 1, ' '),
       "i.json is 67108865 bytes; at most 67108864"},
      {"{nope", "i.json: not valid JSON"},
      {"[]", "i.json: not a JSON object"},
      {R"({"weight_map": 5})", "i.json: missing \"weight_map\" object"},
      {R"({"weight_map": {"a": 5}})", "i.json: weight_map entry for tensor 'a' is not a file name"},
      {R"({"weight_map": {}})", "i.json: empty weight_map"},
  };
  for (const auto& [text, want] : cases) {
    auto index = ParseSafetensorsIndex(text, "i.json");
    ASSERT_FALSE(index.ok()) << want;
    EXPECT_EQ(index.status().code(), StatusCode::kDataLoss);
    EXPECT_EQ(index.status().message(), want);
  }
}

TEST(SafetensorsFormatTest, HeaderNestedThreeHundredThousandDeepIsRefused) {
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  auto h = ParseSafetensorsBuffer(MakeFile("{\"__metadata__\":" + deep + "}", ""), "f.safetensors");
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(h.status().message(),
            "f.safetensors: malformed safetensors header: header nests 300001 levels deep; at "
            "most 64");
}

}  // namespace
}  // namespace quantd::io
