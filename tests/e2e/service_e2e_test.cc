// The whole service on loopback: quantd (SQLite), worker processes, quantctl,
// the engine, and the exported artifact, with real processes throughout.
#include <google/protobuf/util/json_util.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"
#include "worker/common/sha256.h"
#include "worker/io/safetensors/safetensors_source.h"
#include "worker/quant/fake_quant.h"

namespace quantd::e2e {
namespace {

namespace fs = std::filesystem;
using quantd::v1::Job;

std::string Model() { return Runfile("models/stories260K"); }
std::string EvalText() { return Runfile("tests/data/tinystories-sample.txt"); }

Job ParseJob(const std::string& json) {
  Job job;
  auto s = google::protobuf::util::JsonStringToMessage(json, &job);
  EXPECT_TRUE(s.ok()) << s.ToString() << "\n" << json;
  return job;
}

// A copy of stories260K whose files a test can break.
std::string CopyModel(const std::string& name) {
  std::string dir = TempDir(name);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.model"})
    fs::copy_file(Model() + "/" + f, dir + "/" + f);
  return dir;
}

TEST(ServiceE2eTest, QuantizesStories260KThroughQuantctlAndExportsTheFakeQuantizedModel) {
  const std::string data = TempDir("e2e_main");
  auto quantd = Quantd::Start({.data_dir = data, .local_workers = 1});
  ASSERT_NE(quantd, nullptr);
  const std::string out = data + "/out";
  CommandResult r =
      Quantctl(quantd->address(), {"-o", "json", "submit", "--model", Model(), "--scheme",
                                   "w_int8_per_channel_sym", "--eval", EvalText(), "--eval-windows",
                                   "20", "--output", out, "--label", "suite=e2e", "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text << r.stdout_text << quantd->Log();
  Job job = ParseJob(LastLine(r.stdout_text));
  EXPECT_EQ(job.state(), quantd::v1::SUCCEEDED);
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.spec().labels().at("suite"), "e2e");

  // Metrics: float perplexity of the first 20 windows is the golden 4.8374.
  const auto& m = job.result().metrics();
  EXPECT_NEAR(m.float_perplexity().perplexity(), 4.8374, 1e-3);
  EXPECT_EQ(m.float_perplexity().protocol().n_ctx(), 256);
  EXPECT_EQ(m.float_perplexity().protocol().windows(), 20);
  EXPECT_EQ(m.float_perplexity().protocol().tokens(), 5100);
  EXPECT_GT(m.quantized_perplexity().perplexity(), 0);
  EXPECT_LT(std::abs(m.quantized_perplexity().perplexity() / m.float_perplexity().perplexity() - 1),
            0.02);
  ASSERT_EQ(m.blocks_size(), 5);
  EXPECT_EQ(m.blocks(0).layers_size(), 7);
  EXPECT_EQ(m.blocks(0).block_count(), 5);

  // The event stream carried per-block metrics and progress.
  int block_events = 0, progress_events = 0;
  std::vector<std::string> lines = absl::StrSplit(r.stdout_text, '\n', absl::SkipEmpty());
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    quantd::v1::JobEvent ev;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(lines[i], &ev).ok()) << lines[i];
    if (ev.has_block_metrics()) ++block_events;
    if (ev.has_progress()) ++progress_events;
  }
  EXPECT_EQ(block_events, 5);
  EXPECT_GT(progress_events, 3);

