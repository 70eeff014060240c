#include "worker/io/dataset/dataset.h"

#include <zlib.h>
#include <zstd.h>

#include <cstdlib>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/common/cancellation.h"
#include "worker/io/dataset/chat_rows.h"
#include "worker/io/dataset/decompress.h"

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
      {"{\"text\":\"a\"}\n[1,2]\n", DatasetFormat::kJsonl,
       "line 2: mixes text, token-id and chat-message rows"},
      {"{\"text\":3}\n", DatasetFormat::kJsonl,
       "must be a string, an array of token ids or an array of chat messages, got number"},
      {"[1,-2]\n", DatasetFormat::kJsonl, "token id -2 is out of range"},
      {"[1,\"a\"]", DatasetFormat::kJsonIds, "token ids must be integers"},
      {"{}", DatasetFormat::kJsonIds, "d line 1: no field \"text\""},
      {"7", DatasetFormat::kJsonIds, "expected a JSON array"},
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

// A Parquet file written by an independent writer (hyparquet-writer): its
// text column, its token-id column, and its chat column.
TEST(DatasetTest, ParquetColumnsAreRowsOfEachKind) {
  const std::string file = "tests/data/parquet/hyparquet_chat.parquet";
  DatasetOptions o;
  auto text = LoadDataset(file, o);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->name, "hyparquet_chat.parquet");
  // The null row is skipped, the empty string kept.
  EXPECT_EQ(text->text_rows, (std::vector<std::string>{"hello world", "",
                                                       "na\xC3\xAFve caf\xC3\xA9 \xE2\x80\x94 "
                                                       "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E "
                                                       "\xF0\x9F\x99\x82",
                                                       "last row"}));
  o.text_field = "ids";
  auto ids = LoadDataset(file, o);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(ids.status().message(),
              HasSubstr("dataset hyparquet_chat.parquet row 2: token id -5 is out of range"));
  o.text_field = "nope";
  auto missing = LoadDataset(file, o);
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("nope"));
  EXPECT_THAT(missing.status().message(), HasSubstr("messages"));
}

TEST(DatasetTest, ChatRowsRenderWithTheTemplateAndTokenizePerConversation) {
  DatasetOptions o;
  o.text_field = "messages";
  auto d = LoadDataset("tests/data/parquet/hyparquet_chat.parquet", o);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->chat_rows.size(), 3u);  // a null and an empty conversation skipped
  ByteTokenizer tok(true);
  EXPECT_EQ(d->TextTokens(tok).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(RenderChatRows(*d, {}).code(), StatusCode::kFailedPrecondition);

  ChatRenderSettings chat;
  chat.chat_template =
      "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}\n"
      "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";
  chat.bos_token = "<s>";
  chat.eos_token = "</s>";
  ASSERT_TRUE(RenderChatRows(*d, chat).ok());
  EXPECT_TRUE(d->chat_rows.empty());
  EXPECT_EQ(d->text_rows, (std::vector<std::string>{
                              "<s><|user|>Hi\n<|assistant|>Hello! \xF0\x9F\x91\x8B\n",
                              "<s><|system|>\n", "<s><|user|>a\n<|assistant|>b\n<|user|>c\n"}));
  // Each conversation's BOS text is the BOS id; no second BOS is added.
  auto stream = d->TokenStream(tok);
  ASSERT_TRUE(stream.ok());
  std::vector<int32_t> want;
  for (const std::string& row : d->text_rows) {
    want.push_back(1);
    for (unsigned char c : row.substr(3)) want.push_back(3 + c);
  }
  EXPECT_EQ(*stream, want);

  // A template that refuses a row names the conversation and says why.
  auto again = LoadDataset("tests/data/parquet/hyparquet_chat.parquet", o);
  ASSERT_TRUE(again.ok());
  chat.chat_template =
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system role') }}"
      "{% endif %}{{ m.content }}{% endfor %}";
  const Status refused = RenderChatRows(*again, chat);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(),
              HasSubstr("dataset hyparquet_chat.parquet conversation 1: the model's chat "
                        "template: "));
  EXPECT_THAT(refused.message(), HasSubstr("no system role"));
  chat.chat_template = "{% for m in messages %}";
  EXPECT_EQ(RenderChatRows(*again, chat).code(), StatusCode::kInvalidArgument);
}

