// Attacks on the lease protocol, and work that stops, against one
// real quantd (tokens on, one supervised local worker with quantd's own
// worker token):
//  * a forged CompleteJob (and FailJob, Heartbeat) for a job the real
//    worker holds, from another worker credential with a guessed lease, from
//    the admin credential, from a submitter and from nobody, is refused,
//    and the job's real result stands;
//  * a cancel while the job evaluates ends it CANCELLED from inside the
//    evaluation, not after it.
#include <google/protobuf/descriptor.h>

#include <filesystem>

#include "gtest/gtest.h"
#include "tests/security/security_harness.h"

namespace quantd::security {
namespace {

namespace fs = std::filesystem;
using quantd::v1::Job;
using quantd::v1::JobSpec;

class LeaseAttacksTest : public SuiteFixture {
 protected:
  // Heartbeats every 3 s: a cancel reaches the worker within a fraction of
  // the evaluation.
  static void SetUpTestSuite() {
    StartSuite("security_leases", {"out"}, {"out"}, {"--lease-duration=9s"});
  }

  void TearDown() override { ExpectOthersServed(); }

  // A job that evaluates every window of the sample text at n_ctx 128
  // (~800 windows): long enough to be attacked while it runs.
  static JobSpec LongSpec(const std::string& output) {
    JobSpec spec = FastSpec(*root_ + "/models/stories260K", output);
    spec.mutable_evaluation()->set_disabled(false);
    spec.mutable_evaluation()->set_dataset_uri("file://" + *root_ + "/models/eval.txt");
    spec.mutable_evaluation()->set_n_ctx(128);
    return spec;
  }

