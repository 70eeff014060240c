// Attacks on where a job writes and what it copies, replayed
// against one real quantd (tokens on, roots on, one supervised local
// worker): output URIs with a query, a fragment or encoded separators, a
// symlinked parent, a symlink swapped in while the job runs, --overwrite of
// a directory quantd did not write and of another tenant's output, and a
// symlink inside a model directory. Each must be refused naming the field,
// or be harmless; the victim is byte-identical afterwards; tenant beta is
// still served; and every job the attack created ends.
//
// Layout under the suite's directory R:
//   models/      input root (file://R/models)
//   out/<t>/     per-tenant output root (file://R/out/{tenant}/)
//   shared/      a plain output root (file://R/shared)
//   victim/      outside every root: what the attacks aim at
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "gtest/gtest.h"
#include "tests/security/security_harness.h"

namespace quantd::security {
namespace {

namespace fs = std::filesystem;
using quantd::v1::Job;
using quantd::v1::JobSpec;

class OutputAttacksTest : public SuiteFixture {
 protected:
  // out/{tenant} exists literally too: a quantd without tenant roots then
  // starts, and the attacks are judged against it.
  static void SetUpTestSuite() {
    StartSuite("security_outputs", {"out/acme", "out/beta", "out/{tenant}", "shared"},
               {"out/{tenant}/", "shared"});
  }

  void SetUp() override {
    SuiteFixture::SetUp();
    if (HasFatalFailure()) return;
    // A fresh victim for every attack, so that each is judged on its own.
    fs::remove_all(Victim());
    WriteFile(Victim() + "/keep.txt", "the victim's own file\n");
    WriteFile(Victim() + "/sub/data.bin", std::string("\x00\x01\x02victim", 9));
    victim_before_ = TreeDigest(Victim());
  }

  // The checks every attack ends with.
  void TearDown() override {
    if (server_ == nullptr) return;
    ExpectOthersServed();
    EXPECT_EQ(TreeDigest(Victim()), victim_before_) << "the victim changed";
    // No job of this attack is left stuck.
    Client acme = Acme(), beta = Beta();
    for (const auto& [name, client] : created_) {
      const Job job = (client == 'a' ? acme : beta).WaitTerminal(name);
      EXPECT_TRUE(e2e::IsTerminal(job.state())) << name;
    }
  }

  static std::string Victim() { return *root_ + "/victim"; }
  static std::string Shared() { return *root_ + "/shared"; }

  // Creates the job as acme ('a') or beta ('b'); an accepted job is waited
  // for (its damage, if any, is then on disk) and returned in `job`.
  grpc::Status Submit(char tenant, const JobSpec& spec, Job* job) {
    Client c = tenant == 'a' ? Acme() : Beta();
    const grpc::Status s = c.Create(spec, job);
    if (s.ok()) {
      created_.emplace_back(job->name(), tenant);
      *job = c.WaitTerminal(job->name());
    }
    return s;
  }

  // An output URI attack: refused at CreateJob naming the field, or (if it
  // got through the frontend) failed by the worker without writing.
  void ExpectOutputRefused(const std::string& uri, bool overwrite) {
    SCOPED_TRACE(uri);
    JobSpec spec = FastSpec(Model(), uri);
    spec.mutable_export_()->set_overwrite(overwrite);
    Job job;
    const grpc::Status s = Submit('a', spec, &job);
    if (s.ok()) {
      ADD_FAILURE() << "accepted; the job ended " << quantd::v1::JobState_Name(job.state())
                    << (job.result().artifacts_size() > 0
                            ? " writing " + job.result().artifacts(0).uri()
                            : std::string());
      return;
    }
    EXPECT_TRUE(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
                s.error_code() == grpc::StatusCode::PERMISSION_DENIED)
        << Describe(s);
    EXPECT_TRUE(NamesField(s, "spec.export.output_uri")) << Describe(s);
  }