TEST(DatasetTest, JsonlChatRowsAndMixedKinds) {
  auto d = ParseDataset(
      "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}\n{\"messages\": []}\n",
      DatasetFormat::kJsonl, "c.jsonl", DatasetOptions{.text_field = "messages"});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->chat_rows.size(), 1u);
  auto mixed = ParseDataset("{\"t\": [{\"role\": \"user\"}]}\n{\"t\": \"text\"}\n",
                            DatasetFormat::kJsonl, "m.jsonl", DatasetOptions{.text_field = "t"});
  EXPECT_THAT(mixed.status().message(),
              HasSubstr("m.jsonl line 2: mixes text, token-id and chat-message rows"));
  auto no_role = ParseDataset("{\"t\": [{\"content\": \"x\"}]}\n", DatasetFormat::kJsonl, "r.jsonl",
                              DatasetOptions{.text_field = "t"});
  EXPECT_THAT(no_role.status().message(), HasSubstr("an object with a \"role\" string"));
}

std::string Gzip(const std::string& data) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, data.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = data.size();
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = out.size();
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string Zstd(const std::string& data) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 3));
  return out;
}

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// c4's .json.gz shards (JSON Lines in a .json name, gzip members
// concatenated) and pile-val's .jsonl.zst read as the text they hold.
TEST(DatasetTest, CompressedFilesReadAsTheirContent) {
  std::ifstream in("tests/data/c4-sample.jsonl", std::ios::binary);
  const std::string c4((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t half = c4.find('\n', c4.size() / 2) + 1;
  auto plain = LoadDataset("tests/data/c4-sample.jsonl");
  ASSERT_TRUE(plain.ok());
  auto gz = LoadDataset(WriteTemp("c4-validation.00000-of-00008.json.gz",
                                  Gzip(c4.substr(0, half)) + Gzip(c4.substr(half))));
  ASSERT_TRUE(gz.ok()) << gz.status();
  EXPECT_EQ(gz->name, "c4-validation.00000-of-00008.json.gz");
  EXPECT_EQ(gz->text_rows, plain->text_rows);
  auto zst = LoadDataset(WriteTemp("val.jsonl.zst", Zstd(c4)));
  ASSERT_TRUE(zst.ok()) << zst.status();
  EXPECT_EQ(zst->text_rows, plain->text_rows);

  // Bounded: the limit applies to what comes out, not the compressed size.
  DatasetOptions small;
  small.max_bytes = c4.size() - 1;
  const std::string bomb = WriteTemp("bomb.jsonl.zst", Zstd(std::string(64 << 20, ' ')));
  EXPECT_EQ(LoadDataset(WriteTemp("c4.jsonl.gz", Gzip(c4)), small).status().code(),
            StatusCode::kResourceExhausted);
  small.max_bytes = 1 << 20;
  EXPECT_EQ(LoadDataset(bomb, small).status().code(), StatusCode::kResourceExhausted);
  // Truncated and corrupt data are INVALID_ARGUMENT naming the file.
  const std::string z = Gzip(c4), s = Zstd(c4);
  for (size_t cut : {size_t{0}, size_t{10}, z.size() / 2, z.size() - 1}) {
    auto t = LoadDataset(WriteTemp("cut.jsonl.gz", z.substr(0, cut)));
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << cut;
    EXPECT_THAT(t.status().message(), HasSubstr("dataset cut.jsonl.gz: corrupt or truncated gzip"));
  }
  for (size_t cut : {size_t{10}, s.size() / 2, s.size() - 1}) {
    auto t = LoadDataset(WriteTemp("cut.jsonl.zst", s.substr(0, cut)));
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << cut << t.status();
  }
  EXPECT_EQ(Decompress("abc", Compression::kNone, 2, "n").status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(CompressionForPath("a.jsonl.zst"), Compression::kZstd);
  EXPECT_EQ(StripCompressionExtension("a.json.gz"), "a.json");
}

}  // namespace
}  // namespace quantd::io
