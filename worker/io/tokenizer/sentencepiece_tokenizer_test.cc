#include "worker/io/tokenizer/sentencepiece_tokenizer.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/io/tokenizer/sentencepiece_model.h"

namespace quantd::io {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr char kModel[] = "models/stories260K/tokenizer.model";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<SentencePieceTokenizer> LoadOrDie(const SentencePieceOptions& options = {}) {
  auto tok = SentencePieceTokenizer::Load(kModel, options);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return std::move(tok).value();
}

TEST(SentencePieceTokenizerTest, MatchesGoldenIdsOfStories260K) {
  auto golden = nlohmann::json::parse(ReadFile("tests/golden/stories260K.json"));
  auto tok = LoadOrDie();
  ASSERT_FALSE(golden["tokenizer_examples"].empty());
  for (const auto& example : golden["tokenizer_examples"]) {
    const std::string text = example["text"];
    const auto expected = example["ids_without_bos"].get<std::vector<int32_t>>();
    EXPECT_THAT(tok->Encode(text), ElementsAreArray(expected)) << text;
    EXPECT_EQ(tok->Decode(expected), text);
  }
}

TEST(SentencePieceTokenizerTest, SpecialTokensAndVocabFromModel) {
  auto tok = LoadOrDie();
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_EQ(tok->IdToPiece(1), "<s>");
  EXPECT_EQ(tok->IdToPiece(3), "<0x00>");
  EXPECT_EQ(tok->IdToPiece(300), "\xE2\x96\x81ha");  // "▁ha"
  EXPECT_EQ(tok->PieceToId("</s>"), 2);
  EXPECT_EQ(tok->PieceToId("<unk>"), 0);
  EXPECT_EQ(tok->PieceToId("no-such-piece"), -1);
}

// Reference ids from /usr/bin/python3's sentencepiece 0.1.97 on the same
// model: byte fallback for characters outside the 512-piece vocabulary, the
// dummy prefix, and runs of spaces.
TEST(SentencePieceTokenizerTest, ByteFallbackAndWhitespaceMatchPythonSentencePiece) {
  auto tok = LoadOrDie();
  const std::string text = "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C!\n  two  spaces";
  EXPECT_THAT(tok->Encode(text),
              ElementsAre(270, 485, 306, 414, 410, 231, 187, 153, 234, 152, 143, 443, 13, 410, 259,
                          424, 414, 410, 262, 427, 412, 331, 419));
  EXPECT_EQ(tok->Decode(tok->Encode(text)), text);
  EXPECT_THAT(tok->Encode(" "), ElementsAre(410, 410));
  EXPECT_TRUE(tok->Encode("").empty());
}

TEST(SentencePieceTokenizerTest, DecodeSkipsIdsOutsideTheVocabulary) {
  auto tok = LoadOrDie();
  EXPECT_EQ(tok->Decode({403, -5, 407, 512, 100000}), tok->Decode({403, 407}));
  EXPECT_EQ(tok->Decode({403, 407}), "Once upon");
}

TEST(SentencePieceTokenizerTest, OptionsOverrideSpecialTokens) {
  SentencePieceOptions options;
  options.add_bos = false;
  options.add_eos = true;
  options.bos_id = 5;
  options.eos_piece = "<s>";
  auto tok = LoadOrDie(options);
  EXPECT_FALSE(tok->add_bos());
  EXPECT_TRUE(tok->add_eos());
  EXPECT_EQ(tok->bos_id(), 5);
  EXPECT_EQ(tok->eos_id(), 1);

  SentencePieceOptions unknown_piece;
  unknown_piece.eos_piece = "<|eot_id|>";  // not in this vocabulary: model's own eos stays
  EXPECT_EQ(LoadOrDie(unknown_piece)->eos_id(), 2);
}

TEST(SentencePieceTokenizerTest, RejectsBadInput) {
  auto missing = SentencePieceTokenizer::Load("models/stories260K/no-such.model");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), ::testing::HasSubstr("no-such.model"));

  auto garbage =
      SentencePieceTokenizer::FromSerializedModel("not a protobuf \xff\xff", "junk.model");
  EXPECT_EQ(garbage.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(garbage.status().message(), ::testing::HasSubstr("junk.model"));

  const std::string bytes = ReadFile(kModel);
  auto truncated = SentencePieceTokenizer::FromSerializedModel(
      std::string_view(bytes).substr(0, bytes.size() / 2), "half.model");
  EXPECT_EQ(truncated.status().code(), StatusCode::kInvalidArgument);

  // Over the size limit: refused before the library (or the native
  // reader) parses a byte.
  const std::string huge(kMaxSentencePieceModelBytes + 1, '\x0a');
  auto too_big = SentencePieceTokenizer::FromSerializedModel(huge, "huge.model");
  EXPECT_EQ(too_big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(too_big.status().message(),
            "SentencePiece model huge.model is 67108865 bytes; at most 67108864");
  EXPECT_EQ(ParseSentencePieceModel(huge, "huge.model").status().message(),
            "SentencePiece model huge.model is 67108865 bytes; at most 67108864");

  SentencePieceOptions bad_id;
  bad_id.bos_id = 512;
  auto out_of_range = SentencePieceTokenizer::Load(kModel, bad_id);
  EXPECT_EQ(out_of_range.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(out_of_range.status().message(), ::testing::HasSubstr("bos id 512"));
}

TEST(SentencePieceTokenizerTest, NativeConversionGivesTheSameIds) {
  auto tok = LoadOrDie();
  const SpmVocab vocab = tok->ExportVocab();
  ASSERT_EQ(vocab.pieces.size(), 512u);
  EXPECT_EQ(vocab.types[0], static_cast<int32_t>(SpmPieceType::kUnknown));
  EXPECT_EQ(vocab.types[1], static_cast<int32_t>(SpmPieceType::kControl));
  EXPECT_EQ(vocab.types[3], static_cast<int32_t>(SpmPieceType::kByte));
  EXPECT_EQ(vocab.types[300], static_cast<int32_t>(SpmPieceType::kNormal));
  auto native = tok->ToNative();
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_EQ((*native)->bos_id(), 1);
  EXPECT_TRUE((*native)->add_bos());
  for (const std::string text :
       {"Once upon a time, there was a little girl named Lily.", " two  spaces\tand tabs\n",
        "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C!"}) {
    EXPECT_EQ((*native)->Encode(text), tok->Encode(text)) << text;
    EXPECT_EQ((*native)->Decode(tok->Encode(text)), tok->Decode(tok->Encode(text))) << text;
  }
}

// The native reader of tokenizer.model (what the engine uses) agrees with
// libsentencepiece id for id on real text.
TEST(SentencePieceTokenizerTest, NativeModelReaderMatchesLibSentencePiece) {
  const std::string bytes = ReadFile(kModel);
  auto model = ParseSentencePieceModel(bytes, kModel);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->model_type, 2);
  EXPECT_TRUE(model->byte_fallback);
  EXPECT_TRUE(model->add_dummy_prefix);
  EXPECT_FALSE(model->remove_extra_whitespaces);
  EXPECT_EQ(model->pad_id, -1);
  EXPECT_EQ(model->vocab.pieces.size(), 512u);
  auto reference = LoadOrDie();
  EXPECT_EQ(model->vocab.pieces, reference->ExportVocab().pieces);
  EXPECT_EQ(model->vocab.scores, reference->ExportVocab().scores);
  EXPECT_EQ(model->vocab.types, reference->ExportVocab().types);
  auto native = LoadNativeSentencePiece(kModel);
  ASSERT_TRUE(native.ok()) << native.status();
  std::istringstream lines(ReadFile("tests/data/tinystories-sample.txt").substr(0, 300000));
  std::string line;
  int compared = 0;
  while (std::getline(lines, line)) {
    ASSERT_EQ((*native)->Encode(line), reference->Encode(line)) << line;
    ++compared;
  }
  EXPECT_GT(compared, 100);

  // Truncations and garbage are DATA_LOSS, never a crash.
  for (size_t n : {size_t{1}, size_t{7}, bytes.size() / 3, bytes.size() - 1}) {
    auto cut = ParseSentencePieceModel(std::string_view(bytes).substr(0, n), "cut.model");
    if (!cut.ok()) {
      EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss) << n;
    }
  }
  EXPECT_EQ(ParseSentencePieceModel("\xff\xff\xff", "junk").status().code(), StatusCode::kDataLoss);
  // A unigram model is refused by name.
  SentencePieceModel unigram = *model;
  unigram.model_type = 1;
  EXPECT_THAT(NativeSentencePieceTokenizer(unigram, {}, "u.model").status().message(),
              ::testing::HasSubstr("unigram"));
}

}  // namespace
}  // namespace quantd::io
