// Attacks on what quantd and its worker parse, replayed against
// one real quantd (tokens on, roots on, one supervised local worker): deep
// JSON in the job's Quark config, in a model's config.json, in
// tokenizer.json and in a dataset line; a backtracking `re:` exclude (also
// behind a percent-encoded model path) and a deeply nested one; an
// oversized spec, after which the same tenant's list, get, watch and cancel
// still work. quantd must refuse with an error naming the field or fail the
// job with a clear error, never crash, hang or crash-loop the worker; the
// other tenant is still served and no job is left stuck.
#include <filesystem>

#include "gtest/gtest.h"
#include "tests/security/security_harness.h"

namespace quantd::security {
namespace {

namespace fs = std::filesystem;
using quantd::v1::Job;
using quantd::v1::JobSpec;

// "A few hundred thousand '['".
constexpr size_t kDeep = 300000;

class ParserAttacksTest : public SuiteFixture {
 protected:
  // A worker killed by a parser would lose its lease after 10 s (and be
  // restarted by the supervisor): the attempt count then shows it.
  static void SetUpTestSuite() {
    StartSuite("security_parsers", {"out"}, {"out"}, {"--lease-duration=10s"});
  }

  void TearDown() override {
    if (server_ == nullptr) return;
    ExpectOthersServed();
    Client acme = Acme();
    for (const std::string& name : created_) {
      const Job job = acme.WaitTerminal(name);
      EXPECT_TRUE(e2e::IsTerminal(job.state())) << name;
    }
  }

  // Creates as acme; an accepted job is waited for and returned in `job`.
  grpc::Status Submit(const JobSpec& spec, Job* job) {
    Client acme = Acme();
    const grpc::Status s = acme.Create(spec, job);
    if (s.ok()) {
      created_.push_back(job->name());
      *job = acme.WaitTerminal(job->name());
    }
    return s;
  }

  // A job on a hostile input file: refused, or run on its first attempt
  // (the worker neither crashed nor retried) to a failure naming the file,
  // or harmlessly to success.
  void ExpectFailsNamingOrHarmless(const JobSpec& spec, const std::string& file) {
    Job job;
    const grpc::Status s = Submit(spec, &job);
    if (!s.ok()) {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
      EXPECT_NE(s.error_message().find(file), std::string::npos) << Describe(s);
      return;
    }
    EXPECT_EQ(job.attempt(), 1) << "the worker died on it: " << job.error().message();
    EXPECT_NE(job.error().code(), static_cast<int>(grpc::StatusCode::ABORTED))
        << job.error().message();
    if (job.state() == quantd::v1::SUCCEEDED) return;
    EXPECT_EQ(job.state(), quantd::v1::FAILED);
    EXPECT_NE(job.error().message().find(file), std::string::npos) << job.error().message();
  }

  std::vector<std::string> created_;
};

TEST_F(ParserAttacksTest, DeepJsonInTheJobsQuarkConfigIsRefused) {
  const std::string head =
      R"({"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "int8",)"
      R"( "qscheme": "per_channel", "ch_axis": 0, "symmetric": true}}, "unknown": )";
  // Unclosed (300 000 deep, over the spec size limit too) and closed (under it).
  for (const std::string& json :
       {head + Repeat('[', kDeep), head + Repeat('[', 100000) + Repeat(']', 100000) + "}"}) {
    JobSpec spec = FastSpec(Model());
    spec.mutable_quantization()->set_quark_json(json);
    Job job;
    const grpc::Status s = Submit(spec, &job);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
    EXPECT_TRUE(NamesField(s, "spec.quantization.quark_json")) << Describe(s);
  }
  // An object nesting as deep.
  JobSpec spec = FastSpec(Model());
  std::string objects = head;
  for (int i = 0; i < 50000; ++i) objects += "{\"a\":";
  spec.mutable_quantization()->set_quark_json(objects);
  Job job;
  const grpc::Status s = Submit(spec, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_TRUE(NamesField(s, "spec.quantization.quark_json")) << Describe(s);
}

// Valid JSON nesting `depth` deep (a parser that builds it recurses when
// it frees it), and the same left open.
std::vector<std::string> DeepValues(size_t depth) {
  return {Repeat('[', depth) + Repeat(']', depth), Repeat('[', depth)};
}

// `json` (an object) with one more key holding `deep`.
std::string WithDeepKey(const std::string& json, const std::string& deep) {
  const size_t close = json.rfind('}');
  return json.substr(0, close) + ", \"x\": " + deep + "}\n";
}

// The model's own config.json with an unknown key nesting deep: read when
// the model is opened, and again when its config is exported.
TEST_F(ParserAttacksTest, DeepJsonInAModelsConfigJsonFailsTheJobNotTheWorker) {
  int i = 0;
  for (const std::string& deep : DeepValues(kDeep)) {
    const std::string model = *root_ + "/models/deep-config-" + std::to_string(i++);
    CopyModel(model);
    WriteFile(model + "/config.json", WithDeepKey(ReadFile(model + "/config.json"), deep));
    ExpectFailsNamingOrHarmless(FastSpec(model), "config.json");
  }
}

TEST_F(ParserAttacksTest, DeepJsonInTokenizerJsonFailsTheJobNotTheWorker) {
  int i = 0;
  for (const std::string& deep : DeepValues(kDeep)) {
    const std::string model = *root_ + "/models/deep-tokenizer-" + std::to_string(i++);
    CopyModel(model);
    fs::remove(model + "/tokenizer.model");  // so tokenizer.json is read
    WriteFile(model + "/tokenizer.json",
              R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "x": )" + deep + "}");
    ExpectFailsNamingOrHarmless(FastSpec(model), "tokenizer.json");
  }
}

TEST_F(ParserAttacksTest, DeepJsonInADatasetLineFailsTheJobNotTheWorker) {
  int i = 0;
  for (const std::string& deep : DeepValues(kDeep)) {
    const std::string name = "deep-" + std::to_string(i++) + ".jsonl";
    const std::string data = *root_ + "/models/" + name;
    WriteFile(data,
              "{\"text\": \"Once upon a time there was a tiny model.\"}\n"
              "{\"text\": \"It was quantized.\", \"meta\": " +
                  deep + "}\n");
    JobSpec spec = FastSpec(Model());
    spec.mutable_calibration()->set_dataset_uri("file://" + data);
    spec.mutable_calibration()->set_num_samples(1);
    spec.mutable_calibration()->set_seq_len(8);
    ExpectFailsNamingOrHarmless(spec, name);
  }
}

// Exponential on a backtracking engine, linear on RE2: CreateJob answers,
// and a job that is accepted ends.
TEST_F(ParserAttacksTest, ABacktrackingExcludeNeitherHangsQuantdNorTheWorker) {
  const std::string pattern = "re:(?:[a-z0-9_.]|[a-z0-9_.])*!";
  JobSpec by_scheme = FastSpec(Model());
  by_scheme.mutable_quantization()->add_exclude(pattern);
  JobSpec by_json = FastSpec(Model());
  by_json.mutable_quantization()->set_quark_json(
      R"({"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "int8",)"
      R"( "qscheme": "per_channel", "ch_axis": 0, "symmetric": true}}, "exclude": [")" +
      pattern + R"("]})");
  // Behind a percent-encoded model path ("260" encoded), which once skipped
  // the frontend's check and left the worker spinning.
  JobSpec encoded = by_scheme;
  encoded.set_model_uri("file://" + *root_ + "/models/stories%32%36%30K");
  for (const JobSpec& spec : {by_scheme, by_json, encoded}) {
    SCOPED_TRACE(spec.model_uri());
    Job job;
    const grpc::Status s = Submit(spec, &job);
    ASSERT_NE(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << "CreateJob hung";
    if (s.ok()) {
      // Nothing matches "...!", so every layer is quantized.
      EXPECT_EQ(job.state(), quantd::v1::SUCCEEDED) << job.error().message();
    } else {
      // The pattern refused, or (one parser on both sides) the encoded path.
      EXPECT_TRUE(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
                  s.error_code() == grpc::StatusCode::PERMISSION_DENIED)
          << Describe(s);
      EXPECT_TRUE(NamesField(s, "spec.quantization") || NamesField(s, "spec.model_uri"))
          << Describe(s);
    }
  }
}

