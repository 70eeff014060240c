// hf://datasets through the whole service: quantd, a quantd-worker, quantctl
// and tests/hub/fake_hub.py serving a dataset repository whose splits are
// sharded under data/. A job calibrated and evaluated on the Hub's splits
// gives the same artifact and perplexity as one given the same rows in
// local files, and records the dataset commits.
#include <google/protobuf/util/json_util.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/e2e/harness.h"
#include "tests/hub/fake_hub_process.h"

namespace quantd::e2e {
namespace {

namespace fs = std::filesystem;
using quantd::v1::Job;

// The paragraphs of the bundled TinyStories sample.
std::vector<std::string> Paragraphs() {
  const std::string text = ReadFile(Runfile("tests/data/tinystories-sample.txt"));
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find("\n\n", start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 2;
  }
  return out;
}

// Rows [first, last) as JSON Lines with the text under `field`.
void WriteJsonl(const std::string& path, const std::vector<std::string>& rows, size_t first,
                size_t last, const std::string& field) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path);
  for (size_t i = first; i < last && i < rows.size(); ++i) {
    std::string escaped;
    for (char c : rows[i]) {
      if (c == '"' || c == '\\') escaped += '\\';
      if (c == '\n') {
        escaped += "\\n";
        continue;
      }
      escaped += c;
    }
    out << "{\"id\": " << i << ", \"" << field << "\": \"" << escaped << "\"}\n";
  }
}

// The fake Hub serving one dataset repository (ID=DIR), quantd, and one
// worker reading the Hub; roots: the defaults, hf://datasets/tiny/ and `local`.
struct HubService {
  void Start(const std::string& data, const std::string& dataset, const std::string& local) {
    hub = testing::FakeHub::Start({"--dataset", dataset}, data + "/fake_hub");
    ASSERT_NE(hub, nullptr);
    std::vector<std::string> roots = DefaultRoots();
    roots.push_back("hf://datasets/tiny/");
    roots.push_back(local);
    quantd = Quantd::Start({.data_dir = data, .allowed_uri_roots = roots});
    ASSERT_NE(quantd, nullptr);
    fs::create_directories(data + "/w1");
    worker = StartWorker(quantd->address(), data + "/w1", "w1",
                         {AllowedRootsFlag(roots), "--hf-cache=" + data + "/hf-cache",
                          "--hf-endpoint=" + hub->Endpoint()});
    ASSERT_NE(worker, nullptr);
  }
  std::unique_ptr<testing::FakeHub> hub;
  std::unique_ptr<Quantd> quantd;
  std::unique_ptr<Process> worker;
};

Job LastJob(const CommandResult& r) {
  Job job;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(LastLine(r.stdout_text), &job).ok())
      << r.stdout_text << r.stderr_text;
  return job;
}

