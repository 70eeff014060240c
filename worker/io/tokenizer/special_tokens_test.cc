#include "worker/io/tokenizer/special_tokens.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quantd::io {
namespace {

TEST(SpecialTokensTest, ReadsStringsObjectsIdsAndLists) {
  // Llama-3.1-style files: AddedToken objects and an eos id list.
  auto cfg = ParseSpecialTokenConfig(
      R"({"add_bos_token": true, "add_eos_token": false,
          "bos_token": {"content": "<|begin_of_text|>", "lstrip": false},
          "eos_token": "<|eot_id|>"})",
      R"({"bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009]})", "m");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->add_bos, true);
  EXPECT_EQ(cfg->add_eos, false);
  EXPECT_EQ(cfg->bos_token, "<|begin_of_text|>");
  EXPECT_EQ(cfg->eos_token, "<|eot_id|>");
  EXPECT_EQ(cfg->bos_token_id, 128000);
  EXPECT_EQ(cfg->eos_token_id, 128001);
}

TEST(SpecialTokensTest, AbsentFilesAndNullsLeaveFieldsUnset) {
  auto none = ParseSpecialTokenConfig(std::nullopt, std::nullopt, "m");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->add_bos.has_value());
  EXPECT_FALSE(none->bos_token_id.has_value());

  auto nulls = ParseSpecialTokenConfig(R"({"bos_token": null, "add_bos_token": null})",
                                       R"({"bos_token_id": null, "eos_token_id": []})", "m");
  ASSERT_TRUE(nulls.ok());
  EXPECT_FALSE(nulls->bos_token.has_value());
  EXPECT_FALSE(nulls->add_bos.has_value());
  EXPECT_FALSE(nulls->bos_token_id.has_value());
  EXPECT_FALSE(nulls->eos_token_id.has_value());
}

TEST(SpecialTokensTest, MalformedFilesNameFileAndField) {
  auto not_json = ParseSpecialTokenConfig("{not json", std::nullopt, "/models/x");
  EXPECT_EQ(not_json.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(not_json.status().message(), ::testing::HasSubstr("/models/x/tokenizer_config.json"));

  auto empty_file = ParseSpecialTokenConfig(std::nullopt, "", "/models/x");
  EXPECT_THAT(empty_file.status().message(), ::testing::HasSubstr("/models/x/config.json"));

  auto bad_bool = ParseSpecialTokenConfig(R"({"add_bos_token": "yes"})", std::nullopt, "m");
  EXPECT_THAT(bad_bool.status().message(), ::testing::HasSubstr("add_bos_token"));

  auto bad_id = ParseSpecialTokenConfig(std::nullopt, R"({"eos_token_id": -3})", "m");
  EXPECT_THAT(bad_id.status().message(), ::testing::HasSubstr("eos_token_id"));

  auto bad_token = ParseSpecialTokenConfig(R"({"bos_token": {"text": "<s>"}})", std::nullopt, "m");
  EXPECT_THAT(bad_token.status().message(), ::testing::HasSubstr("bos_token"));

  auto array_top = ParseSpecialTokenConfig("[1, 2]", std::nullopt, "m");
  EXPECT_EQ(array_top.status().code(), StatusCode::kInvalidArgument);
}

TEST(SpecialTokensTest, DeeplyNestedFilesAreRefused) {
  const std::string deep = "{\"x\": " + std::string(300000, '[') + std::string(300000, ']') + "}";
  auto tok_cfg = ParseSpecialTokenConfig(deep, std::nullopt, "/models/x");
  EXPECT_EQ(tok_cfg.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tok_cfg.status().message(),
            "/models/x/tokenizer_config.json nests 300001 levels deep; at most 64");
  auto cfg = ParseSpecialTokenConfig(std::nullopt, deep, "/models/x");
  EXPECT_EQ(cfg.status().message(), "/models/x/config.json nests 300001 levels deep; at most 64");
}

}  // namespace
}  // namespace quantd::io
