// s3:// through the whole service: quantd, a quantd-worker with S3
// credentials from a mounted file, quantctl, and tests/peers/s3_server.mjs
// (s3rver, every request's SigV4 signature checked with AWS's own signer)
// holding the model, the evaluation text and the artifacts, which the AWS
// SDK for JavaScript reads back.
#include <google/protobuf/util/json_util.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "gtest/gtest.h"
#include "tests/e2e/harness.h"
#include "tests/peers/s3_endpoint.h"

namespace quantd::e2e {
namespace {

namespace fs = std::filesystem;
using quantd::v1::Job;

constexpr char kSecret[] = "e2eS3SecretKeyNeverLogged0123456789";

TEST(S3E2eTest, AJobReadsItsModelAndTextFromS3AndUploadsItsArtifactsThere) {
  const std::string data = TempDir("s3_e2e");
  auto s3 = testing::S3Endpoint::Start(TempDir("s3_e2e_store"), {"models", "data", "artifacts"}, {},
                                       kSecret);
  ASSERT_NE(s3, nullptr);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.model", "NOTICE.md"}) {
    ASSERT_TRUE(s3->Put("models", std::string("stories260K/") + f,
                        Runfile(std::string("models/stories260K/") + f)));
  }
  ASSERT_TRUE(
      s3->Put("data", "text/tinystories-sample.txt", Runfile("tests/data/tinystories-sample.txt")));
  // The worker's credentials, as a mounted secret would hold them.
  const std::string credentials = data + "/aws-credentials";
  std::ofstream(credentials) << "[default]\naws_access_key_id = " << testing::S3Endpoint::kAccessKey
                             << "\naws_secret_access_key = " << kSecret << "\n";

  std::vector<std::string> roots = DefaultRoots();
  for (const char* r : {"s3://models/", "s3://data/text", "s3://artifacts/runs"})
    roots.push_back(r);
  auto quantd = Quantd::Start({.data_dir = data, .allowed_uri_roots = roots});
  ASSERT_NE(quantd, nullptr);
  fs::create_directories(data + "/w1");
  auto worker = StartWorker(quantd->address(), data + "/w1", "w1",
                            {AllowedRootsFlag(roots), "--s3-endpoint=" + s3->Url(),
                             "--s3-credentials-file=" + credentials});

  CommandResult r =
      Quantctl(quantd->address(),
               {"-o", "json", "submit", "--model", "s3://models/stories260K", "--scheme",
                "w_int8_per_channel_sym", "--eval", "s3://data/text/tinystories-sample.txt",
                "--eval-windows", "4", "--format", "hf", "--format", "hf-quark", "--output",
                "s3://artifacts/runs/job1", "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text << r.stdout_text << worker->Log();
  Job job;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(LastLine(r.stdout_text), &job).ok())
      << r.stdout_text;
  ASSERT_EQ(job.state(), quantd::v1::SUCCEEDED) << job.error().message();
  EXPECT_GT(job.result().metrics().float_perplexity().perplexity(), 1);

  // Each artifact points at the store, and what the AWS SDK reads there is
  // what the job measured, with the manifest beside it.
  nlohmann::json listing = s3->List("artifacts", "runs/job1/");
  std::map<std::string, std::string> stored;
  for (const auto& o : listing["objects"]) stored[o["key"]] = o["sha256"];
  ASSERT_EQ(job.result().artifacts_size(), 2);
  size_t files = 0;
  for (const auto& a : job.result().artifacts()) {
    ASSERT_EQ(a.uri().rfind("s3://artifacts/runs/job1/", 0), 0u) << a.uri();
    const std::string prefix = a.uri().substr(std::string("s3://artifacts/").size());
    EXPECT_TRUE(stored.count(prefix + "/quantd-manifest.json")) << listing.dump();
    for (const auto& f : a.files()) {
      EXPECT_EQ(stored[prefix + "/" + f.path()], f.sha256()) << f.path();
      ++files;
    }
  }
  EXPECT_EQ(stored.size(), files + 2) << listing.dump();  // and the two manifests
  // Nothing is left in the worker's local staging directory.
  EXPECT_FALSE(fs::exists(data + "/w1/artifacts/" + job.name().substr(5) + "-upload"));

  // An output outside the s3 roots is refused at CreateJob.
  CommandResult outside =
      Quantctl(quantd->address(),
               {"submit", "--model", "s3://models/stories260K", "--scheme",
                "w_int8_per_channel_sym", "--no-eval", "--output", "s3://artifacts/other/x"});
  EXPECT_NE(outside.exit_code, 0);
  EXPECT_NE(outside.stderr_text.find("is outside the allowed output locations"), std::string::npos)
      << outside.stderr_text << outside.stdout_text;

  // The secret key reached the store's signatures and nothing else.
  std::string events;
  auto api = quantd->NewClient();
  for (const auto& ev : Events(*api, job.name())) {
    std::string e;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(ev, &e).ok());
    events += e;
  }
  worker->Stop(SIGTERM);
  quantd->Stop();
  const std::vector<std::pair<std::string, std::string>> places = {
      {"quantd log", quantd->Log()},
      {"worker log", worker->Log()},
      {"events and job", events + r.stdout_text},
      {"job store", ReadFile(data + "/quantd.db") + ReadFile(data + "/quantd.db-wal")}};
  for (const auto& [where, text] : places) {
    EXPECT_FALSE(text.empty()) << where;
    EXPECT_EQ(text.find(kSecret), std::string::npos) << "the secret key is in the " << where;
  }
}

}  // namespace
}  // namespace quantd::e2e
