#include "worker/io/dataset/dataset.h"

#include <cstdlib>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/common/cancellation.h"

namespace quantd::io {
namespace {

using ::testing::HasSubstr;

// Bytes as ids 3..258, BOS 1: enough to check what is joined and encoded.
class ByteTokenizer : public Tokenizer {
 public:
  explicit ByteTokenizer(bool add_bos) : add_bos_(add_bos) {}
  std::vector<int32_t> Encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(3 + c);
    return ids;
  }
  std::string Decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t id : ids) s.push_back(static_cast<char>(id - 3));
    return s;
  }
  int32_t bos_id() const override { return 1; }
  int32_t eos_id() const override { return 2; }
  bool add_bos() const override { return add_bos_; }
  int32_t vocab_size() const override { return 259; }

 private:
  bool add_bos_;
};

TEST(DatasetTest, WikitextRowsJoinWithBlankLines) {
  auto d = LoadDataset("tests/data/wikitext2-test.jsonl");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->name, "wikitext2-test.jsonl");
  ASSERT_EQ(d->text_rows.size(), 4358u);
  EXPECT_EQ(d->text_rows[0], "");
  EXPECT_EQ(d->text_rows[1], " = Robert Boulter = \n");
  EXPECT_FALSE(d->pretokenized());
  const std::string joined = d->JoinedText();
  EXPECT_EQ(joined.substr(0, 25), "\n\n = Robert Boulter = \n\n\n");

  auto c4 = LoadDataset("tests/data/c4-sample.jsonl");
  ASSERT_TRUE(c4.ok());
  EXPECT_EQ(c4->text_rows.size(), 200u);
  EXPECT_THAT(c4->text_rows[0], HasSubstr("worker\xE2\x80\x99s"));  // \u2019 decoded
}

TEST(DatasetTest, TextAndTokenStreams) {
  auto d = ParseDataset("ab", DatasetFormat::kText, "t.txt");
  ASSERT_TRUE(d.ok());
  ByteTokenizer bos(true), nobos(false);
  EXPECT_EQ(*d->TokenStream(bos), (std::vector<int32_t>{1, 3 + 'a', 3 + 'b'}));
  EXPECT_EQ(*d->TokenStream(nobos), (std::vector<int32_t>{3 + 'a', 3 + 'b'}));
  EXPECT_EQ(*d->TextTokens(bos), (std::vector<int32_t>{3 + 'a', 3 + 'b'}));

  auto rows = ParseDataset("{\"body\":\"x\"}\n\n{\"body\":\"\"}\n{\"body\":\"y\"}\n",
                           DatasetFormat::kJsonl, "r.jsonl", {DatasetFormat::kAuto, "body"});
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->JoinedText(), "x\n\n\n\ny");
}

TEST(DatasetTest, PretokenizedFormats) {
  ByteTokenizer tok(true);
  auto jsonl = ParseDataset("[5, 6]\n{\"text\": [7]}\n", DatasetFormat::kJsonl, "ids.jsonl");
  ASSERT_TRUE(jsonl.ok()) << jsonl.status();
  EXPECT_TRUE(jsonl->pretokenized());
  EXPECT_EQ(*jsonl->TokenStream(tok), (std::vector<int32_t>{5, 6, 7}));  // no BOS added

  auto nested = ParseDataset("[[1,2],[3]]", DatasetFormat::kJsonIds, "n.json");
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(nested->id_rows.size(), 2u);
  auto flat = ParseDataset("[9,8,7]", DatasetFormat::kAuto, "f.json");
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->id_rows[0], (std::vector<int32_t>{9, 8, 7}));

  const char raw[] = {1, 0, 0, 0, 0x10, 0x01, 0, 0};
  auto ids = ParseDataset(std::string_view(raw, 8), DatasetFormat::kAuto, "x.ids");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->id_rows[0], (std::vector<int32_t>{1, 272}));
  auto oov = ids->TokenStream(tok);
  EXPECT_EQ(oov.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(oov.status().message(), HasSubstr("token id 272 is outside the vocabulary of 259"));
}

TEST(DatasetTest, MalformedInputNamesFileAndLine) {
  struct Case {
    std::string content;
    DatasetFormat format;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"{\"text\":\"a\"}\n{oops\n", DatasetFormat::kJsonl, "d line 2: not valid JSON"},
      {"{\"text\":\"a\"}\n{\"other\":1}\n", DatasetFormat::kJsonl, "d line 2: no field \"text\""},
      {"{\"text\":\"a\"}\n[1,2]\n", DatasetFormat::kJsonl, "line 2: mixes text rows and token-id"},
      {"{\"text\":3}\n", DatasetFormat::kJsonl, "must be a string or an array of token ids"},
      {"[1,-2]\n", DatasetFormat::kJsonl, "token id -2 is out of range"},
      {"[1,\"a\"]", DatasetFormat::kJsonIds, "token ids must be integers"},
      {"{}", DatasetFormat::kJsonIds, "expected a JSON array"},
      {"abc", DatasetFormat::kRawIds, "3 bytes, not a whole number of int32 ids"},
      {std::string("\xff\xff\xff\xff", 4), DatasetFormat::kRawIds, "index 0 is negative"},
      {"\n\n", DatasetFormat::kJsonl, "has no rows"},
      // Deep nesting: refused before the parser builds anything.
      {"{\"text\":\"a\"}\n" + std::string(300000, '[') + std::string(300000, ']'),
       DatasetFormat::kJsonl, "dataset d line 2 nests 300000 levels deep; at most 64"},
      {std::string(300000, '[') + std::string(300000, ']'), DatasetFormat::kJsonIds,
       "dataset d nests 300000 levels deep; at most 64"},
      {"{\"text\":\"" + std::string(16 << 20, 'a') + "\"}", DatasetFormat::kJsonl,
       "dataset d line 1 is 16777227 bytes; at most 16777216"},
  };
  for (const auto& c : cases) {
    auto d = ParseDataset(c.content, c.format, "d");
    ASSERT_FALSE(d.ok()) << c.content;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << c.content;
    EXPECT_THAT(d.status().message(), HasSubstr(c.message)) << c.content;
  }
  EXPECT_EQ(LoadDataset("tests/data/nope.txt").status().code(), StatusCode::kNotFound);
  DatasetOptions small;
  small.max_bytes = 10;
  EXPECT_EQ(LoadDataset("tests/data/c4-sample.jsonl", small).status().code(),
            StatusCode::kResourceExhausted);
}

// Under a job's CancellationScope that asks to stop, a long JSONL parse and
// tokenizing stop with CANCELLED (the parse within 256 lines).
TEST(DatasetTest, StopsWhenTheJobIsCancelled) {
  bool stop = false;
  CancellationScope scope([&stop] { return stop; });
  auto wikitext = LoadDataset("tests/data/wikitext2-test.jsonl");
  ASSERT_TRUE(wikitext.ok()) << wikitext.status();
  ByteTokenizer tok(true);
  ASSERT_TRUE(wikitext->TokenStream(tok).ok());
  stop = true;
  auto cancelled = LoadDataset("tests/data/wikitext2-test.jsonl");
  EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled);
  EXPECT_THAT(cancelled.status().message(), HasSubstr("reading dataset wikitext2-test.jsonl"));
  auto tokens = wikitext->TokenStream(tok);
  EXPECT_EQ(tokens.status().code(), StatusCode::kCancelled);
  EXPECT_THAT(tokens.status().message(), HasSubstr("tokenizing dataset wikitext2-test.jsonl"));
}

}  // namespace
}  // namespace quantd::io