  std::map<std::string, std::string> victim_before_;
  std::vector<std::pair<std::string, char>> created_;
};

// file:///srv/out?/../victim passed a frontend that cut at '?' and was
// normalised by the worker to /srv/victim.
TEST_F(OutputAttacksTest, OutputUriWithAQueryIsRefused) {
  ExpectOutputRefused("file://" + Shared() + "?/../victim", /*overwrite=*/true);
  ExpectOutputRefused("file://" + Shared() + "?x=1", /*overwrite=*/false);
}

TEST_F(OutputAttacksTest, OutputUriWithAFragmentIsRefused) {
  ExpectOutputRefused("file://" + Shared() + "#/../victim", /*overwrite=*/true);
  ExpectOutputRefused("file://" + Shared() + "/model#frag", /*overwrite=*/false);
}

TEST_F(OutputAttacksTest, OutputUriWithAnEncodedSlashIsRefused) {
  ExpectOutputRefused("file://" + Shared() + "/..%2Fvictim", /*overwrite=*/true);
  ExpectOutputRefused("file://" + Shared() + "/..%2fvictim", /*overwrite=*/true);
  ExpectOutputRefused("file://" + Shared() + "/a%2Fb", /*overwrite=*/false);
}

TEST_F(OutputAttacksTest, OutputUriWithEncodedDotSegmentsIsRefused) {
  ExpectOutputRefused("file://" + Shared() + "/%2e%2e/victim", /*overwrite=*/true);
  ExpectOutputRefused("file://" + Shared() + "/%2E%2E/victim", /*overwrite=*/true);
  ExpectOutputRefused("file://" + Shared() + "/.%2e/victim", /*overwrite=*/true);
  ExpectOutputRefused("file://" + Shared() + "/../victim", /*overwrite=*/true);
  // Decoded twice, %252e%252e would be '..': it must be decoded once.
  JobSpec spec = FastSpec(Model(), "file://" + Shared() + "/%252e%252e/victim");
  Job job;
  const grpc::Status s = Submit('a', spec, &job);
  if (s.ok()) {
    // Harmless: a directory literally named "%2e%2e" inside the root.
    EXPECT_EQ(job.state(), quantd::v1::SUCCEEDED) << job.error().message();
    EXPECT_TRUE(fs::exists(Shared() + "/%2e%2e/victim")) << "written elsewhere";
  } else {
    EXPECT_TRUE(NamesField(s, "spec.export.output_uri")) << Describe(s);
  }
}

// A symlink in the output's parents leads outside the roots.
TEST_F(OutputAttacksTest, OutputUnderASymlinkedParentIsRefused) {
  fs::create_directory_symlink(Victim(), Shared() + "/link");
  ExpectOutputRefused("file://" + Shared() + "/link/model", /*overwrite=*/false);
  ExpectOutputRefused("file://" + Shared() + "/link/sub", /*overwrite=*/true);
  ExpectOutputRefused("file://" + Shared() + "/link", /*overwrite=*/true);
  fs::remove(Shared() + "/link");
}

// The output's parent is a real directory when the job is created; while
// it runs, a thread swaps a symlink to the victim in and out in a loop. No
// write may land in the victim, whenever the swap happens.
TEST_F(OutputAttacksTest, ASymlinkSwappedInWhileTheJobRunsRedirectsNothing) {
  const std::string swap = Shared() + "/swap";
  fs::create_directories(swap);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    JobSpec spec = FastSpec(Model(), "file://" + swap + "/model" + std::to_string(round));
    spec.mutable_export_()->set_overwrite(true);
    // Evaluating 60 windows makes the job last a few seconds of flips.
    spec.mutable_evaluation()->set_disabled(false);
    spec.mutable_evaluation()->set_dataset_uri("file://" + *root_ + "/models/eval.txt");
    spec.mutable_evaluation()->set_max_windows(60);
    Client acme = Acme();
    Job job;
    const grpc::Status s = acme.Create(spec, &job);
    ASSERT_TRUE(s.ok()) << Describe(s);
    created_.emplace_back(job.name(), 'a');
    std::atomic<bool> stop{false};
    std::atomic<int> flips{0};
    std::thread flipper([&] {
      std::error_code ec;
      for (int k = 0; !stop.load(); ++k) {
        // Real directory -> symlink to the victim -> real directory. The
        // real one moves aside under a new name each time, in case the
        // worker made a new `swap` while the name was free.
        const std::string aside = swap + ".real" + std::to_string(k);
        fs::rename(swap, aside, ec);
        if (ec) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
        fs::create_directory_symlink(Victim(), swap, ec);
        std::this_thread::sleep_for(std::chrono::milliseconds(2 + 2 * round));
        if (fs::is_symlink(fs::symlink_status(swap))) fs::remove(swap, ec);
        fs::rename(aside, swap, ec);
        ++flips;
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
      }
    });
    // The flips start while the job is queued or loading, and go on until
    // it has ended.
    ASSERT_TRUE(e2e::WaitUntil([&] { return flips.load() > 0; }));
    job = acme.WaitTerminal(job.name());
    stop = true;
    flipper.join();
    if (fs::is_symlink(fs::symlink_status(swap))) fs::remove(swap);
    fs::create_directories(swap);
    EXPECT_EQ(TreeDigest(Victim()), victim_before_) << "a write followed the swapped symlink";
    if (job.state() == quantd::v1::SUCCEEDED) {
      // Wherever it landed, it is inside the root.
      ASSERT_EQ(job.result().artifacts_size(), 1);
      const std::string path = job.result().artifacts(0).uri().substr(7);
      const std::string real = fs::weakly_canonical(path).string();
      EXPECT_EQ(real.rfind(fs::canonical(Shared()).string() + "/", 0), 0u) << real;
    } else {
      EXPECT_EQ(job.state(), quantd::v1::FAILED);
      EXPECT_FALSE(job.error().message().empty());
    }
  }
}

// --overwrite of a directory no quantd job wrote: never deleted.
TEST_F(OutputAttacksTest, OverwriteOfADirectoryQuantdDidNotWriteIsRefused) {
  const std::string precious = Shared() + "/precious";
  WriteFile(precious + "/notes.txt", "not quantd's\n");
  WriteFile(precious + "/data/table.csv", "a,b\n1,2\n");
  const auto before = TreeDigest(precious);
  JobSpec spec = FastSpec(Model(), "file://" + precious);
  spec.mutable_export_()->set_overwrite(true);
  Job job;
  const grpc::Status s = Submit('a', spec, &job);
  if (s.ok()) {
    EXPECT_EQ(job.state(), quantd::v1::FAILED) << "the directory was replaced";
    EXPECT_EQ(job.error().code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION))
        << job.error().message();
    EXPECT_NE(job.error().message().find(precious), std::string::npos) << job.error().message();
  } else {
    EXPECT_TRUE(NamesField(s, "spec.export.output_uri")) << Describe(s);
  }
  EXPECT_EQ(TreeDigest(precious), before);
}

