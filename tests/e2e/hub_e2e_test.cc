// hf:// models through the whole service: quantd, two quantd-worker
// processes sharing one Hub cache, quantctl, and tests/hub/fake_hub.py as the
// Hub, serving stories260K as a private repository whose first transfer of
// each file breaks off.
#include <google/protobuf/util/json_util.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "gtest/gtest.h"
#include "tests/e2e/harness.h"
#include "tests/hub/fake_hub_process.h"

namespace quantd::e2e {
namespace {

namespace fs = std::filesystem;
using quantd::v1::Job;

constexpr char kToken[] = "hf_E2eSecretTokenNeverLogged42";

TEST(HubE2eTest, TwoWorkersQuantizeAPrivateHubModelDownloadedOnceAndNeverLogTheToken) {
  const std::string data = TempDir("hub_e2e");
  // The repositories' files (copies: runfiles are symlinks, which a Hub
  // does not serve).
  const std::string repos = TempDir("hub_e2e_repos");
  fs::create_directories(repos + "/model");
  fs::create_directories(repos + "/text");
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.model", "NOTICE.md"}) {
    fs::copy_file(Runfile(std::string("models/stories260K/") + f), repos + "/model/" + f);
  }
  fs::copy_file(Runfile("tests/data/tinystories-sample.txt"),
                repos + "/text/tinystories-sample.txt");
  auto hub = testing::FakeHub::Start(
      {"--model", "karpathy/stories260K=" + repos + "/model", "--dataset",
       "tiny/stories=" + repos + "/text", "--private", "karpathy/stories260K", "--token", kToken,
       "--drop-after-bytes", "300000", "--bytes-per-second", "4000000"},
      data + "/fake_hub");
  ASSERT_NE(hub, nullptr);
  const std::string token_file = data + "/hf-token";
  std::ofstream(token_file) << kToken << "\n";

  std::vector<std::string> roots = DefaultRoots();
  roots.push_back("hf://karpathy/");
  roots.push_back(hub->Endpoint() + "/datasets/tiny/");
  auto quantd = Quantd::Start({.data_dir = data, .allowed_uri_roots = roots});
  ASSERT_NE(quantd, nullptr);
  const std::string cache = data + "/hf-cache";
  std::vector<std::unique_ptr<Process>> workers;
  for (const char* id : {"w1", "w2"}) {
    fs::create_directories(data + "/" + id);
    workers.push_back(
        StartWorker(quantd->address(), data + "/" + id, id,
                    {AllowedRootsFlag(roots), "--hf-cache=" + cache,
                     "--hf-endpoint=" + hub->Endpoint(), "--hf-token-file=" + token_file}));
  }

