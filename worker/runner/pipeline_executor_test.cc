#include "worker/runner/pipeline_executor.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/models/random_checkpoint.h"

namespace quantd::worker {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class NullContext : public JobContext {
 public:
  void Report(quantd::v1::JobEvent event) override { events.push_back(std::move(event)); }
  void SetProgress(const quantd::v1::Progress&) override {}
  bool CancelRequested() const override { return false; }
  std::vector<quantd::v1::JobEvent> events;
};

// A worker whose roots are <base>/models, <base>/out/{tenant} and whose
// data directory is <base>/data.
class PipelineExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::canonical(::testing::TempDir()) /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(base_);
    model_ = base_ / "models" / "stories260K";
    fs::create_directories(model_);
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.model"}) {
      fs::copy_file(fs::path("models/stories260K") / f, model_ / f);
    }
    fs::create_directories(base_ / "out");
    fs::create_directories(base_ / "secret");
    std::ofstream(base_ / "secret" / "shadow") << "root:secret";
    auto roots = io::UriRoots::Create(
        {"file://" + (base_ / "models").string(), "file://" + (base_ / "out/{tenant}").string()},
        (base_ / "data" / "artifacts").string(), "--allowed-roots");
    ASSERT_TRUE(roots.ok()) << roots.status();
    PipelineExecutorOptions o;
    o.data_dir = (base_ / "data").string();
    o.roots = std::make_shared<const io::UriRoots>(*roots);
    executor_ = std::make_unique<PipelineExecutor>(o);
  }

  quantd::v1::Job Job(const std::string& output_uri, const std::string& tenant = "acme") {
    quantd::v1::Job job;
    job.set_name("jobs/testjob1");
    job.set_tenant(tenant);
    auto* spec = job.mutable_spec();
    spec->set_model_uri("file://" + model_.string());
    spec->mutable_quantization()->set_scheme("w_int8_per_channel_sym");
    spec->mutable_evaluation()->set_disabled(true);
    spec->mutable_export_()->set_output_uri(output_uri);
    return job;
  }

  // The options the worker builds for `job` whatever the spec check said of
  // its output URI (as from a frontend of another build): the worker's own
  // policy must refuse it as well.
  StatusOr<pipeline::JobOptions> OptionsPastTheCheck(const quantd::v1::Job& job) {
    quantd::v1::Job checked = job;
    checked.mutable_spec()->mutable_export_()->clear_output_uri();
    auto resolved = job_spec::ResolveJob(checked.spec());
    if (!resolved.ok()) return resolved.status();
    resolved->export_settings.output_uri = job.spec().export_().output_uri();
    return executor_->BuildOptions(job, *resolved);
  }

  fs::path base_, model_;
  std::unique_ptr<PipelineExecutor> executor_;
};

TEST_F(PipelineExecutorTest, OutputsFollowTheRootsAndTheTenant) {
  auto defaulted = executor_->BuildOptions(Job(""));
  ASSERT_TRUE(defaulted.ok()) << defaulted.status();
  EXPECT_EQ(defaulted->export_options.output_dir, (base_ / "data/artifacts/testjob1").string());
  EXPECT_EQ(defaulted->export_options.output_root, (base_ / "data/artifacts").string());
  EXPECT_EQ(defaulted->export_options.tenant, "acme");

  const std::string own = "file://" + (base_ / "out/acme/m").string();
  auto tenant = executor_->BuildOptions(Job(own));
  ASSERT_TRUE(tenant.ok()) << tenant.status();
  EXPECT_EQ(tenant->export_options.output_dir, (base_ / "out/acme/m").string());
  EXPECT_EQ(tenant->export_options.output_root, (base_ / "out").string());

  struct Case {
    std::string uri;
    std::string tenant;
    StatusCode code;
  };
  const Case refused[] = {
      {own, "globex", StatusCode::kPermissionDenied},
      {own, "", StatusCode::kPermissionDenied},
      {"file://" + (base_ / "out").string() + "?/../secret", "acme", StatusCode::kInvalidArgument},
      {"file://" + (base_ / "out").string() + "#/../secret", "acme", StatusCode::kInvalidArgument},
      {"file://" + (base_ / "out/acme/%2e%2e/globex").string(), "acme",
       StatusCode::kPermissionDenied},
      {"file://" + (base_ / "secret/x").string(), "acme", StatusCode::kPermissionDenied},
  };
  for (const Case& c : refused) {
    auto s = OptionsPastTheCheck(Job(c.uri, c.tenant));
    EXPECT_EQ(s.status().code(), c.code) << c.uri << " " << c.tenant << ": " << s.status();
    EXPECT_THAT(s.status().message(), HasSubstr("spec.export.output_uri")) << c.uri;
    // Through the check, as Execute runs it: refused too, naming the field.
    auto checked = executor_->BuildOptions(Job(c.uri, c.tenant));
    EXPECT_FALSE(checked.ok()) << c.uri;
    EXPECT_THAT(checked.status().message(), HasSubstr("spec.export.output_uri")) << c.uri;
  }
}