// Beta's artifact can be neither overwritten by acme nor read by acme as a
// model: through beta's tenant root, and through a shared root (where only
// the owner marker says whose it is).
TEST_F(OutputAttacksTest, AnotherTenantsOutputCanBeNeitherOverwrittenNorRead) {
  Job beta_job;
  ASSERT_TRUE(
      Submit('b', FastSpec(Model(), "file://" + *root_ + "/out/beta/result"), &beta_job).ok());
  ASSERT_EQ(beta_job.state(), quantd::v1::SUCCEEDED) << beta_job.error().message();
  Job shared_job;
  ASSERT_TRUE(
      Submit('b', FastSpec(Model(), "file://" + Shared() + "/beta-result"), &shared_job).ok());
  ASSERT_EQ(shared_job.state(), quantd::v1::SUCCEEDED) << shared_job.error().message();
  const auto beta_before = TreeDigest(*root_ + "/out/beta");
  const auto shared_before = TreeDigest(Shared() + "/beta-result");

  // Into beta's tenant root: refused at CreateJob.
  ExpectOutputRefused("file://" + *root_ + "/out/beta/result", /*overwrite=*/true);
  // Reading beta's artifact as a model: refused at CreateJob.
  {
    Job job;
    const grpc::Status s = Submit('a', FastSpec(*root_ + "/out/beta/result"), &job);
    EXPECT_FALSE(s.ok()) << "acme read beta's artifact; the job ended "
                         << quantd::v1::JobState_Name(job.state());
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
    EXPECT_TRUE(NamesField(s, "spec.model_uri")) << Describe(s);
  }
  // Beta's quantd-written directory under the shared root: the worker finds
  // beta's marker and refuses to replace it.
  {
    JobSpec spec = FastSpec(Model(), "file://" + Shared() + "/beta-result");
    spec.mutable_export_()->set_overwrite(true);
    Job job;
    const grpc::Status s = Submit('a', spec, &job);
    if (s.ok()) {
      EXPECT_EQ(job.state(), quantd::v1::FAILED) << "acme replaced beta's artifact";
      EXPECT_EQ(job.error().code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION))
          << job.error().message();
    } else {
      EXPECT_TRUE(NamesField(s, "spec.export.output_uri")) << Describe(s);
    }
  }
  EXPECT_EQ(TreeDigest(*root_ + "/out/beta"), beta_before);
  EXPECT_EQ(TreeDigest(Shared() + "/beta-result"), shared_before);
  // Beta itself may replace its own artifact.
  JobSpec again = FastSpec(Model(), "file://" + Shared() + "/beta-result");
  again.mutable_export_()->set_overwrite(true);
  Job replaced;
  ASSERT_TRUE(Submit('b', again, &replaced).ok());
  EXPECT_EQ(replaced.state(), quantd::v1::SUCCEEDED) << replaced.error().message();
}

