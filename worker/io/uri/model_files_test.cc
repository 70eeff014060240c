#include "worker/io/uri/model_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quantd::io {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

class ModelFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    base_ = fs::canonical(tmp ? tmp : "/tmp") /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(base_);
    model_ = base_ / "model";
    Write(model_ / "config.json", "{\"model_type\": \"llama\"}");
    Write(model_ / "model.safetensors", "weights");
    Write(base_ / "secret" / "shadow", "root:secret");
    options_.names = {"config.json", "tokenizer.json", "tokenizer_config.json"};
    options_.suffixes = {".safetensors"};
  }

  StatusOr<std::unique_ptr<ModelFiles>> Open(const fs::path& dir) {
    return ModelFiles::Open(dir.string(), (base_ / "views" / "job" / dir.filename()).string(),
                            options_);
  }

  fs::path base_, model_;
  ModelFilesOptions options_;
};

TEST_F(ModelFilesTest, TheViewHoldsOnlyTheListedFiles) {
  fs::create_symlink(base_ / "secret" / "shadow", model_ / "notes.txt");
  Write(model_ / "README.md", "readme");
  auto files = Open(model_);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ((*files)->names(), (std::vector<std::string>{"config.json", "model.safetensors"}));
  const fs::path view = (*files)->view_dir();
  EXPECT_EQ(view.filename(), "model");
  EXPECT_EQ(Read(view / "config.json"), "{\"model_type\": \"llama\"}");
  EXPECT_EQ(Read(view / "model.safetensors"), "weights");
  EXPECT_FALSE(fs::exists(view / "notes.txt"));
  EXPECT_FALSE(fs::exists(view / "README.md"));
  files->reset();
  EXPECT_FALSE(fs::exists(view));
}