TEST_F(PipelineExecutorTest, CalibrationSamplingUnsetKeepsTheEngineDefault) {
  const pipeline::CalibrationOptions defaults;
  auto job = Job("");
  job.mutable_spec()->mutable_calibration()->set_num_samples(4);
  auto unset = executor_->BuildOptions(job);
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_EQ(unset->calibration.sampling, defaults.sampling);
  EXPECT_EQ(unset->calibration.seed, defaults.seed);

  job.mutable_spec()->mutable_calibration()->set_sampling(quantd::v1::CONCAT);
  auto concat = executor_->BuildOptions(job);
  ASSERT_TRUE(concat.ok()) << concat.status();
  EXPECT_EQ(concat->calibration.sampling, io::SamplingMethod::kConcat);

  job.mutable_spec()->mutable_calibration()->set_sampling(quantd::v1::RANDOM_WINDOWS);
  job.mutable_spec()->mutable_calibration()->set_seed(99);
  auto windows = executor_->BuildOptions(job);
  ASSERT_TRUE(windows.ok()) << windows.status();
  EXPECT_EQ(windows->calibration.sampling, io::SamplingMethod::kRandomWindows);
  EXPECT_EQ(windows->calibration.seed, 99u);
}

TEST_F(PipelineExecutorTest, InputsOnlyUnderTheRoots) {
  auto job = Job("");
  job.mutable_spec()->set_model_uri("file://" + (base_ / "secret").string());
  auto s = executor_->BuildOptions(job);
  EXPECT_EQ(s.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(s.status().message(), HasSubstr("spec.model_uri"));
  // Reading another job's default output is not allowed either.
  job.mutable_spec()->set_model_uri("file://" + (base_ / "data/artifacts/other").string());
  EXPECT_EQ(executor_->BuildOptions(job).status().code(), StatusCode::kPermissionDenied);

  // No roots at all: no input.
  auto none = io::UriRoots::Create({}, (base_ / "data/artifacts").string(), "--allowed-roots");
  ASSERT_TRUE(none.ok());
  PipelineExecutorOptions o;
  o.data_dir = (base_ / "data").string();
  o.roots = std::make_shared<const io::UriRoots>(*none);
  auto refused = PipelineExecutor(o).BuildOptions(Job(""));
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.status().message(), HasSubstr("--allowed-roots"));
}