  // The artifact: its sha256 matches the file, and the weights are exactly
  // the engine's fake quantization of the originals.
  ASSERT_EQ(job.result().artifacts_size(), 1);
  const auto& art = job.result().artifacts(0);
  EXPECT_EQ(art.uri(), "file://" + out);
  EXPECT_TRUE(art.accepted());
  EXPECT_EQ(art.sha256(), *Sha256File(out + "/model.safetensors"));
  int64_t total = 0;
  for (const auto& f : art.files()) {
    EXPECT_EQ(f.sha256(), *Sha256File(out + "/" + f.path())) << f.path();
    total += f.bytes();
  }
  EXPECT_EQ(art.bytes(), total);
  quant::QuantSpec spec;
  spec.dtype = quant::DataType::kInt8;
  spec.qscheme = quant::QScheme::kPerChannel;
  spec.ch_axis = 0;
  auto original = io::SafetensorsSource::Open(Model() + "/model.safetensors");
  auto exported = io::SafetensorsSource::Open(out + "/model.safetensors");
  ASSERT_TRUE(exported.ok()) << exported.status();
  int quantized = 0;
  for (const auto& name : (*original)->Names()) {
    at::Tensor w = *(*original)->Load(name);
    at::Tensor want = w;
    const bool linear =
        name.rfind("model.layers.", 0) == 0 && name.find("_proj.weight") != std::string::npos;
    if (linear) {
      want = *quant::FakeQuantize(w, spec, *quant::ComputeQParams(w, spec));
      ++quantized;
    }
    EXPECT_TRUE(at::equal(*(*exported)->Load(name), want)) << name;
  }
  EXPECT_EQ(quantized, 35);
  std::ifstream cfg(out + "/config.json");
  std::string cfg_text((std::istreambuf_iterator<char>(cfg)), std::istreambuf_iterator<char>());
  EXPECT_NE(cfg_text.find("\"quantization_config\""), std::string::npos);
  EXPECT_TRUE(fs::exists(out + "/tokenizer.model"));