  // Both workers poll before the jobs arrive, so each takes one of the two.
  ASSERT_TRUE(WaitUntil([&] {
    return workers[0]->Log().find("leasing from") != std::string::npos &&
           workers[1]->Log().find("leasing from") != std::string::npos;
  })) << workers[0]->Log()
      << workers[1]->Log();
  std::vector<std::string> names;
  for (int i = 0; i < 2; ++i) {
    CommandResult r =
        Quantctl(quantd->address(),
                 {"-o", "json", "submit", "--model", "hf://karpathy/stories260K", "--scheme",
                  "w_int8_per_channel_sym", "--eval", Runfile("tests/data/tinystories-sample.txt"),
                  "--eval-windows", "4", "--output", data + "/out" + std::to_string(i)});
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text << r.stdout_text;
    Job submitted;  // without --wait, the job as indented JSON
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.stdout_text, &submitted).ok())
        << r.stdout_text;
    names.push_back(submitted.name());
  }
  auto api = quantd->NewClient();
  std::set<std::string> workers_used;
  std::string events_text;
  for (const std::string& name : names) {
    Job job = WaitForJob(*api, name);
    ASSERT_EQ(job.state(), quantd::v1::SUCCEEDED)
        << job.error().message() << workers[0]->Log() << workers[1]->Log();
    workers_used.insert(job.worker());
    ASSERT_EQ(job.result().resolved_revision().size(), 40u);
    EXPECT_TRUE(fs::exists(job.result().artifacts(0).uri().substr(7) + "/model.safetensors"));
    std::string json;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(job, &json).ok());
    events_text += json;
    bool logged_commit = false;
    for (const auto& ev : Events(*api, name)) {
      std::string e;
      ASSERT_TRUE(google::protobuf::util::MessageToJsonString(ev, &e).ok());
      events_text += e;
      logged_commit |=
          ev.has_log() && ev.log().message().find("commit " + job.result().resolved_revision()) !=
                              std::string::npos;
    }
    EXPECT_TRUE(logged_commit) << events_text;
  }
  std::string commit = ReadFile(cache + "/models--karpathy--stories260K/refs/main");
  EXPECT_EQ(GetJob(*api, names[0]).result().resolved_revision(), commit);
  EXPECT_EQ(workers_used.size(), 2u) << "both workers should have run a job";

  // One cache, so each file crossed the network once: the weights in two
  // pieces (the first transfer broke off at 300000 bytes and was resumed).
  const std::string weights = testing::FileSha256(Runfile("models/stories260K/model.safetensors"));
  const auto cdn = hub->Gets("/cdn/" + weights);
  ASSERT_EQ(cdn.size(), 2u) << hub->LogText();
  EXPECT_EQ(cdn[1]["range"], "bytes=300000-");
  EXPECT_EQ(hub->Gets("/karpathy/stories260K/resolve/" + commit + "/config.json").size(), 1u);

  // Pinning the commit reruns on the same files, from the cache; the
  // evaluation text now comes over http from the Hub's dataset repository.
  const size_t before = hub->Requests().size();
  const std::string text_url =
      hub->Endpoint() + "/datasets/tiny/stories/resolve/main/tinystories-sample.txt";
  CommandResult pinned = Quantctl(
      quantd->address(), {"-o", "json", "submit", "--model", "hf://karpathy/stories260K@" + commit,
                          "--scheme", "w_int8_per_channel_sym", "--eval", text_url,
                          "--eval-windows", "4", "--output", data + "/out-pinned", "--wait"});
  ASSERT_EQ(pinned.exit_code, 0) << pinned.stderr_text << pinned.stdout_text;
  EXPECT_EQ(hub->Requests().size(), before + 2);  // the listing and the text
  Job pinned_job;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(LastLine(pinned.stdout_text), &pinned_job).ok());
  EXPECT_EQ(pinned_job.result().resolved_revision(), commit);
  EXPECT_EQ(pinned_job.result().metrics().quantized_perplexity().perplexity(),
            GetJob(*api, names[0]).result().metrics().quantized_perplexity().perplexity());
  EXPECT_EQ(ReadFile(data + "/out-pinned/model.safetensors"),
            ReadFile(data + "/out0/model.safetensors"));

  // A repository that does not exist fails its job, naming it.
  CommandResult missing = Quantctl(
      quantd->address(), {"-o", "json", "submit", "--model", "hf://karpathy/nope", "--scheme",
                          "w_int8_per_channel_sym", "--output", data + "/out-missing", "--wait"});
  EXPECT_NE(missing.exit_code, 0);
  Job failed;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(LastLine(missing.stdout_text), &failed).ok())
      << missing.stdout_text << missing.stderr_text;
  EXPECT_EQ(failed.state(), quantd::v1::FAILED);
  EXPECT_NE(failed.error().message().find("hf://karpathy/nope@main: no such repository"),
            std::string::npos)
      << failed.error().message();

  // The token reached the Hub and nowhere else: not the logs, the events,
  // the job records, or the store.
  for (auto& w : workers) w->Stop(SIGTERM);
  quantd->Stop();
  const std::vector<std::pair<std::string, std::string>> places = {
      {"quantd log", quantd->Log()},
      {"worker w1 log", workers[0]->Log()},
      {"worker w2 log", workers[1]->Log()},
      {"events and jobs", events_text + pinned.stdout_text + missing.stdout_text},
      {"job store", ReadFile(data + "/quantd.db") + ReadFile(data + "/quantd.db-wal")},
      {"hub request log", hub->LogText()}};
  for (const auto& [where, text] : places) {
    EXPECT_FALSE(text.empty()) << where;
    EXPECT_EQ(text.find(kToken), std::string::npos) << "the token is in the " << where;
  }
}

}  // namespace
}  // namespace quantd::e2e