TEST_F(ModelFilesTest, ALinkOutOfTheDirectoryIsRefused) {
  fs::create_symlink(base_ / "secret" / "shadow", model_ / "tokenizer.json");
  auto files = Open(model_);
  EXPECT_EQ(files.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(files.status().message(), HasSubstr("tokenizer.json leads to " +
                                                  (base_ / "secret" / "shadow").string()));
  EXPECT_FALSE(fs::exists(base_ / "views" / "job" / "model"));

  // Relative links that climb out are the same.
  fs::remove(model_ / "tokenizer.json");
  fs::create_symlink("../secret/shadow", model_ / "tokenizer_config.json");
  EXPECT_EQ(Open(model_).status().code(), StatusCode::kPermissionDenied);
  fs::remove(model_ / "tokenizer_config.json");

  // A shard may not either.
  fs::create_symlink(base_ / "secret" / "shadow", model_ / "model-00002.safetensors");
  EXPECT_EQ(Open(model_).status().code(), StatusCode::kPermissionDenied);
  fs::remove(model_ / "model-00002.safetensors");

  // ... unless the job may read where it leads.
  fs::create_symlink(base_ / "secret" / "shadow", model_ / "tokenizer.json");
  options_.allowed_dirs = {(base_ / "secret").string()};
  auto allowed = Open(model_);
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  EXPECT_EQ(Read(fs::path((*allowed)->view_dir()) / "tokenizer.json"), "root:secret");
}

TEST_F(ModelFilesTest, LinksInsideTheDirectoryAndNonRegularFiles) {
  Write(model_ / "blobs" / "tok", "{}");
  fs::create_symlink("blobs/tok", model_ / "tokenizer.json");
  auto files = Open(model_);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(Read(fs::path((*files)->view_dir()) / "tokenizer.json"), "{}");
  files->reset();

  fs::create_symlink("blobs", model_ / "tokenizer_config.json");  // a directory
  EXPECT_EQ(Open(model_).status().code(), StatusCode::kPermissionDenied);
  fs::remove(model_ / "tokenizer_config.json");
  ASSERT_EQ(mkfifo((model_ / "tokenizer_config.json").c_str(), 0600), 0);
  auto fifo = Open(model_);  // opened without blocking, then refused
  EXPECT_EQ(fifo.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(fifo.status().message(), HasSubstr("not a regular file"));
  fs::remove(model_ / "tokenizer_config.json");
  fs::create_symlink(base_ / "nothing", model_ / "tokenizer_config.json");
  EXPECT_EQ(Open(model_).status().code(), StatusCode::kPermissionDenied);
}

TEST_F(ModelFilesTest, HubSnapshotsMayLinkIntoTheirOwnBlobs) {
  const fs::path repo = base_ / "hub" / "models--acme--tiny";
  const fs::path snapshot = repo / "snapshots" / "0123abcd";
  Write(repo / "blobs" / "aaa", "{\"model_type\": \"llama\"}");
  Write(base_ / "hub" / "models--other--x" / "blobs" / "bbb", "{}");
  fs::create_directories(snapshot);
  fs::create_symlink("../../blobs/aaa", snapshot / "config.json");
  auto files = Open(snapshot);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(Read(fs::path((*files)->view_dir()) / "config.json"), "{\"model_type\": \"llama\"}");
  files->reset();
  // Another repository's blobs are outside.
  fs::create_symlink("../../../models--other--x/blobs/bbb", snapshot / "tokenizer.json");
  EXPECT_EQ(Open(snapshot).status().code(), StatusCode::kPermissionDenied);
}

TEST_F(ModelFilesTest, ASwapAfterOpeningDoesNotRedirectReads) {
  auto files = Open(model_);
  ASSERT_TRUE(files.ok()) << files.status();
  // The model directory's config.json is replaced by a link to the secret.
  fs::remove(model_ / "config.json");
  fs::create_symlink(base_ / "secret" / "shadow", model_ / "config.json");
  EXPECT_EQ(Read(fs::path((*files)->view_dir()) / "config.json"), "{\"model_type\": \"llama\"}");
}

TEST_F(ModelFilesTest, TooManyFiles) {
  options_.max_files = 1;
  EXPECT_EQ(Open(model_).status().code(), StatusCode::kResourceExhausted);
}

TEST_F(ModelFilesTest, OneFileIsShownUnderTheViewName) {
  Write(base_ / "ggufs" / "tiny.gguf", "GGUF-bytes");
  const std::string view = (base_ / "views" / "job" / "tiny").string();
  auto files =
      ModelFiles::OpenFile((base_ / "ggufs" / "tiny.gguf").string(), view, "model.gguf", options_);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ((*files)->names(), std::vector<std::string>{"model.gguf"});
  EXPECT_EQ(Read(fs::path(view) / "model.gguf"), "GGUF-bytes");
  // The engine may add its own files to the view; they go with it.
  Write(fs::path(view) / "config.json", "{}");
  files->reset();
  EXPECT_FALSE(fs::exists(view));
}

TEST_F(ModelFilesTest, OneFileThatLinksOutOfItsDirectoryIsRefused) {
  fs::create_directories(base_ / "ggufs");
  fs::create_symlink(base_ / "secret" / "shadow", base_ / "ggufs" / "evil.gguf");
  const std::string view = (base_ / "views" / "job" / "evil").string();
  auto files =
      ModelFiles::OpenFile((base_ / "ggufs" / "evil.gguf").string(), view, "model.gguf", options_);
  EXPECT_EQ(files.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(files.status().message(),
              HasSubstr("evil.gguf leads to " + (base_ / "secret" / "shadow").string()));
  EXPECT_FALSE(fs::exists(view));
  // Unless the link leads into a directory the job may read anyway.
  options_.allowed_dirs = {(base_ / "secret").string()};
  files =
      ModelFiles::OpenFile((base_ / "ggufs" / "evil.gguf").string(), view, "model.gguf", options_);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(Read(fs::path(view) / "model.gguf"), "root:secret");
}

TEST_F(ModelFilesTest, OneFileThatIsNotRegularIsRefused) {
  fs::create_directories(base_ / "ggufs" / "dir.gguf");
  auto files =
      ModelFiles::OpenFile((base_ / "ggufs" / "dir.gguf").string(),
                           (base_ / "views" / "job" / "d").string(), "model.gguf", options_);
  EXPECT_EQ(files.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(files.status().message(), HasSubstr("is not a regular file"));
}

}  // namespace
}  // namespace quantd::io