// Issue 17: a symlink in the model directory is not followed into the
// artifact, and one the engine would read fails the job.
TEST_F(PipelineExecutorTest, ALinkInTheModelDirectoryIsNotFollowed) {
  fs::create_symlink(base_ / "secret" / "shadow", model_ / "notes.txt");
  fs::create_symlink(base_ / "secret" / "shadow", model_ / "README.md");
  NullContext ctx;
  const fs::path out = base_ / "out" / "acme" / "q";
  ExecutionOutcome done = executor_->Execute(Job("file://" + out.string()), ctx);
  ASSERT_TRUE(done.status.ok()) << done.status;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(out)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{".quantd-job", "config.json", "model.safetensors",
                                             "tokenizer.model"}));
  EXPECT_EQ(Read(out / ".quantd-job"), "job=jobs/testjob1\ntenant=acme\n");
  // The view the engine read is gone with the job.
  EXPECT_TRUE(fs::is_empty(base_ / "data" / "inputs"));

  fs::create_symlink(base_ / "secret" / "shadow", model_ / "tokenizer_config.json");
  NullContext again;
  ExecutionOutcome refused =
      executor_->Execute(Job("file://" + (base_ / "out/acme/q2").string()), again);
  EXPECT_EQ(refused.status.code(), StatusCode::kPermissionDenied) << refused.status;
  EXPECT_THAT(refused.status.message(), HasSubstr("tokenizer_config.json"));
  EXPECT_FALSE(fs::exists(base_ / "out/acme/q2"));
}

// Issue 20: a GGUF file is a model. It is read through a view of its own,
// gives the directory's numbers (the official stories260K GGUF holds the
// same weights and vocabulary), and its exports carry the config made from
// its metadata; a file that is not a GGUF, or that links out of the roots,
// is refused naming the field.
TEST_F(PipelineExecutorTest, AGgufFileIsAModel) {
  const fs::path gguf = base_ / "models" / "stories.gguf";
  fs::copy_file("models/stories260K/stories260K-f32.gguf", gguf);
  fs::copy_file("tests/data/tinystories-sample.txt", base_ / "models" / "eval.txt");
  auto with_eval = [&](quantd::v1::Job job) {
    auto* ev = job.mutable_spec()->mutable_evaluation();
    ev->set_disabled(false);
    ev->set_dataset_uri("file://" + (base_ / "models" / "eval.txt").string());
    ev->set_max_windows(8);
    return job;
  };
  NullContext dir_ctx;
  ExecutionOutcome from_dir =
      executor_->Execute(with_eval(Job("file://" + (base_ / "out/acme/d").string())), dir_ctx);
  ASSERT_TRUE(from_dir.status.ok()) << from_dir.status;

  auto job = with_eval(Job("file://" + (base_ / "out/acme/g").string()));
  job.mutable_spec()->set_model_uri("file://" + gguf.string());
  NullContext ctx;
  ExecutionOutcome done = executor_->Execute(job, ctx);
  ASSERT_TRUE(done.status.ok()) << done.status;
  const auto& m = done.result.metrics();
  const auto& d = from_dir.result.metrics();
  ASSERT_GT(m.float_perplexity().perplexity(), 1.0);
  // Bit-identical weights and token ids: the same numbers, up to the
  // order of float32 sums (the GGUF's head is its own copy of the embedding).
  EXPECT_NEAR(m.float_perplexity().perplexity(), d.float_perplexity().perplexity(),
              1e-5 * d.float_perplexity().perplexity());
  EXPECT_NEAR(m.quantized_perplexity().perplexity(), d.quantized_perplexity().perplexity(),
              1e-5 * d.quantized_perplexity().perplexity());
  EXPECT_EQ(m.float_perplexity().protocol().tokens(), d.float_perplexity().protocol().tokens());
  const std::string config = Read(base_ / "out/acme/g" / "config.json");
  EXPECT_THAT(config, HasSubstr("\"LlamaForCausalLM\""));
  EXPECT_THAT(config, HasSubstr("\"quantization_config\""));
  // The export carries the GGUF's vocabulary as Transformers reads it.
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(base_ / "out/acme/g"))
    files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{".quantd-job", "config.json", "model.safetensors",
                                             "tokenizer.model", "tokenizer_config.json"}));
  EXPECT_TRUE(fs::is_empty(base_ / "data" / "inputs"));

  // A file named "...gguf" (stem "..") gets a view of its own, not the
  // inputs directory another live job's view lies in.
  const fs::path other = base_ / "data" / "inputs" / ("otherjob-" + std::to_string(::getpid()));
  fs::create_directories(other);
  fs::copy_file(gguf, base_ / "models" / "...gguf");
  job.mutable_spec()->set_model_uri("file://" + (base_ / "models" / "...gguf").string());
  job.mutable_spec()->mutable_export_()->set_output_uri("file://" +
                                                        (base_ / "out/acme/dots").string());
  NullContext dots;
  ExecutionOutcome dotted = executor_->Execute(job, dots);
  EXPECT_TRUE(dotted.status.ok()) << dotted.status;
  EXPECT_TRUE(fs::is_directory(other));
  fs::remove(other);

  struct Case {
    std::string name;
    StatusCode code;
    std::string says;
  };
  std::ofstream(base_ / "models" / "notes.gguf") << "{\"not\": \"a gguf\"}";
  fs::create_symlink(base_ / "secret" / "shadow", base_ / "models" / "evil.gguf");
  std::string truncated = Read(gguf).substr(0, 4096);
  std::ofstream(base_ / "models" / "cut.gguf", std::ios::binary) << truncated;
  const Case refused[] = {
      {"notes.gguf", StatusCode::kInvalidArgument, "is a file but neither a GGUF file nor a TorchScript archive"},
      {"evil.gguf", StatusCode::kPermissionDenied,
       "resolves to " + (base_ / "secret" / "shadow").string()},
      {"cut.gguf", StatusCode::kDataLoss, (base_ / "models" / "cut.gguf").string()},
  };
  for (const Case& c : refused) {
    job.mutable_spec()->set_model_uri("file://" + (base_ / "models" / c.name).string());
    job.mutable_spec()->mutable_export_()->set_output_uri("file://" +
                                                          (base_ / "out/acme" / c.name).string());
    NullContext failed;
    ExecutionOutcome out = executor_->Execute(job, failed);
    EXPECT_EQ(out.status.code(), c.code) << c.name << ": " << out.status;
    EXPECT_THAT(out.status.message(), HasSubstr("spec.model_uri: ")) << c.name;
    EXPECT_THAT(out.status.message(), HasSubstr(c.says)) << c.name;
    // The tenant never sees the worker's own paths.
    EXPECT_THAT(out.status.message(), ::testing::Not(HasSubstr("/inputs/"))) << c.name;
    EXPECT_FALSE(fs::exists(base_ / "out/acme" / c.name)) << c.name;
  }
  EXPECT_TRUE(fs::is_empty(base_ / "data" / "inputs"));
}

