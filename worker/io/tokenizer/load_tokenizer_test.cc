#include "worker/io/tokenizer/load_tokenizer.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quantd::io {
namespace {

namespace fs = std::filesystem;

// A fresh model directory under the test's private temp dir.
class LoadTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = getenv("TEST_TMPDIR");
    dir_ = fs::path(tmp ? tmp : "/tmp") /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  void CopyModel() {
    fs::copy_file("models/stories260K/tokenizer.model", dir_ / "tokenizer.model");
  }
  fs::path dir_;
};

TEST_F(LoadTokenizerTest, Stories260KDirectoryGivesGoldenIds) {
  auto tok = LoadTokenizerFromDir("models/stories260K");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->Encode("Once upon a time, there was a little girl named Lily."),
              ::testing::ElementsAre(403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421,
                                     395, 317, 426));
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_EQ((*tok)->eos_id(), 2);
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_EQ((*tok)->vocab_size(), 512);
}

TEST_F(LoadTokenizerTest, TokenizerConfigOverridesModelDefaults) {
  CopyModel();
  Write("tokenizer_config.json",
        R"({"add_bos_token": false, "bos_token": "</s>", "eos_token": {"content": "<unk>"}})");
  auto tok = LoadTokenizerFromDir(dir_.string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_FALSE((*tok)->add_bos());
  EXPECT_EQ((*tok)->bos_id(), 2);
  EXPECT_EQ((*tok)->eos_id(), 0);
}

TEST_F(LoadTokenizerTest, ConfigJsonIdsApplyWhenTokenizerConfigIsSilent) {
  CopyModel();
  Write("config.json", R"({"bos_token_id": 7, "eos_token_id": [9, 10]})");
  auto tok = LoadTokenizerFromDir(dir_.string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->bos_id(), 7);
  EXPECT_EQ((*tok)->eos_id(), 9);
  EXPECT_TRUE((*tok)->add_bos());
}

TEST_F(LoadTokenizerTest, ErrorsNameTheDirectoryOrFile) {
  auto empty = LoadTokenizerFromDir(dir_.string());
  EXPECT_EQ(empty.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(empty.status().message(), ::testing::HasSubstr(dir_.string()));

  CopyModel();
  Write("tokenizer_config.json", "{oops");
  auto bad_json = LoadTokenizerFromDir(dir_.string());
  EXPECT_EQ(bad_json.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_json.status().message(), ::testing::HasSubstr("tokenizer_config.json"));

  fs::remove(dir_ / "tokenizer_config.json");
  Write("config.json", R"({"bos_token_id": 4096})");
  auto bad_id = LoadTokenizerFromDir(dir_.string());
  EXPECT_EQ(bad_id.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_id.status().message(), ::testing::HasSubstr("4096"));
}

}  // namespace
}  // namespace quantd::io