// notes.txt -> a secret outside the model directory: not followed, not
// copied into the artifact. The same as a side file the exporters copy
// (tokenizer_config.json): the job may fail, but nothing quotes the secret.
TEST_F(OutputAttacksTest, ASymlinkInAModelDirectoryIsNotCopiedIntoTheArtifact) {
  const std::string secret_path = *root_ + "/secret.txt";
  const std::string secret = "secret-" + std::to_string(::getpid()) + "-do-not-copy";
  WriteFile(secret_path, secret + "\n");
  for (const char* link : {"notes.txt", "tokenizer_config.json"}) {
    SCOPED_TRACE(link);
    const std::string model = *root_ + "/models/with-" + link;
    CopyModel(model);
    fs::create_symlink(secret_path, model + "/" + link);
    const std::string out = Shared() + "/from-model-with-" + link;
    Job job;
    const grpc::Status s = Submit('a', FastSpec(model, "file://" + out), &job);
    ASSERT_TRUE(s.ok()) << Describe(s);
    if (std::string(link) == "notes.txt") {
      // Nothing else is wrong with this model: it is quantized, without the link.
      EXPECT_EQ(job.state(), quantd::v1::SUCCEEDED) << job.error().message();
      EXPECT_FALSE(fs::exists(fs::symlink_status(out + "/notes.txt")));
    } else {
      EXPECT_TRUE(job.state() == quantd::v1::SUCCEEDED || job.state() == quantd::v1::FAILED);
      EXPECT_FALSE(fs::exists(fs::symlink_status(out + "/" + link)) &&
                   ReadFile(out + "/" + link).find(secret) != std::string::npos);
    }
    // Nor does the job's error or any of its events quote it.
    EXPECT_EQ(job.error().message().find(secret), std::string::npos) << job.error().message();
    std::vector<quantd::v1::JobEvent> events;
    EXPECT_TRUE(Acme().Events(job.name(), &events).ok());
    for (const auto& ev : events)
      EXPECT_EQ(ev.DebugString().find(secret), std::string::npos) << ev.DebugString();
  }
  // No file anywhere under the outputs holds the secret.
  for (const auto& e : fs::recursive_directory_iterator(Shared())) {
    if (!e.is_regular_file()) continue;
    EXPECT_EQ(ReadFile(e.path().string()).find(secret), std::string::npos)
        << e.path() << " holds the secret";
  }
  EXPECT_EQ(ReadFile(secret_path), secret + "\n");
}

}  // namespace
}  // namespace quantd::security
