// quantd's S3 client against s3rver (which checks SigV4 signatures), with
// the AWS SDK for JavaScript seeding and reading the bucket independently.
#include "worker/io/uri/s3_client.h"

#include <filesystem>
#include <fstream>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/peers/s3_endpoint.h"
#include "worker/common/sha256.h"
#include "worker/io/uri/uri.h"

namespace quantd::io {
namespace {

namespace fs = std::filesystem;
using ::quantd::testing::S3Endpoint;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Sha(const std::string& path) { return *Sha256File(path); }

class S3ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(getenv("TEST_TMPDIR")) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  void StartS3(const std::vector<std::string>& extra = {}) {
    s3_ = S3Endpoint::Start((dir_ / "s3").string(), {"models", "artifacts"}, extra);
    ASSERT_NE(s3_, nullptr);
    options_.endpoint = s3_->Url();
    options_.signing.region = "us-east-1";
    options_.signing.access_key_id = S3Endpoint::kAccessKey;
    options_.signing.secret_access_key = S3Endpoint::kSecretKey;
    options_.retry_backoff_ms = 10;
  }

  void SeedModel() {
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.model", "NOTICE.md"}) {
      ASSERT_TRUE(s3_->Put("models", std::string("stories260K/") + f,
                           std::string("models/stories260K/") + f));
    }
    // Below a subfolder: never fetched as part of the model.
    ASSERT_TRUE(s3_->Put("models", "stories260K/extra/model.safetensors",
                         "models/stories260K/config.json"));
  }

  fs::path dir_;
  std::unique_ptr<S3Endpoint> s3_;
  S3Options options_;
};

TEST_F(S3ClientTest, FetchesAModelPrefixAndSingleObjectsSignedWithSigV4) {
  StartS3();
  SeedModel();
  S3Client client(options_);
  auto listed = client.List("models", "stories260K/");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 5u);

  const std::string cache = (dir_ / "cache").string();
  auto local = client.Fetch("models", "/stories260K", cache, {"config.json", "tokenizer.model"},
                            {".safetensors"});
  ASSERT_TRUE(local.ok()) << local.status();
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.model"}) {
    EXPECT_EQ(Sha(*local + "/" + f), Sha(std::string("models/stories260K/") + f)) << f;
  }
  EXPECT_FALSE(fs::exists(*local + "/NOTICE.md"));
  EXPECT_FALSE(fs::exists(*local + "/extra"));
  // Again: the files with the same size and ETag stay as they are.
  const auto before = fs::last_write_time(*local + "/model.safetensors");
  ASSERT_TRUE(
      client.Fetch("models", "/stories260K", cache, {"config.json"}, {".safetensors"}).ok());
  EXPECT_EQ(fs::last_write_time(*local + "/model.safetensors"), before);

  // One object (a dataset, a .gguf).
  auto one = client.Fetch("models", "/stories260K/config.json", cache, {}, {});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(Sha(*one), Sha("models/stories260K/config.json"));

  auto missing = client.Fetch("models", "/nope", cache, {"config.json"}, {".safetensors"});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST_F(S3ClientTest, WrongCredentialsAreRefusedWithoutShowingThem) {
  StartS3();
  SeedModel();
  options_.signing.secret_access_key = "TheWrongSecretKey123";
  auto listed = S3Client(options_).List("models", "stories260K/");
  ASSERT_EQ(listed.status().code(), StatusCode::kPermissionDenied) << listed.status();
  EXPECT_THAT(listed.status().message(), HasSubstr("check the worker's S3 credentials"));
  EXPECT_THAT(listed.status().message(), Not(HasSubstr("TheWrongSecretKey123")));
}

TEST_F(S3ClientTest, UploadsADirectoryWithMultipartAndTheManifestLast) {
  StartS3();
  const fs::path out = dir_ / "artifact";
  fs::create_directories(out / "gguf");
  fs::copy_file("models/stories260K/config.json", out / "config.json");
  {
    // 12 MiB of noise: three parts of 5 MiB (the S3 minimum but the last).
    std::mt19937 rng(7);
    std::string big(12 << 20, '\0');
    for (char& c : big) c = static_cast<char>(rng());
    std::ofstream(out / "gguf" / "model.gguf", std::ios::binary) << big;
  }
  options_.multipart_threshold = 5 << 20;
  options_.part_bytes = 5 << 20;
  auto uploaded = S3Client(options_).UploadFiles(out.string(), {"config.json", "gguf/model.gguf"},
                                                 "artifacts", "runs/job1", "jobs/1");
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  ASSERT_EQ(uploaded->size(), 2u);

  // Read back through the AWS SDK.
  nlohmann::json listing = s3_->List("artifacts", "runs/job1/");
  std::map<std::string, std::string> sha;
  for (const auto& o : listing["objects"]) sha[o["key"]] = o["sha256"];
  EXPECT_EQ(sha["runs/job1/config.json"], Sha((out / "config.json").string()));
  EXPECT_EQ(sha["runs/job1/gguf/model.gguf"], Sha((out / "gguf" / "model.gguf").string()));
  EXPECT_EQ(sha.size(), 3u) << listing.dump();
  ASSERT_TRUE(sha.count("runs/job1/quantd-manifest.json")) << listing.dump();
  for (const auto& f : *uploaded) {
    EXPECT_EQ(f.sha256, Sha((out / f.path).string())) << f.path;
  }
}

TEST_F(S3ClientTest, AnUploadBrokenOffLeavesNoManifest) {
  // The store starts refusing after two PUTs: the third file, its retries
  // and the manifest are refused.
  StartS3({"--fail-puts-after", "2"});
  const fs::path out = dir_ / "artifact";
  fs::create_directories(out);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.model", "NOTICE.md"}) {
    fs::copy_file(std::string("models/stories260K/") + f, out / f);
  }
  auto uploaded = S3Client(options_).UploadFiles(
      out.string(), {"NOTICE.md", "config.json", "model.safetensors", "tokenizer.model"},
      "artifacts", "runs/job2", "jobs/2");
  EXPECT_EQ(uploaded.status().code(), StatusCode::kUnavailable) << uploaded.status();
  nlohmann::json listing = s3_->List("artifacts", "runs/job2/");
  EXPECT_EQ(listing["objects"].size(), 2u) << listing.dump();
  for (const auto& o : listing["objects"]) {
    EXPECT_NE(o["key"], "runs/job2/quantd-manifest.json");
  }
}

TEST_F(S3ClientTest, ResolveUriBringsAnS3ModelIntoTheDownloadCache) {
  StartS3();
  SeedModel();
  UriOptions uri;
  uri.allowed_schemes = {"s3"};
  uri.download_cache_dir = (dir_ / "downloads").string();
  uri.s3 = options_;
  uri.model_files = {"config.json", "tokenizer.model"};
  uri.model_file_suffixes = {".safetensors"};
  auto r = ResolveUri({"s3://models/stories260K", ""}, uri);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Sha(r->local_path + "/model.safetensors"), Sha("models/stories260K/model.safetensors"));
  EXPECT_TRUE(
      fs::equivalent(fs::path(r->local_path).parent_path().parent_path(), dir_ / "downloads"));
}

}  // namespace
}  // namespace quantd::io