  // Text views of the same job.
  CommandResult get = Quantctl(quantd->address(), {"get", job.name()});
  EXPECT_EQ(get.exit_code, 0);
  EXPECT_NE(get.stdout_text.find("state:      SUCCEEDED"), std::string::npos) << get.stdout_text;
  EXPECT_NE(get.stdout_text.find("perplexity float:     4.837"), std::string::npos)
      << get.stdout_text;
  CommandResult list = Quantctl(quantd->address(), {"list", "--label", "suite=e2e"});
  EXPECT_NE(list.stdout_text.find(job.name()), std::string::npos) << list.stdout_text;
}

TEST(ServiceE2eTest, ExportsEveryFormatThroughQuantctl) {
  const std::string data = TempDir("e2e_formats");
  auto quantd = Quantd::Start({.data_dir = data, .local_workers = 1});
  ASSERT_NE(quantd, nullptr);
  const std::string out = data + "/stories-int8";
  CommandResult r = Quantctl(
      quantd->address(),
      {"-o", "json", "submit", "--model", Model(), "--scheme", "w_int8_per_channel_sym", "--eval",
       EvalText(), "--eval-windows", "4", "--format", "hf", "--format", "hf-quark", "--format",
       "gguf", "--format", "onnx", "--output", out, "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text << r.stdout_text << quantd->Log();
  Job job = ParseJob(LastLine(r.stdout_text));
  ASSERT_EQ(job.state(), quantd::v1::SUCCEEDED) << job.error().message();
  ASSERT_EQ(job.result().artifacts_size(), 4);
  const std::vector<std::pair<quantd::v1::ExportFormat, std::string>> expected = {
      {quantd::v1::HF_FAKE_QUANTIZED, "hf_fake_quantized"},
      {quantd::v1::HF_QUARK, "hf_quark"},
      {quantd::v1::GGUF, "gguf"},
      {quantd::v1::ONNX_QDQ, "onnx_qdq"}};
  for (int i = 0; i < 4; ++i) {
    const auto& a = job.result().artifacts(i);
    EXPECT_EQ(a.format(), expected[i].first);
    EXPECT_EQ(a.uri(), "file://" + out + "/" + expected[i].second);
    EXPECT_TRUE(a.accepted());
  }

  // The real-quantized weights (int8 codes x per-channel scale) are exactly
  // the fake-quantized export's values.
  auto fake = io::SafetensorsSource::Open(out + "/hf_fake_quantized");
  auto quark = io::SafetensorsSource::Open(out + "/hf_quark");
  ASSERT_TRUE(fake.ok()) << fake.status();
  ASSERT_TRUE(quark.ok()) << quark.status();
  int compared = 0;
  for (const std::string& name : (*fake)->Names()) {
    if (name.find("_proj.weight") == std::string::npos) continue;
    const std::string module = name.substr(0, name.size() - 7);
    ASSERT_NE((*quark)->Find(name), nullptr) << name;
    EXPECT_EQ((*quark)->Find(name)->dtype, "I8") << name;
    at::Tensor codes = *(*quark)->Load(name, at::kFloat);
    at::Tensor scale = *(*quark)->Load(module + ".weight_scale", at::kFloat);
    at::Tensor values = *(*fake)->Load(name, at::kFloat);
    EXPECT_TRUE(at::equal(codes * scale.reshape({-1, 1}), values)) << name;
    ++compared;
  }
  EXPECT_EQ(compared, 35);

  // GGUF and ONNX: their magic / protobuf start, and the artifact's sha256 is the file's.
  for (const auto& [file, magic] : std::vector<std::pair<std::string, std::string>>{
           {out + "/gguf/model.gguf", "GGUF"}, {out + "/onnx_qdq/model.onnx", "\x08"}}) {
    std::ifstream in(file, std::ios::binary);
    ASSERT_TRUE(in.good()) << file;
    std::string head(4, '\0');
    in.read(head.data(), 4);
    EXPECT_EQ(head.substr(0, magic.size()), magic) << file;
  }
  EXPECT_EQ(job.result().artifacts(2).sha256(), *Sha256File(out + "/gguf/model.gguf"));

  // Round trip: the hf-quark export is the next job's model; with the same
  // scheme it writes the same hf-quark bytes, and a compressed-tensors
  // export that is in turn the model of a third job comes back identical.
  const std::string again = data + "/again", third = data + "/third";
  r = Quantctl(quantd->address(), {"-o", "json", "submit", "--model", out + "/hf_quark", "--scheme",
                                   "w_int8_per_channel_sym", "--no-eval", "--format", "hf-quark",
                                   "--format", "compressed-tensors", "--output", again, "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text << r.stdout_text << quantd->Log();
  EXPECT_EQ(*Sha256File(again + "/hf_quark/model.safetensors"),
            *Sha256File(out + "/hf_quark/model.safetensors"));
  EXPECT_EQ(*Sha256File(again + "/hf_quark/config.json"),
            *Sha256File(out + "/hf_quark/config.json"));
  r = Quantctl(quantd->address(), {"-o", "json", "submit", "--model", again + "/compressed_tensors",
                                   "--scheme", "w_int8_per_channel_sym", "--no-eval", "--format",
                                   "compressed-tensors", "--output", third, "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text << r.stdout_text << quantd->Log();
  EXPECT_EQ(*Sha256File(third + "/model.safetensors"),
            *Sha256File(again + "/compressed_tensors/model.safetensors"));

  // A format that cannot express the scheme is refused at submit, naming it.
  r = Quantctl(quantd->address(), {"submit", "--model", Model(), "--scheme", "w_mxfp6_e2m3",
                                   "--format", "gguf", "--no-eval", "--output", data + "/mx"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_text.find("spec.export.formats[0]"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("mxfp6_e2m3"), std::string::npos) << r.stderr_text;
}

TEST(ServiceE2eTest, JobsSurviveAFrontendRestart) {
  const std::string data = TempDir("e2e_restart");
  std::vector<std::string> names;
  {
    auto quantd = Quantd::Start({.data_dir = data});
    ASSERT_NE(quantd, nullptr);
    for (int i = 0; i < 3; ++i) {
      CommandResult r = Quantctl(quantd->address(),
                                 {"submit", "--model", Model(), "--scheme", "w_int8_per_tensor_sym",
                                  "--no-eval", "--output", data + "/out" + std::to_string(i)});
      ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
      names.push_back(LastLine(r.stdout_text));
    }
    quantd->Stop();
  }
  auto quantd = Quantd::Start({.data_dir = data});
  ASSERT_NE(quantd, nullptr);
  auto api = quantd->NewClient();
  for (const auto& name : names) {
    grpc::ClientContext ctx;
    quantd::v1::GetJobRequest req;
    req.set_name(name);
    Job job;
    ASSERT_TRUE(api->GetJob(&ctx, req, &job).ok()) << name;
    EXPECT_EQ(job.state(), quantd::v1::QUEUED) << name;
  }
  auto worker = StartWorker(quantd->address(), data, "w-restart");
  for (const auto& name : names) {
    Job job = WaitForJob(*api, name);
    EXPECT_EQ(job.state(), quantd::v1::SUCCEEDED) << name << "\n" << worker->Log();
    EXPECT_EQ(job.result().artifacts_size(), 1);
  }
}

TEST(ServiceE2eTest, KilledWorkerLosesItsLeaseAndTheJobCompletesOnAttempt2) {
  const std::string data = TempDir("e2e_crash");
  auto quantd = Quantd::Start({.data_dir = data, .lease_duration = "2s"});
  ASSERT_NE(quantd, nullptr);
  auto api = quantd->NewClient();
  // Evaluating every window of the text keeps the job busy long enough.
  const std::vector<std::string> submit = {
      "submit", "--model",  Model(),          "--scheme", "w_uint4_per_channel_asym",
      "--eval", EvalText(), "--eval-windows", "200"};
  std::vector<std::string> args = submit;
  args.insert(args.end(), {"--output", data + "/out"});
  CommandResult r = Quantctl(quantd->address(), args);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const std::string name = LastLine(r.stdout_text);
  auto first = StartWorker(quantd->address(), data, "w-first");
  // Wait until the first worker is mid-job (its progress reached the quantized blocks).
  Job job;
  // Every block is checkpointed once evaluation starts.
  WaitUntil([&] {
    job = GetJob(*api, name);
    return IsTerminal(job.state()) ||
           (job.state() == quantd::v1::RUNNING && job.progress().stage() == quantd::v1::EVALUATE);
  });
  ASSERT_EQ(job.state(), quantd::v1::RUNNING) << first->Log();
  EXPECT_EQ(job.worker(), "w-first");
  ASSERT_NE(first->Stop(SIGKILL), -1);
  auto second = StartWorker(quantd->address(), data, "w-second");
  job = WaitForJob(*api, name);
  EXPECT_EQ(job.state(), quantd::v1::SUCCEEDED) << second->Log() << quantd->Log();
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(job.worker(), "w-second");
  EXPECT_GT(job.result().metrics().quantized_perplexity().perplexity(), 0);
  EXPECT_EQ(job.result().metrics().blocks_size(), 5);

  // The second attempt resumed from the first one's checkpoint instead of
  // quantizing again, and says so in the events.
  bool resumed = false;
  int block_events = 0;
  for (const auto& ev : Events(*api, name)) {
    if (ev.has_log() &&
        ev.log().message().find("resumed after the last block (5/5)") != std::string::npos)
      resumed = ev.attempt() == 2;
    if (ev.has_block_metrics()) ++block_events;
  }
  EXPECT_TRUE(resumed);
  EXPECT_EQ(block_events, 5);  // no block was quantized twice

  // The resumed job's artifact is byte-identical to an uninterrupted run's.
  args = submit;
  args.insert(args.end(), {"--output", data + "/out-uninterrupted", "--wait"});
  CommandResult again = Quantctl(quantd->address(), args);
  ASSERT_EQ(again.exit_code, 0) << again.stderr_text;
  auto resumed_sha = Sha256File(data + "/out/model.safetensors");
  auto clean_sha = Sha256File(data + "/out-uninterrupted/model.safetensors");
  ASSERT_TRUE(resumed_sha.ok() && clean_sha.ok());
  EXPECT_EQ(*resumed_sha, *clean_sha);
}

TEST(ServiceE2eTest, BadInputGetsClearErrorsAndTheServiceKeepsServing) {
  const std::string data = TempDir("e2e_bad");
  auto quantd = Quantd::Start({.data_dir = data, .local_workers = 1});
  ASSERT_NE(quantd, nullptr);
  auto api = quantd->NewClient();

  // Unknown scheme: refused at submit, naming the field.
  CommandResult unknown =
      Quantctl(quantd->address(), {"submit", "--model", Model(), "--scheme", "w_int5_magic"});
  EXPECT_EQ(unknown.exit_code, 3);
  EXPECT_NE(unknown.stderr_text.find("INVALID_ARGUMENT"), std::string::npos) << unknown.stderr_text;
  EXPECT_NE(unknown.stderr_text.find("spec.quantization.scheme"), std::string::npos)
      << unknown.stderr_text;

  // --target vllm: a format vLLM does not read and a scheme it has no
  // kernel for are refused at submit, each on its field; a scheme it serves
  // runs, and its artifact says it loads in vLLM.
  CommandResult vllm = Quantctl(
      quantd->address(), {"submit", "--model", Model(), "--scheme", "w_int8_per_channel_sym",
                          "--format", "gguf", "--format", "hf-quark", "--target", "vllm"});
  EXPECT_EQ(vllm.exit_code, 3);
  for (const char* want : {"spec.export.formats[0]: target vllm: vLLM serves hf_quark and compressed_tensors exports; "
                           "gguf is for llama.cpp",
                           "spec.quantization.scheme: target vllm: vLLM cannot serve this as "
                           "hf_quark"})
    EXPECT_NE(vllm.stderr_text.find(want), std::string::npos) << vllm.stderr_text;
  CommandResult served = Quantctl(
      quantd->address(),
      {"-o", "json", "submit", "--model", Model(), "--scheme", "w_int8_a_int8_per_token_dynamic",
       "--format", "hf-quark", "--target", "vllm", "--output", data + "/vllm-out", "--wait"});
  ASSERT_EQ(served.exit_code, 0) << served.stderr_text;
  Job served_job = ParseJob(LastLine(served.stdout_text));
  ASSERT_EQ(served_job.result().artifacts_size(), 1);
  EXPECT_EQ(std::vector<std::string>(served_job.result().artifacts(0).consumers().begin(),
                                     served_job.result().artifacts(0).consumers().end()),
            std::vector<std::string>{"vllm"});

  // Missing model directory: refused at submit or failed by the worker,
  // either way naming the path.
  const std::string missing = data + "/no-such-model";
  CommandResult miss = Quantctl(quantd->address(), {"-o", "json", "submit", "--model", missing,
                                                    "--scheme", "w_int8_per_tensor_sym", "--wait"});
  EXPECT_NE(miss.exit_code, 0);
  if (miss.exit_code == 1) {
    Job job = ParseJob(LastLine(miss.stdout_text));
    EXPECT_EQ(job.state(), quantd::v1::FAILED);
    EXPECT_NE(job.error().message().find("no-such-model"), std::string::npos)
        << job.error().message();
  } else {
    EXPECT_NE(miss.stderr_text.find("no-such-model"), std::string::npos) << miss.stderr_text;
  }

  // A malformed config.json and a truncated safetensors fail the job with a
  // message naming the file.
  const std::string bad_config = CopyModel("bad_config");
  std::ofstream(bad_config + "/config.json", std::ios::trunc) << "{\"architectures\": [\"Llama";
  const std::string truncated = CopyModel("truncated");
  fs::resize_file(truncated + "/model.safetensors",
                  fs::file_size(truncated + "/model.safetensors") / 2);
  for (const auto& [dir, file] : std::vector<std::pair<std::string, std::string>>{
           {bad_config, "config.json"}, {truncated, "model.safetensors"}}) {
    CommandResult res = Quantctl(
        quantd->address(),
        {"-o", "json", "submit", "--model", dir, "--scheme", "w_int8_per_tensor_sym", "--wait"});
    EXPECT_EQ(res.exit_code, 1) << res.stderr_text;
    Job job = ParseJob(LastLine(res.stdout_text));
    EXPECT_EQ(job.state(), quantd::v1::FAILED);
    EXPECT_NE(job.error().message().find(file), std::string::npos) << job.error().message();
    EXPECT_NE(job.error().code(), 0);
  }

  // The frontend and its worker are still up and run a good job.
  CommandResult good =
      Quantctl(quantd->address(),
               {"-o", "json", "submit", "--model", Model(), "--scheme", "w_int8_per_tensor_sym",
                "--no-eval", "--output", data + "/good", "--wait"});
  EXPECT_EQ(good.exit_code, 0) << good.stderr_text;
  EXPECT_TRUE(quantd->process().Running());
}

}  // namespace
}  // namespace quantd::e2e