  // The lease as an attacker would guess it: the job's name, its attempt as
  // the token, and any other (secret) string field of Lease set to a guess.
  static quantd::v1::Lease GuessedLease(const Job& job) {
    quantd::v1::Lease lease;
    lease.set_job(job.name());
    lease.set_token(job.attempt());
    const auto* d = lease.GetDescriptor();
    for (int i = 0; i < d->field_count(); ++i) {
      const auto* f = d->field(i);
      if (f->name() == "job" || f->is_repeated()) continue;
      if (f->type() == google::protobuf::FieldDescriptor::TYPE_STRING) {
        lease.GetReflection()->SetString(&lease, f, "0123456789abcdef0123456789abcdef");
      } else if (f->type() == google::protobuf::FieldDescriptor::TYPE_BYTES) {
        lease.GetReflection()->SetString(&lease, f, std::string(16, '\x01'));
      }
    }
    return lease;
  }
};

TEST_F(LeaseAttacksTest, AForgedCompleteJobIsRefusedAndTheRealResultStands) {
  Client acme(server_->address(), tokens_->acme);
  const std::string out = *root_ + "/out/real";
  Job job;
  const grpc::Status created = acme.Create(LongSpec("file://" + out), &job);
  ASSERT_TRUE(created.ok()) << Describe(created);
  ASSERT_TRUE(e2e::WaitUntil([&] {
    acme.Get(job.name(), &job);
    return job.state() == quantd::v1::RUNNING || e2e::IsTerminal(job.state());
  }));
  ASSERT_EQ(job.state(), quantd::v1::RUNNING) << job.error().message();

  const quantd::v1::Lease guessed = GuessedLease(job);
  quantd::v1::CompleteJobRequest complete;
  *complete.mutable_lease() = guessed;
  complete.mutable_result()->add_artifacts()->set_uri("file:///forged/by/attacker");
  quantd::v1::FailJobRequest fail;
  *fail.mutable_lease() = guessed;
  fail.mutable_error()->set_code(13);
  fail.mutable_error()->set_message("forged failure");
  quantd::v1::HeartbeatRequest heartbeat;
  *heartbeat.mutable_lease() = guessed;
  heartbeat.mutable_worker()->set_id("attacker");
  heartbeat.mutable_worker()->set_device("cpu");

  struct Caller {
    const char* who;
    std::string token;
    std::vector<grpc::StatusCode> refused;
  };
  const std::vector<Caller> callers = {
      // Another worker credential with a guessed lease: not its lease.
      {"another worker credential",
       tokens_->attacker,
       {grpc::StatusCode::FAILED_PRECONDITION, grpc::StatusCode::PERMISSION_DENIED}},
      // Admins no longer call the WorkerService.
      {"the admin credential", tokens_->admin, {grpc::StatusCode::PERMISSION_DENIED}},
      {"a submitter", tokens_->acme, {grpc::StatusCode::PERMISSION_DENIED}},
      {"no credential", "", {grpc::StatusCode::UNAUTHENTICATED}},
  };
  for (const Caller& c : callers) {
    SCOPED_TRACE(c.who);
    Client forger(server_->address(), c.token);
    auto refused = [&](const grpc::Status& s) {
      for (grpc::StatusCode code : c.refused)
        if (s.error_code() == code) return true;
      return false;
    };
    {
      grpc::ClientContext ctx;
      forger.Prepare(&ctx);
      quantd::v1::CompleteJobResponse resp;
      const grpc::Status s = forger.workers().CompleteJob(&ctx, complete, &resp);
      EXPECT_TRUE(refused(s)) << "CompleteJob: " << Describe(s);
    }
    {
      grpc::ClientContext ctx;
      forger.Prepare(&ctx);
      quantd::v1::FailJobResponse resp;
      const grpc::Status s = forger.workers().FailJob(&ctx, fail, &resp);
      EXPECT_TRUE(refused(s)) << "FailJob: " << Describe(s);
    }
    {
      grpc::ClientContext ctx;
      forger.Prepare(&ctx);
      quantd::v1::HeartbeatResponse resp;
      const grpc::Status s = forger.workers().Heartbeat(&ctx, heartbeat, &resp);
      EXPECT_TRUE(refused(s)) << "Heartbeat: " << Describe(s);
    }
  }
  // The forgeries were made while the real worker held the job.
  Job during;
  ASSERT_TRUE(acme.Get(job.name(), &during).ok());
  EXPECT_EQ(during.state(), quantd::v1::RUNNING)
      << "the job ended during the forgeries: " << during.error().message();

  job = acme.WaitTerminal(job.name());
  ASSERT_EQ(job.state(), quantd::v1::SUCCEEDED) << job.error().message();
  ASSERT_EQ(job.result().artifacts_size(), 1);
  EXPECT_EQ(job.result().artifacts(0).uri(), "file://" + out);
  EXPECT_TRUE(fs::exists(out + "/model.safetensors"));
  EXPECT_TRUE(job.result().metrics().has_quantized_perplexity());
  std::vector<quantd::v1::JobEvent> events;
  ASSERT_TRUE(acme.Events(job.name(), &events).ok());
  int succeeded = 0;
  for (const auto& ev : events) {
    if (ev.has_state() && ev.state() == quantd::v1::SUCCEEDED) ++succeeded;
    if (ev.has_result())
      for (const auto& a : ev.result().artifacts())
        EXPECT_EQ(a.uri().find("forged"), std::string::npos) << "a forged result was recorded";
  }
  EXPECT_EQ(succeeded, 1);
}

// Work that stops: a cancel during evaluation ends the job from inside the
// evaluation loop (the error says where), with no perplexity and no
// artifact.
TEST_F(LeaseAttacksTest, ACancelDuringEvaluationEndsTheJobCancelled) {
  Client acme(server_->address(), tokens_->acme);
  const std::string out = *root_ + "/out/cancelled";
  Job job;
  ASSERT_TRUE(acme.Create(LongSpec("file://" + out), &job).ok());
  ASSERT_TRUE(e2e::WaitUntil([&] {
    acme.Get(job.name(), &job);
    return job.progress().stage() == quantd::v1::EVALUATE || e2e::IsTerminal(job.state());
  }));
  ASSERT_EQ(job.state(), quantd::v1::RUNNING) << job.error().message();
  Job cancelling;
  const grpc::Status s = acme.Cancel(job.name(), &cancelling);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(cancelling.state(), quantd::v1::CANCELLING);
  job = acme.WaitTerminal(job.name());
  EXPECT_EQ(job.state(), quantd::v1::CANCELLED) << job.error().message();
  EXPECT_EQ(job.error().message().rfind("evaluation cancelled", 0), 0u)
      << "stopped elsewhere than in the evaluation: " << job.error().message();
  EXPECT_FALSE(job.result().metrics().has_quantized_perplexity());
  EXPECT_EQ(job.result().artifacts_size(), 0);
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace quantd::security