TEST(HubDatasetE2eTest, SplitsFromTheHubCalibrateAndEvaluateLikeTheSameLocalRows) {
  const std::string data = TempDir("hub_dataset_e2e");
  const std::vector<std::string> rows = Paragraphs();
  ASSERT_GT(rows.size(), 60u);
  const size_t half = rows.size() / 2, split = rows.size() * 3 / 4;
  // The repository: train in two shards, test in one, under data/.
  const std::string repo = TempDir("hub_dataset_e2e_repo");
  WriteJsonl(repo + "/data/train-00000-of-00002.jsonl", rows, 0, half, "story");
  WriteJsonl(repo + "/data/train-00001-of-00002.jsonl", rows, half, split, "story");
  WriteJsonl(repo + "/data/test-00000-of-00001.jsonl", rows, split, rows.size(), "text");
  std::ofstream(repo + "/README.md") << "TinyStories paragraphs\n";
  // The same rows as local files.
  WriteJsonl(data + "/local/train.jsonl", rows, 0, split, "text");
  WriteJsonl(data + "/local/test.jsonl", rows, split, rows.size(), "text");

  HubService service;
  ASSERT_NO_FATAL_FAILURE(service.Start(data, "tiny/stories=" + repo, data + "/local"));
  const auto& hub = service.hub;
  const auto& quantd = service.quantd;
  const auto& worker = service.worker;

  auto submit = [&](const std::string& calib, const std::string& eval, const std::string& out) {
    return Quantctl(quantd->address(), {"-o",
                                        "json",
                                        "submit",
                                        "--model",
                                        Runfile("models/stories260K"),
                                        "--scheme",
                                        "w_int4_per_channel_sym",
                                        "--algorithm",
                                        "gptq",
                                        "--calib",
                                        calib,
                                        "--calib-samples",
                                        "8",
                                        "--calib-seq-len",
                                        "64",
                                        "--eval",
                                        eval,
                                        "--eval-windows",
                                        "4",
                                        "--output",
                                        data + "/" + out,
                                        "--wait"});
  };
  CommandResult from_hub = submit("hf://datasets/tiny/stories?split=train&field=story",
                                  "hf://datasets/tiny/stories?split=test", "out-hub");
  ASSERT_EQ(from_hub.exit_code, 0) << from_hub.stderr_text << from_hub.stdout_text << worker->Log();
  CommandResult local =
      submit(data + "/local/train.jsonl", data + "/local/test.jsonl", "out-local");
  ASSERT_EQ(local.exit_code, 0) << local.stderr_text << local.stdout_text;
  CommandResult from_files =
      Quantctl(quantd->address(),
               {"-o", "json", "submit", "--model", Runfile("models/stories260K"), "--scheme",
                "w_int4_per_channel_sym", "--algorithm", "gptq", "--calib",
                "hf://datasets/tiny/stories?file=data/train-00000-of-00002.jsonl&field=story",
                "--calib-samples", "8", "--calib-seq-len", "64", "--no-eval", "--output",
                data + "/out-file", "--wait"});
  ASSERT_EQ(from_files.exit_code, 0) << from_files.stderr_text << from_files.stdout_text;

  const Job hub_job = LastJob(from_hub);
  const std::string commit = ReadFile(data + "/hf-cache/datasets--tiny--stories/refs/main");
  ASSERT_EQ(commit.size(), 40u);
  EXPECT_EQ(hub_job.result().calibration_dataset_revision(), commit);
  EXPECT_EQ(hub_job.result().evaluation_dataset_revision(), commit);
  EXPECT_EQ(hub_job.result().resolved_revision(), "");  // the model is local
  // Only the two splits' files crossed the network.
  EXPECT_EQ(
      hub->Gets("/datasets/tiny/stories/resolve/" + commit + "/data/train-00001-of-00002.jsonl")
          .size(),
      1u)
      << hub->LogText();
  EXPECT_TRUE(hub->Gets("/datasets/tiny/stories/resolve/" + commit + "/README.md").empty());
  bool logged = false;
  auto api = quantd->NewClient();
  for (const auto& ev : Events(*api, hub_job.name())) {
    logged |= ev.has_log() &&
              ev.log().message().find("spec.calibration.dataset_uri tiny/stories:train: commit " +
                                      commit) != std::string::npos;
  }
  EXPECT_TRUE(logged);
  // The same rows, the same job: shards read in order, rows joined alike.
  const Job local_job = LastJob(local);
  EXPECT_GT(hub_job.result().metrics().quantized_perplexity().perplexity(), 1.0);
  EXPECT_EQ(hub_job.result().metrics().quantized_perplexity().perplexity(),
            local_job.result().metrics().quantized_perplexity().perplexity());
  EXPECT_EQ(hub_job.result().metrics().float_perplexity().perplexity(),
            local_job.result().metrics().float_perplexity().perplexity());
  EXPECT_EQ(ReadFile(data + "/out-hub/model.safetensors"),
            ReadFile(data + "/out-local/model.safetensors"));
  EXPECT_EQ(local_job.result().calibration_dataset_revision(), "");
  EXPECT_EQ(LastJob(from_files).result().calibration_dataset_revision(), commit);
}

