#include "worker/io/uri/hub_dataset.h"

#include <gtest/gtest.h>

namespace quantd::io {
namespace {

using Files = std::vector<std::string>;

TEST(HubDatasetQueryTest, DefaultsAndKeys) {
  auto q = ParseHubDatasetQuery("");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->split, "train");
  EXPECT_EQ(q->config, "");
  q = ParseHubDatasetQuery("?split=test&config=wikitext-2-raw-v1&field=text");
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->split, "test");
  EXPECT_EQ(q->config, "wikitext-2-raw-v1");
  EXPECT_EQ(q->field, "text");
  q = ParseHubDatasetQuery("?file=en%2Fc4-validation.00000-of-00008.jsonl");
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->file, "en/c4-validation.00000-of-00008.jsonl");
}

TEST(HubDatasetQueryTest, NamesEveryBadKeyAtOnce) {
  auto q = ParseHubDatasetQuery("?split=a/b&colour=red&field=&file=../x.jsonl&split=c");
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), StatusCode::kInvalidArgument);
  const std::string m = q.status().message();
  EXPECT_NE(m.find("split 'a/b' is not a plain name"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown key 'colour'"), std::string::npos) << m;
  EXPECT_NE(m.find("'field' needs a value"), std::string::npos) << m;
  EXPECT_NE(m.find("file '../x.jsonl'"), std::string::npos) << m;
  EXPECT_NE(m.find("'split' is given twice"), std::string::npos) << m;
  EXPECT_FALSE(ParseHubDatasetQuery("?split=a%0Ab").ok());  // a decoded control byte
  EXPECT_FALSE(ParseHubDatasetQuery("?split=a%zz").ok());
  EXPECT_FALSE(ParseHubDatasetQuery("?file=a.jsonl&split=test").ok());
  EXPECT_FALSE(ParseHubDatasetQuery("?file=notes.md").ok());
}

TEST(HubDatasetFilesTest, SplitLayouts) {
  const Files listed = {"README.md",
                        "data/train-00001-of-00002.parquet",
                        "data/train-00000-of-00002.parquet",
                        "data/train_sft-00000-of-00001.parquet",
                        "data/test-00000-of-00001.parquet",
                        "validation.jsonl",
                        "extra/validation/part0.jsonl",
                        "../escape/train.jsonl",
                        "data/train.py"};
  auto f = SelectHubDatasetFiles(listed, {"train", "", "", ""}, "u");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(*f, (Files{"data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"}));
  f = SelectHubDatasetFiles(listed, {"train_sft", "", "", ""}, "u");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f, (Files{"data/train_sft-00000-of-00001.parquet"}));
  f = SelectHubDatasetFiles(listed, {"validation", "", "", ""}, "u");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f, (Files{"extra/validation/part0.jsonl", "validation.jsonl"}));
  f = SelectHubDatasetFiles(listed, {"dev", "", "", ""}, "hf://datasets/o/n");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find("no data file holds the split 'dev'; its data files are "
                                      "data/test-00000-of-00001.parquet"),
            std::string::npos)
      << f.status().message();
}

TEST(HubDatasetFilesTest, ConfigurationsAndFile) {
  const Files listed = {"wikitext-103-raw-v1/test-00000-of-00001.parquet",
                        "wikitext-2-raw-v1/test-00000-of-00001.parquet",
                        "wikitext-2-raw-v1/train-00000-of-00001.parquet"};
  auto f = SelectHubDatasetFiles(listed, {"test", "", "", ""}, "u");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(f.status().message().find("(wikitext-103-raw-v1, wikitext-2-raw-v1); name one with "
                                      "?config="),
            std::string::npos)
      << f.status().message();
  f = SelectHubDatasetFiles(listed, {"test", "wikitext-2-raw-v1", "", ""}, "u");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f, (Files{"wikitext-2-raw-v1/test-00000-of-00001.parquet"}));
  f = SelectHubDatasetFiles(
      listed, {"train", "", "", "wikitext-2-raw-v1/test-00000-of-00001.parquet"}, "u");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f, (Files{"wikitext-2-raw-v1/test-00000-of-00001.parquet"}));
  f = SelectHubDatasetFiles(listed, {"train", "", "", "x/y.parquet"}, "u");
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
}

// c4's and pile-val's layouts: the split inside a name, compressed JSON.
TEST(HubDatasetFilesTest, SplitAsAWordOfTheNameAndCompressedFiles) {
  const Files listed = {"en/c4-train.00000-of-01024.json.gz",
                        "en/c4-validation.00000-of-00008.json.gz",
                        "en.noblocklist/c4-validation.00000-of-00008.json.gz",
                        "val.jsonl.zst",
                        "retrain.jsonl",
                        "trainer.jsonl"};
  auto f = SelectHubDatasetFiles(listed, {"validation", "en", "", ""}, "u");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(*f, (Files{"en/c4-validation.00000-of-00008.json.gz"}));
  f = SelectHubDatasetFiles(listed, {"val", "", "", ""}, "u");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(*f, (Files{"val.jsonl.zst"}));
  // "retrain" and "trainer" hold the word only inside another word.
  f = SelectHubDatasetFiles(listed, {"train", "", "", ""}, "u");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(*f, (Files{"en/c4-train.00000-of-01024.json.gz"}));
}

TEST(HubDatasetFilesTest, ShardCountIsBounded) {
  Files listed;
  for (size_t i = 0; i <= kMaxHubDatasetFiles; ++i)
    listed.push_back("data/train-" + std::to_string(10000 + i) + ".parquet");
  auto f = SelectHubDatasetFiles(listed, {}, "u");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kResourceExhausted);
}

TEST(HubDatasetFilesTest, RelativePaths) {
  EXPECT_TRUE(IsHubRelativePath("data/train.parquet"));
  EXPECT_FALSE(IsHubRelativePath("/data/train.parquet"));
  EXPECT_FALSE(IsHubRelativePath("data//train.parquet"));
  EXPECT_FALSE(IsHubRelativePath("data/../train.parquet"));
  EXPECT_FALSE(IsHubRelativePath("a/b/c/d/e/f/g/h/i.jsonl"));
}

}  // namespace
}  // namespace quantd::io