// A format the architecture cannot take fails the job when the worker reads
// the config, before quantizing, when CreateJob could not read it (here:
// config.json links elsewhere inside the roots, which the check does not
// follow and the worker may read).
TEST_F(PipelineExecutorTest, AFormatTheArchitectureCannotTakeFailsBeforeQuantizing) {
  const fs::path qwen3 = base_ / "models" / "qwen3";
  models::RandomCheckpointOptions c;
  c.architecture = "qwen3";
  c.hidden_size = 64;
  c.head_dim = 32;
  c.intermediate_size = 128;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.vocab_size = 512;
  c.dtype = io::SafetensorsDtype::kF32;
  ASSERT_TRUE(models::WriteRandomLlamaCheckpoint(qwen3.string(), c).ok());
  fs::copy_file("models/stories260K/tokenizer.model", qwen3 / "tokenizer.model");
  fs::create_directories(base_ / "models" / "configs");
  fs::rename(qwen3 / "config.json", base_ / "models" / "configs" / "qwen3.json");
  fs::create_symlink(base_ / "models" / "configs" / "qwen3.json", qwen3 / "config.json");
  auto job = Job("file://" + (base_ / "out/acme/onnx").string());
  job.mutable_spec()->set_model_uri("file://" + qwen3.string());
  job.mutable_spec()->mutable_export_()->add_formats(quantd::v1::HF_FAKE_QUANTIZED);
  job.mutable_spec()->mutable_export_()->add_formats(quantd::v1::ONNX_QDQ);
  ASSERT_TRUE(job_spec::ResolveJob(job.spec()).ok());  // not readable at CreateJob
  NullContext ctx;
  ExecutionOutcome out = executor_->Execute(job, ctx);
  EXPECT_EQ(out.status.code(), StatusCode::kInvalidArgument) << out.status;
  EXPECT_EQ(out.status.reason(), "EXPORT_FORMAT_UNSUPPORTED");
  ASSERT_EQ(out.status.violations().size(), 1u) << out.status;
  EXPECT_EQ(out.status.violations()[0].field, "spec.export.formats[1]");
  EXPECT_THAT(out.status.message(), HasSubstr("onnx_qdq cannot hold Qwen3ForCausalLM"));
  for (const auto& e : ctx.events) {
    EXPECT_FALSE(e.has_block_metrics()) << "a block was quantized";
  }
  EXPECT_FALSE(fs::exists(base_ / "out/acme/onnx"));
}