// A chat dataset in Parquet (tests/data/parquet/tinystories_chat.parquet,
// written by hyparquet-writer): its `messages` rendered with the model's
// chat template calibrate the job, and its `text` column evaluates it just
// as the same rows in a local JSON Lines file do.
TEST(HubDatasetE2eTest, ParquetChatConversationsRenderWithTheModelsTemplate) {
  const std::string data = TempDir("hub_chat_e2e");
  const std::string repo = TempDir("hub_chat_e2e_repo");
  fs::create_directories(repo + "/data");
  fs::copy_file(Runfile("tests/data/parquet/tinystories_chat.parquet"),
                repo + "/data/train_sft-00000-of-00001.parquet");
  // stories260K with a ChatML-style template, and without one.
  const std::string model = data + "/inputs/chat-model", plain = data + "/inputs/plain-model";
  for (const std::string& dir : {model, plain}) {
    fs::create_directories(dir);
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.model"})
      fs::copy_file(Runfile(std::string("models/stories260K/") + f), dir + "/" + f);
  }
  std::ofstream(model + "/chat_template.jinja")
      << "{% for m in messages %}{{ '<|' + m['role'] + '|>\\n' + m['content'] | trim }}\n"
         "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}";
  // The text column's first 96 paragraphs as local JSON Lines.
  std::vector<std::string> rows = Paragraphs();
  rows.resize(96);
  WriteJsonl(data + "/inputs/text.jsonl", rows, 0, rows.size(), "text");

  HubService service;
  ASSERT_NO_FATAL_FAILURE(service.Start(data, "tiny/chat=" + repo, data + "/inputs"));
  const auto& quantd = service.quantd;
  const auto& worker = service.worker;
  const std::vector<std::string> hub_chat = {
      "--calib", "hf://datasets/tiny/chat?split=train_sft&field=messages"};
  auto submit = [&](const std::string& m, std::vector<std::string> calib, const std::string& eval,
                    const std::string& out) {
    std::vector<std::string> argv = {
        "-o",          "json", "submit", "--model", m, "--scheme", "w_int4_per_channel_sym",
        "--algorithm", "gptq"};
    argv.insert(argv.end(), calib.begin(), calib.end());
    for (const std::string& a :
         {std::string("--calib-samples"), std::string("8"), std::string("--calib-seq-len"),
          std::string("64"), std::string("--eval"), eval, std::string("--eval-windows"),
          std::string("4"), std::string("--output"), data + "/" + out, std::string("--wait")})
      argv.push_back(a);
    return Quantctl(quantd->address(), argv);
  };
  CommandResult chat =
      submit(model, hub_chat, "hf://datasets/tiny/chat?split=train_sft", "out-chat");
  ASSERT_EQ(chat.exit_code, 0) << chat.stderr_text << chat.stdout_text << worker->Log();
  CommandResult local = submit(model, hub_chat, data + "/inputs/text.jsonl", "out-local");
  ASSERT_EQ(local.exit_code, 0) << local.stderr_text << local.stdout_text;
  // The same Parquet file given locally, its column named by --calib-field.
  fs::copy_file(Runfile("tests/data/parquet/tinystories_chat.parquet"),
                data + "/inputs/chat.parquet");
  CommandResult local_chat =
      submit(model, {"--calib", data + "/inputs/chat.parquet", "--calib-field", "messages"},
             data + "/inputs/text.jsonl", "out-local-chat");
  ASSERT_EQ(local_chat.exit_code, 0) << local_chat.stderr_text << local_chat.stdout_text;
  EXPECT_EQ(ReadFile(data + "/out-local-chat/model.safetensors"),
            ReadFile(data + "/out-local/model.safetensors"));
  const Job chat_job = LastJob(chat), local_job = LastJob(local);
  EXPECT_EQ(chat_job.result().evaluation_dataset_revision().size(), 40u);
  // The Parquet text column evaluates as the same rows in JSON Lines.
  EXPECT_GT(chat_job.result().metrics().float_perplexity().perplexity(), 1.0);
  EXPECT_EQ(chat_job.result().metrics().float_perplexity().perplexity(),
            local_job.result().metrics().float_perplexity().perplexity());
  EXPECT_EQ(ReadFile(data + "/out-chat/model.safetensors"),
            ReadFile(data + "/out-local/model.safetensors"));
  auto api = quantd->NewClient();
  bool rendered = false;
  for (const auto& ev : Events(*api, chat_job.name())) {
    rendered |= ev.has_log() && ev.log().message() ==
                                    "dataset tiny/chat:train_sft: 96 conversations rendered "
                                    "with the model's chat template";
  }
  EXPECT_TRUE(rendered);

  // A model without a chat template cannot take chat data: the job fails
  // naming the dataset, and the queue goes on.
  CommandResult no_template = submit(plain, hub_chat, data + "/inputs/text.jsonl", "out-plain");
  EXPECT_NE(no_template.exit_code, 0);
  const Job failed = LastJob(no_template);
  EXPECT_EQ(failed.state(), quantd::v1::FAILED);
  EXPECT_EQ(failed.error().code(), 9) << failed.error().message();  // FAILED_PRECONDITION
  EXPECT_NE(failed.error().message().find("dataset tiny/chat:train_sft holds chat messages and "
                                          "the model has no chat template"),
            std::string::npos)
      << failed.error().message();
}

}  // namespace
}  // namespace quantd::e2e