TEST_F(ParserAttacksTest, ADeeplyNestedRegexIsRefusedOrHarmless) {
  for (const std::string& pattern : {"re:" + Repeat('(', 20000) + "a" + Repeat(')', 20000),
                                     "re:" + Repeat('(', 20000) + "a",  // unbalanced as well
                                     std::string("re:(a*)*(b*)*(c*)*(d*)*(e*)*$")}) {
    JobSpec spec = FastSpec(Model());
    spec.mutable_quantization()->add_exclude(pattern);
    Job job;
    const grpc::Status s = Submit(spec, &job);
    ASSERT_NE(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << "CreateJob hung";
    if (s.ok()) {
      EXPECT_TRUE(e2e::IsTerminal(job.state()));
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
      EXPECT_TRUE(NamesField(s, "spec.quantization.exclude[0]")) << Describe(s);
    }
  }
}

// A 12 MiB config once was stored, and from then on every get, list, watch
// and cancel of the tenant failed with "Received message larger than max".
TEST_F(ParserAttacksTest, AnOversizedSpecIsRefusedAndTheTenantIsStillServed) {
  Client acme = Acme();
  Job before;
  ASSERT_TRUE(acme.Create(FastSpec(Model()), &before).ok());
  created_.push_back(before.name());
  for (size_t bytes : {size_t{12} << 20, size_t{300} << 10}) {
    SCOPED_TRACE(bytes);
    JobSpec spec = FastSpec(Model());
    spec.mutable_quantization()->set_quark_json(
        R"({"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "int8",)"
        R"( "qscheme": "per_channel", "ch_axis": 0, "symmetric": true}}, "notes": ")" +
        Repeat('x', bytes) + "\"}");
    Job job;
    const grpc::Status s = Submit(spec, &job);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
    EXPECT_TRUE(NamesField(s, "spec.quantization.quark_json")) << Describe(s);
  }
  // The same tenant: list, get, watch and cancel.
  quantd::v1::ListJobsResponse listed;
  grpc::Status s = acme.List(&listed);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_GE(listed.jobs_size(), 1);
  s = acme.Get(before.name());
  EXPECT_TRUE(s.ok()) << Describe(s);
  const Job done = acme.WaitTerminal(before.name());
  std::vector<quantd::v1::JobEvent> events;
  s = acme.Events(before.name(), &events);
  EXPECT_TRUE(s.ok()) << Describe(s);
  EXPECT_FALSE(events.empty());
  s = acme.Cancel(before.name());
  // A finished job cannot be cancelled: answered, not broken.
  EXPECT_TRUE(s.ok() || s.error_code() == grpc::StatusCode::FAILED_PRECONDITION) << Describe(s);
  EXPECT_TRUE(e2e::IsTerminal(done.state()));
}

}  // namespace
}  // namespace quantd::security