TEST_F(PipelineExecutorTest, IndexShardNamesThatLeaveTheDirectoryAreRefused) {
  // A shard the job could read anyway, named from outside the directory.
  fs::copy_file(model_ / "model.safetensors", base_ / "models" / "escape.safetensors");
  const std::string shards[] = {"../escape.safetensors",
                                (base_ / "models/escape.safetensors").string(),
                                "sub/escape.safetensors"};
  for (const std::string& shard : shards) {
    std::ofstream(model_ / "model.safetensors.index.json")
        << R"({"weight_map": {"model.embed_tokens.weight": ")" << shard << R"("}})";
    NullContext ctx;
    ExecutionOutcome refused = executor_->Execute(Job(""), ctx);
    EXPECT_EQ(refused.status.code(), StatusCode::kDataLoss) << shard << ": " << refused.status;
    EXPECT_THAT(refused.status.message(), HasSubstr("maps to '" + shard + "'"));
  }
  EXPECT_FALSE(fs::exists(base_ / "data/artifacts/testjob1"));
}

TEST_F(PipelineExecutorTest, OverwriteReplacesOnlyTheTenantsOwnOutputs) {
  const fs::path out = base_ / "out" / "acme" / "q";
  fs::create_directories(out);
  std::ofstream(out / "weights.bin") << "not quantd's";
  NullContext ctx;
  auto job = Job("file://" + out.string());
  job.mutable_spec()->mutable_export_()->set_overwrite(true);
  ExecutionOutcome refused = executor_->Execute(job, ctx);
  EXPECT_EQ(refused.status.code(), StatusCode::kFailedPrecondition) << refused.status;
  EXPECT_EQ(refused.status.reason(), "OUTPUT_EXISTS");
  EXPECT_THAT(refused.status.message(), HasSubstr("not written by quantd"));
  EXPECT_EQ(Read(out / "weights.bin"), "not quantd's");
  // Refused before any work: no block was quantized.
  for (const auto& e : ctx.events) EXPECT_FALSE(e.has_block_metrics());

  // A symlinked parent likewise, and nothing is written where it leads.
  fs::create_symlink(base_ / "secret", base_ / "out" / "acme" / "link");
  NullContext linked_ctx;
  ExecutionOutcome linked =
      executor_->Execute(Job("file://" + (base_ / "out/acme/link/q").string()), linked_ctx);
  EXPECT_EQ(linked.status.code(), StatusCode::kPermissionDenied) << linked.status;
  EXPECT_EQ(std::vector<std::string>{"shadow"}, [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(base_ / "secret"))
      names.push_back(e.path().filename().string());
    return names;
  }());
}

}  // namespace
}  // namespace quantd::worker
