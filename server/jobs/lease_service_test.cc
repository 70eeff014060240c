// LeaseService and LeaseReaper semantics (leasing, fencing, heartbeats,
// events, completion, expiry) on every store backend, with a FakeClock.
#include "server/jobs/lease_service.h"

#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "server/common/secrets.h"
#include "server/jobs/job_transitions.h"
#include "server/jobs/jobs_test_fixture.h"
#include "server/jobs/request_validation.h"
#include "worker/common/status.h"

namespace quantd::server::testing {
namespace {

class LeaseServiceTest : public JobsTest {
 protected:
  v1::Job CreateFor(const std::string& device) {
    v1::CreateJobRequest request = Request();
    request.mutable_spec()->set_device(device);
    auto job = jobs_->CreateJob(Caller::Anonymous(), request);
    EXPECT_TRUE(job.ok()) << job.status();
    return *job;
  }

  // Leases nothing (asserts the queue offers nothing to this worker now).
  void ExpectNothingToLease(const std::string& device = "cpu") {
    auto response = leases_->LeaseJob(Caller::Anonymous(), LeaseRequest("idle", device));
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_FALSE(response->has_job()) << response->job().name();
  }

  int Reap() {
    auto changed = leases_->ReapExpiredLeases();
    EXPECT_TRUE(changed.ok()) << changed.status();
    return changed.ok() ? *changed : -1;
  }

  void ExpectStale(const quantd::Status& status) {
    EXPECT_EQ(status.code(), quantd::StatusCode::kFailedPrecondition) << status;
    EXPECT_EQ(status.reason(), "STALE_LEASE") << status;
  }
};

TEST_P(LeaseServiceTest, LeaseTakesOldestJobAndSetsLeaseFields) {
  v1::Job first = Create("file:///a");
  clock_.Advance(absl::Seconds(1));
  Create("file:///b");
  const absl::Time now = clock_.Now();
  v1::LeaseJobResponse response = Lease("w1", "cpu");
  EXPECT_EQ(response.job().name(), first.name());
  EXPECT_EQ(response.job().state(), v1::RUNNING);
  EXPECT_EQ(response.job().attempt(), 1);
  EXPECT_EQ(response.job().worker(), "w1");
  EXPECT_EQ(FromTimestamp(response.job().start_time()), now);
  EXPECT_EQ(response.lease().job(), first.name());
  EXPECT_EQ(response.lease().token(), 1);
  // 128 random bits; the store keeps only their SHA-256 and the holder.
  ASSERT_EQ(response.lease().secret().size(), 32u);
  for (char c : response.lease().secret()) EXPECT_TRUE(absl::ascii_isxdigit(c));
  auto stored = store_->GetJob(first.name());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->lease_secret_hash, Sha256Digest(response.lease().secret()));
  EXPECT_EQ(stored->lease_holder, kAnonymousIdentity);
  EXPECT_EQ(FromTimestamp(response.lease().expire_time()), now + absl::Seconds(3));
  EXPECT_EQ(response.heartbeat_interval().seconds(), 1);  // a third of the lease

  auto events = Events(first.name());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].log().message(), "leased by worker w1 (cpu), attempt 1 of 3");
  EXPECT_EQ(events[2].state(), v1::RUNNING);
  EXPECT_EQ(events[2].attempt(), 1);
}

TEST_P(LeaseServiceTest, DeviceMatching) {
  v1::Job gpu1 = CreateFor("cuda:1");
  v1::Job any_gpu = CreateFor("cuda");
  v1::Job cpu = CreateFor("cpu");
  v1::Job anywhere = CreateFor("");
  EXPECT_EQ(Lease("c1", "cpu").job().name(), cpu.name());
  EXPECT_EQ(Lease("g0", "cuda:0").job().name(), any_gpu.name());
  EXPECT_EQ(Lease("g0b", "cuda:0").job().name(), anywhere.name());
  ExpectNothingToLease("cuda:0");  // cuda:1 only
  ExpectNothingToLease("cpu");
  EXPECT_EQ(Lease("g1", "cuda:1").job().name(), gpu1.name());
}

TEST_P(LeaseServiceTest, RefusesBadWorkerInfoAndNonWorkers) {
  v1::LeaseJobRequest request;
  request.mutable_worker()->set_device("tpu");
  auto refused = leases_->LeaseJob(Caller::Anonymous(), request);
  EXPECT_EQ(refused.status().code(), quantd::StatusCode::kInvalidArgument);
  ASSERT_EQ(refused.status().violations().size(), 2u);
  EXPECT_EQ(refused.status().violations()[0].field, "worker.id");
  EXPECT_EQ(refused.status().violations()[1].field, "worker.device");
  auto submitter = leases_->LeaseJob(Caller{"acme", Role::kSubmitter}, LeaseRequest());
  EXPECT_EQ(submitter.status().code(), quantd::StatusCode::kPermissionDenied);
  EXPECT_TRUE(leases_->LeaseJob(Caller{"", Role::kWorker}, LeaseRequest()).ok());

  v1::LeaseJobRequest long_id = LeaseRequest(std::string(257, 'w'));
  long_id.set_max_response_bytes(1000);
  auto too_long = leases_->LeaseJob(Caller::Anonymous(), long_id);
  EXPECT_EQ(too_long.status().code(), quantd::StatusCode::kInvalidArgument);
  std::vector<std::string> fields;
  const quantd::Status too_long_status = too_long.status();
  for (const auto& v : too_long_status.violations()) fields.push_back(v.field);
  EXPECT_EQ(fields, (std::vector<std::string>{"worker.id", "max_response_bytes"}));
}

// An admin credential is not a worker: it can neither lease nor act on a
// lease, even one it learned. With authentication off the anonymous caller
// (local workers without tokens) still works.
TEST_P(LeaseServiceTest, AdminCredentialsCannotCallTheWorkerService) {
  const Caller admin{"ops", Role::kAdmin, "sha256:ops"};
  v1::Job job = Create();
  auto refused = leases_->LeaseJob(admin, LeaseRequest());
  EXPECT_EQ(refused.status().code(), quantd::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("admin credential"), std::string::npos);
  v1::LeaseJobResponse lease = Lease("w1", "cpu", WorkerCredential("w1"));
  EXPECT_EQ(Heartbeat(lease.lease(), admin).code(), quantd::StatusCode::kPermissionDenied);
  v1::CompleteJobRequest complete;
  *complete.mutable_lease() = lease.lease();
  complete.mutable_result()->add_artifacts()->set_uri("file:///forged");
  EXPECT_EQ(leases_->CompleteJob(admin, complete).status().code(),
            quantd::StatusCode::kPermissionDenied);
  v1::FailJobRequest fail;
  *fail.mutable_lease() = lease.lease();
  EXPECT_EQ(leases_->FailJob(admin, fail).status().code(), quantd::StatusCode::kPermissionDenied);
  v1::ReportEventsRequest report;
  *report.mutable_lease() = lease.lease();
  EXPECT_EQ(leases_->ReportEvents(admin, report).status().code(),
            quantd::StatusCode::kPermissionDenied);
  EXPECT_EQ(Get(job.name()).state(), v1::RUNNING);
  EXPECT_TRUE(Caller::Anonymous().MayWork());
}

// Whoever does not have the lease's secret (a forged lease from the job's
// generation, a guessed or missing secret) is STALE_LEASE; another worker
// credential, even with the right secret, is PERMISSION_DENIED. Nothing
// changes, and the real holder carries on.
TEST_P(LeaseServiceTest, ForgedLeasesAndOtherCredentialsChangeNothing) {
  v1::Job job = Create();
  const Caller holder = WorkerCredential("holder");
  const Caller other = WorkerCredential("other");
  v1::LeaseJobResponse lease = Lease("w1", "cpu", holder);
  const size_t events_before = Events(job.name()).size();

  v1::Lease guessed = lease.lease();
  guessed.set_secret("00000000000000000000000000000000");
  v1::Lease missing = lease.lease();
  missing.clear_secret();
  v1::Lease forged;  // what an attacker knows: the job and its generation
  forged.set_job(job.name());
  forged.set_token(1);
  for (const v1::Lease& bad : {guessed, missing, forged}) {
    ExpectStale(Heartbeat(bad, holder));
    v1::ReportEventsRequest report;
    *report.mutable_lease() = bad;
    report.add_events()->mutable_log()->set_message("forged");
    ExpectStale(leases_->ReportEvents(holder, report).status());
    v1::CompleteJobRequest complete;
    *complete.mutable_lease() = bad;
    complete.mutable_result()->add_artifacts()->set_uri("file:///attacker/artifact");
    ExpectStale(leases_->CompleteJob(holder, complete).status());
    v1::FailJobRequest fail;
    *fail.mutable_lease() = bad;
    ExpectStale(leases_->FailJob(holder, fail).status());
  }
  auto stale = Heartbeat(guessed, holder);
  EXPECT_EQ(stale.message().find(lease.lease().secret()), std::string::npos);  // never echoed

  for (const v1::Lease& any : {lease.lease(), guessed}) {
    quantd::Status denied = Heartbeat(any, other);
    EXPECT_EQ(denied.code(), quantd::StatusCode::kPermissionDenied) << denied;
    EXPECT_EQ(denied.reason(), "LEASE_HELD_BY_ANOTHER_CREDENTIAL");
    v1::CompleteJobRequest complete;
    *complete.mutable_lease() = any;
    EXPECT_EQ(leases_->CompleteJob(other, complete).status().code(),
              quantd::StatusCode::kPermissionDenied);
    v1::FailJobRequest fail;
    *fail.mutable_lease() = any;
    EXPECT_EQ(leases_->FailJob(other, fail).status().code(), quantd::StatusCode::kPermissionDenied);
  }
  // The anonymous caller is just another identity to a lease a worker
  // credential took.
  EXPECT_EQ(Heartbeat(lease.lease(), Caller::Anonymous()).code(),
            quantd::StatusCode::kPermissionDenied);

  v1::Job now = Get(job.name());
  EXPECT_EQ(now.state(), v1::RUNNING);
  EXPECT_FALSE(now.has_result());
  EXPECT_EQ(Events(job.name()).size(), events_before);
  EXPECT_TRUE(Heartbeat(lease.lease(), holder).ok());
  v1::CompleteJobRequest real;
  *real.mutable_lease() = lease.lease();
  real.mutable_result()->add_artifacts()->set_uri("file:///real/artifact");
  ASSERT_TRUE(leases_->CompleteJob(holder, real).ok());
  EXPECT_EQ(Get(job.name()).result().artifacts(0).uri(), "file:///real/artifact");
}

// Each lease has its own secret: a re-lease of the same job (same holder)
// makes the first one useless.
TEST_P(LeaseServiceTest, EveryLeaseHasItsOwnSecret) {
  v1::Job job = Create();
  const Caller worker = WorkerCredential("w");
  v1::LeaseJobResponse first = Lease("w1", "cpu", worker);
  clock_.Advance(absl::Seconds(4));
  EXPECT_EQ(Reap(), 1);
  clock_.Advance(absl::Seconds(2));
  v1::LeaseJobResponse second = Lease("w1", "cpu", worker);
  ASSERT_EQ(second.job().name(), job.name());
  EXPECT_NE(first.lease().secret(), second.lease().secret());
  v1::Lease old_secret = second.lease();
  old_secret.set_secret(first.lease().secret());
  ExpectStale(Heartbeat(old_secret, worker));
  // The secret is in no stored job or event.
  auto record = store_->GetJob(job.name());
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->job.SerializeAsString().find(second.lease().secret()), std::string::npos);
  for (const v1::JobEvent& e : Events(job.name())) {
    EXPECT_EQ(e.SerializeAsString().find(second.lease().secret()), std::string::npos);
  }
  // The heartbeat answer hands the secret back with the renewed lease.
  v1::HeartbeatRequest beat;
  *beat.mutable_lease() = second.lease();
  auto renewed = leases_->Heartbeat(worker, beat);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_EQ(renewed->lease().secret(), second.lease().secret());
}

TEST_P(LeaseServiceTest, LongPollWakesWhenAJobArrives) {
  v1::LeaseJobRequest request = LeaseRequest();
  request.mutable_wait()->set_seconds(20);
  quantd::StatusOr<v1::LeaseJobResponse> response = quantd::UnknownError("no answer yet");
  std::thread worker([&] { response = leases_->LeaseJob(Caller::Anonymous(), request); });
  absl::SleepFor(absl::Milliseconds(100));  // let the worker start waiting
  const absl::Time start = absl::Now();
  v1::Job job = Create();
  worker.join();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->job().name(), job.name());
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST_P(LeaseServiceTest, LongPollGivesUpAfterItsWait) {
  v1::LeaseJobRequest request = LeaseRequest();
  request.mutable_wait()->set_nanos(200'000'000);
  const absl::Time start = absl::Now();
  auto response = leases_->LeaseJob(Caller::Anonymous(), request);
  ASSERT_TRUE(response.ok());
  EXPECT_FALSE(response->has_job());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(190));
  request.mutable_wait()->set_seconds(-1);
  EXPECT_EQ(leases_->LeaseJob(Caller::Anonymous(), request).status().code(),
            quantd::StatusCode::kInvalidArgument);
  // A cancelled RPC stops waiting.
  request.mutable_wait()->set_seconds(30);
  request.mutable_wait()->set_nanos(0);
  const absl::Time cancelled_at = absl::Now();
  EXPECT_FALSE(leases_->LeaseJob(Caller::Anonymous(), request, [] { return true; })->has_job());
  EXPECT_LT(absl::Now() - cancelled_at, absl::Seconds(5));
}

TEST_P(LeaseServiceTest, HeartbeatRenewsLeaseAndRecordsProgress) {
  v1::Job job = Create();
  v1::LeaseJobResponse lease = Lease();
  clock_.Advance(absl::Seconds(2));
  v1::HeartbeatRequest request;
  *request.mutable_lease() = lease.lease();
  request.mutable_progress()->set_stage(v1::CALIBRATE);
  request.mutable_progress()->set_block(3);
  request.mutable_progress()->set_block_count(8);
  auto response = leases_->Heartbeat(Caller::Anonymous(), request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_FALSE(response->cancel_requested());
  EXPECT_EQ(response->lease().token(), 1);
  EXPECT_EQ(FromTimestamp(response->lease().expire_time()), clock_.Now() + absl::Seconds(3));
  EXPECT_EQ(Get(job.name()).progress().block(), 3);
  // Past the original expiry but within the renewed one: the reaper leaves it.
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(Reap(), 0);
  EXPECT_EQ(Get(job.name()).state(), v1::RUNNING);
}

TEST_P(LeaseServiceTest, StaleAndForeignTokensChangeNothing) {
  v1::Job job = Create();
  v1::LeaseJobResponse first = Lease("w1");
  // The lease expires, the job is re-queued and leased by w2.
  clock_.Advance(absl::Seconds(4));
  EXPECT_EQ(Reap(), 1);
  clock_.Advance(absl::Seconds(2));  // past the 1 s backoff
  v1::LeaseJobResponse second = Lease("w2");
  ASSERT_EQ(second.job().name(), job.name());
  EXPECT_EQ(second.job().attempt(), 2);
  EXPECT_EQ(second.lease().token(), 2);
  const size_t events_before = Events(job.name()).size();

  // w1 comes back with its old token: every call is refused.
  ExpectStale(Heartbeat(first.lease()));
  v1::ReportEventsRequest report;
  *report.mutable_lease() = first.lease();
  report.add_events()->mutable_log()->set_message("from a zombie");
  ExpectStale(leases_->ReportEvents(Caller::Anonymous(), report).status());
  v1::CompleteJobRequest complete;
  *complete.mutable_lease() = first.lease();
  ExpectStale(leases_->CompleteJob(Caller::Anonymous(), complete).status());
  v1::FailJobRequest fail;
  *fail.mutable_lease() = first.lease();
  ExpectStale(leases_->FailJob(Caller::Anonymous(), fail).status());
  // A token from the future, or for another job, is refused too.
  v1::Lease forged = second.lease();
  forged.set_token(99);
  ExpectStale(Heartbeat(forged));

  v1::Job now = Get(job.name());
  EXPECT_EQ(now.state(), v1::RUNNING);
  EXPECT_EQ(now.worker(), "w2");
  EXPECT_EQ(Events(job.name()).size(), events_before);
  // The current holder is unaffected.
  EXPECT_TRUE(Heartbeat(second.lease()).ok());

  v1::Lease unknown = second.lease();
  unknown.set_job("jobs/00000000000000000000000000");
  EXPECT_EQ(Heartbeat(unknown).code(), quantd::StatusCode::kNotFound);
  v1::HeartbeatRequest no_lease;
  EXPECT_EQ(leases_->Heartbeat(Caller::Anonymous(), no_lease).status().code(),
            quantd::StatusCode::kInvalidArgument);
}

TEST_P(LeaseServiceTest, ReportedEventsAreNumberedAndProgressIsKept) {
  v1::Job job = Create();
  v1::LeaseJobResponse lease = Lease();
  v1::ReportEventsRequest report;
  *report.mutable_lease() = lease.lease();
  auto* progress = report.add_events()->mutable_progress();
  progress->set_stage(v1::QUANTIZE);
  progress->set_block(2);
  progress->set_block_count(4);
  progress->set_percent(50);
  report.add_events()->mutable_block_metrics()->set_block(2);
  v1::JobEvent* log = report.add_events();
  log->mutable_log()->set_message("hello");
  log->set_sequence(1234);  // ignored: the server numbers events
  auto response = leases_->ReportEvents(Caller::Anonymous(), report);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_FALSE(response->cancel_requested());

  auto events = Events(job.name(), 3);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].sequence(), 4);
  EXPECT_EQ(events[0].progress().percent(), 50);
  EXPECT_EQ(events[0].attempt(), 1);
  EXPECT_EQ(FromTimestamp(events[0].time()), clock_.Now());
  EXPECT_EQ(events[1].block_metrics().block(), 2);
  EXPECT_EQ(events[2].sequence(), 6);
  EXPECT_EQ(Get(job.name()).progress().stage(), v1::QUANTIZE);

  v1::ReportEventsRequest bad;
  *bad.mutable_lease() = lease.lease();
  bad.add_events()->set_state(v1::SUCCEEDED);
  bad.add_events();
  bad.add_events()->mutable_result();
  auto refused = leases_->ReportEvents(Caller::Anonymous(), bad);
  EXPECT_EQ(refused.status().code(), quantd::StatusCode::kInvalidArgument);
  std::vector<std::string> fields;
  const quantd::Status refused_status = refused.status();
  for (const auto& v : refused_status.violations()) fields.push_back(v.field);
  EXPECT_EQ(fields, (std::vector<std::string>{"events[0].state", "events[1]", "events[2].result"}));
}

TEST_P(LeaseServiceTest, CompleteStoresResultOnceAndRetriesAreHarmless) {
  v1::Job job = Create();
  v1::LeaseJobResponse lease = Lease();
  clock_.Advance(absl::Seconds(1));
  v1::CompleteJobRequest complete;
  *complete.mutable_lease() = lease.lease();
  complete.mutable_result()->mutable_metrics()->mutable_float_perplexity()->set_perplexity(6.9887);
  auto* artifact = complete.mutable_result()->add_artifacts();
  artifact->set_uri("file:///out/a");
  artifact->set_sha256("ab12");
  ASSERT_TRUE(leases_->CompleteJob(Caller::Anonymous(), complete).ok());
  v1::Job done = Get(job.name());
  EXPECT_EQ(done.state(), v1::SUCCEEDED);
  EXPECT_DOUBLE_EQ(done.result().metrics().float_perplexity().perplexity(), 6.9887);
  EXPECT_EQ(done.result().artifacts(0).sha256(), "ab12");
  EXPECT_EQ(FromTimestamp(done.end_time()), clock_.Now());
  EXPECT_EQ(done.progress().percent(), 100);

  const size_t events = Events(job.name()).size();
  EXPECT_TRUE(leases_->CompleteJob(Caller::Anonymous(), complete).ok());  // retry
  EXPECT_EQ(Events(job.name()).size(), events);
  // A repeat with another result is refused, and the first result stands.
  v1::CompleteJobRequest different = complete;
  different.mutable_result()->mutable_artifacts(0)->set_uri("file:///forged");
  auto refused = leases_->CompleteJob(Caller::Anonymous(), different);
  EXPECT_EQ(refused.status().code(), quantd::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().reason(), "JOB_ALREADY_FINISHED");
  // So is the same result with a wrong secret.
  v1::CompleteJobRequest guessed = complete;
  guessed.mutable_lease()->set_secret("ffffffffffffffffffffffffffffffff");
  ExpectStale(leases_->CompleteJob(Caller::Anonymous(), guessed).status());
  EXPECT_EQ(Get(job.name()).result().artifacts(0).uri(), "file:///out/a");
  EXPECT_EQ(Events(job.name()).size(), events);
  auto tail = Events(job.name(), events - 2);
  EXPECT_EQ(tail[0].result().artifacts(0).uri(), "file:///out/a");
  EXPECT_EQ(tail[1].state(), v1::SUCCEEDED);
  // After success, a failure report with the same lease is stale.
  v1::FailJobRequest fail;
  *fail.mutable_lease() = lease.lease();
  ExpectStale(leases_->FailJob(Caller::Anonymous(), fail).status());
}

TEST_P(LeaseServiceTest, FailStoresErrorAndPartialResult) {
  v1::Job job = Create();
  v1::LeaseJobResponse lease = Lease();
  v1::FailJobRequest fail;
  *fail.mutable_lease() = lease.lease();
  fail.mutable_error()->set_code(3);
  fail.mutable_error()->set_message(
      "model.layers.0.mlp.down_proj: input width 11 is not divisible by group size 128");
  fail.mutable_result()->mutable_metrics()->set_float_model_bytes(1000);
  ASSERT_TRUE(leases_->FailJob(Caller::Anonymous(), fail).ok());
  v1::Job failed = Get(job.name());
  EXPECT_EQ(failed.state(), v1::FAILED);
  EXPECT_EQ(failed.error().code(), 3);
  EXPECT_EQ(failed.error().message(), fail.error().message());
  EXPECT_EQ(failed.result().metrics().float_model_bytes(), 1000);
  auto events = Events(job.name());
  EXPECT_EQ(events[events.size() - 2].log().message(), fail.error().message());
  EXPECT_EQ(events.back().state(), v1::FAILED);
  EXPECT_TRUE(leases_->FailJob(Caller::Anonymous(), fail).ok());  // retry
  v1::FailJobRequest other_error = fail;
  other_error.mutable_error()->set_message("something else");
  auto refused = leases_->FailJob(Caller::Anonymous(), other_error);
  EXPECT_EQ(refused.status().code(), quantd::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().reason(), "JOB_ALREADY_FINISHED");
  EXPECT_EQ(Get(job.name()).error().message(), fail.error().message());

  // A failure without an error still says something.
  v1::Job other = Create();
  v1::LeaseJobResponse l2 = Lease();
  v1::FailJobRequest bare;
  *bare.mutable_lease() = l2.lease();
  ASSERT_TRUE(leases_->FailJob(Caller::Anonymous(), bare).ok());
  EXPECT_EQ(Get(other.name()).error().code(), 2);
  EXPECT_EQ(Get(other.name()).error().message(), "the worker reported a failure without an error");
}

// Workers may only store what every client can read back: events, progress,
// results and errors over their limits are refused naming the field, and
// nothing is written.
TEST_P(LeaseServiceTest, OversizedWorkerReportsAreRefused) {
  v1::Job job = Create();
  v1::LeaseJobResponse lease = Lease();
  const size_t events_before = Events(job.name()).size();
  v1::ReportEventsRequest report;
  *report.mutable_lease() = lease.lease();
  report.add_events()->mutable_log()->set_message("fine");
  report.add_events()->mutable_log()->set_message(std::string(kMaxEventBytes, 'x'));
  report.add_events()->mutable_progress()->set_message(std::string(kMaxProgressBytes, 'p'));
  auto refused = leases_->ReportEvents(Caller::Anonymous(), report);
  EXPECT_EQ(refused.status().code(), quantd::StatusCode::kInvalidArgument);
  std::vector<std::string> fields;
  const quantd::Status refused_status = refused.status();
  for (const auto& v : refused_status.violations()) fields.push_back(v.field);
  EXPECT_EQ(fields, (std::vector<std::string>{"events[1]", "events[2].progress"}));
  EXPECT_EQ(Events(job.name()).size(), events_before);

  v1::HeartbeatRequest beat;
  *beat.mutable_lease() = lease.lease();
  beat.mutable_progress()->set_message(std::string(kMaxProgressBytes, 'p'));
  EXPECT_EQ(leases_->Heartbeat(Caller::Anonymous(), beat).status().code(),
            quantd::StatusCode::kInvalidArgument);

  v1::CompleteJobRequest complete;
  *complete.mutable_lease() = lease.lease();
  complete.mutable_result()->add_artifacts()->set_uri(std::string(kMaxResultBytes, 'u'));
  auto big_result = leases_->CompleteJob(Caller::Anonymous(), complete);
  EXPECT_EQ(big_result.status().code(), quantd::StatusCode::kInvalidArgument);
  EXPECT_EQ(big_result.status().violations().at(0).field, "result");
  v1::FailJobRequest fail;
  *fail.mutable_lease() = lease.lease();
  fail.mutable_error()->set_code(13);
  fail.mutable_error()->set_message(std::string(kMaxErrorBytes, 'e'));
  *fail.mutable_result() = complete.result();
  auto big_failure = leases_->FailJob(Caller::Anonymous(), fail);
  fields.clear();
  const quantd::Status big_failure_status = big_failure.status();
  for (const auto& v : big_failure_status.violations()) fields.push_back(v.field);
  EXPECT_EQ(fields, (std::vector<std::string>{"error", "result"}));
  EXPECT_EQ(Get(job.name()).state(), v1::RUNNING);
  EXPECT_EQ(Events(job.name()).size(), events_before);
}

// A job whose lease is larger than the worker can receive (a spec stored
// before the size limit) is never handed out: it FAILS at once with
// LEASE_UNDELIVERABLE and the same call leases the next job.
TEST_P(LeaseServiceTest, UndeliverableLeaseFailsTheJobAndTheWorkerGetsTheNext) {
  v1::Job big = Create("file:///big");
  clock_.Advance(absl::Seconds(1));
  v1::Job small = Create("file:///small");
  ASSERT_TRUE(store_
                  ->UpdateJob(big.name(),
                              [](JobRecord& r, JobUpdate&) {
                                r.job.mutable_spec()->mutable_quantization()->set_quark_json(
                                    std::string(kDefaultWorkerReceiveBytes, '['));
                                return quantd::OkStatus();
                              })
                  .ok());
  v1::LeaseJobResponse lease = Lease();
  EXPECT_EQ(lease.job().name(), small.name());
  EXPECT_LE(lease.ByteSizeLong(), static_cast<size_t>(kDefaultWorkerReceiveBytes));

  v1::Job failed = Get(big.name());
  EXPECT_EQ(failed.state(), v1::FAILED);
  EXPECT_EQ(failed.attempt(), 0);  // never ran
  EXPECT_EQ(failed.error().code(), static_cast<int>(quantd::StatusCode::kFailedPrecondition));
  EXPECT_NE(failed.error().message().find("more than worker w1 can receive (4194304 bytes)"),
            std::string::npos)
      << failed.error().message();
  google::rpc::ErrorInfo info;
  ASSERT_EQ(failed.error().details_size(), 1);
  ASSERT_TRUE(failed.error().details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), "LEASE_UNDELIVERABLE");
  EXPECT_EQ(info.metadata().at("worker"), "w1");
  auto events = Events(big.name());
  EXPECT_EQ(events.back().state(), v1::FAILED);
  EXPECT_EQ(events[events.size() - 2].log().severity(), v1::ERROR);
  auto stored = store_->GetJob(big.name());
  EXPECT_EQ(stored->lease_secret_hash, "");  // no lease was handed out

  // A worker that says it receives less gets less: a 1.5 MiB spec is
  // deliverable by default but not to a 1 MiB worker.
  v1::Job medium = Create("file:///medium");
  ASSERT_TRUE(store_
                  ->UpdateJob(medium.name(),
                              [](JobRecord& r, JobUpdate&) {
                                r.job.mutable_spec()->mutable_quantization()->set_quark_json(
                                    std::string(3 << 19, 'x'));
                                return quantd::OkStatus();
                              })
                  .ok());
  v1::LeaseJobRequest small_worker = LeaseRequest("tiny");
  small_worker.set_max_response_bytes(kMinWorkerReceiveBytes);
  auto none = leases_->LeaseJob(Caller::Anonymous(), small_worker);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_job());
  EXPECT_EQ(Get(medium.name()).state(), v1::FAILED);
}

TEST_P(LeaseServiceTest, ExpiredLeaseRequeuesWithBackoffThenFailsAtMaxAttempts) {
  v1::Job job = Create();
  for (int attempt = 1; attempt <= 3; ++attempt) {
    v1::LeaseJobResponse lease = Lease(absl::StrCat("w", attempt));
    ASSERT_EQ(lease.job().attempt(), attempt);
    clock_.Advance(absl::Seconds(2));
    EXPECT_EQ(Reap(), 0);              // not yet expired
    clock_.Advance(absl::Seconds(1));  // exactly at expiry
    EXPECT_EQ(Reap(), 1);
    v1::Job now = Get(job.name());
    if (attempt < 3) {
      EXPECT_EQ(now.state(), v1::QUEUED);
      auto events = Events(job.name());
      EXPECT_EQ(events[events.size() - 2].log().message(),
                absl::StrCat("lease expired on worker w", attempt, ", attempt ", attempt,
                             "; queued again (eligible in ", attempt == 1 ? "1s" : "2s", ")"));
      EXPECT_EQ(events.back().state(), v1::QUEUED);
      // Backoff: 1 s after the first expiry, 2 s after the second.
      clock_.Advance(absl::Seconds(attempt) - absl::Milliseconds(1));
      ExpectNothingToLease();
      clock_.Advance(absl::Milliseconds(1));
    } else {
      EXPECT_EQ(now.state(), v1::FAILED);
      EXPECT_EQ(now.error().code(), static_cast<int>(quantd::StatusCode::kAborted));
      EXPECT_EQ(now.error().message(), "lease expired on worker w3, attempt 3 of 3; giving up");
      ASSERT_EQ(now.error().details_size(), 1);
      google::rpc::ErrorInfo info;
      ASSERT_TRUE(now.error().details(0).UnpackTo(&info));
      EXPECT_EQ(info.reason(), "LEASE_EXPIRED_MAX_ATTEMPTS");
      EXPECT_EQ(info.domain(), "quantd");
      EXPECT_EQ(Events(job.name()).back().state(), v1::FAILED);
    }
  }
  ExpectNothingToLease();
  EXPECT_EQ(Reap(), 0);
}

TEST_P(LeaseServiceTest, ExpiredCancellingLeaseEndsCancelled) {
  v1::Job job = Create();
  Lease();
  v1::CancelJobRequest cancel;
  cancel.set_name(job.name());
  ASSERT_EQ(jobs_->CancelJob(Caller::Anonymous(), cancel)->state(), v1::CANCELLING);
  clock_.Advance(absl::Seconds(3));
  EXPECT_EQ(Reap(), 1);
  EXPECT_EQ(Get(job.name()).state(), v1::CANCELLED);
  EXPECT_EQ(Events(job.name()).back().state(), v1::CANCELLED);
}

TEST_P(LeaseServiceTest, ReaperLoopRunsOnTheClock) {
  LeaseReaper reaper(leases_.get(), &clock_, absl::Milliseconds(750));
  reaper.Start();
  ASSERT_TRUE(reaper.AwaitPass(clock_.Now(), absl::Seconds(30)));
  v1::Job job = Create();
  v1::LeaseJobResponse lease = Lease();
  clock_.Advance(absl::Seconds(3));
  ASSERT_TRUE(reaper.AwaitPass(clock_.Now(), absl::Seconds(30)));
  EXPECT_EQ(Get(job.name()).state(), v1::QUEUED);
  EXPECT_EQ(reaper.reaped(), 1);
  reaper.Stop();
  EXPECT_GE(reaper.passes(), 2);
}

TEST_P(LeaseServiceTest, ExpiredLeaseOfACompletedAttemptIsIgnored) {
  v1::Job job = Create();
  v1::LeaseJobResponse lease = Lease();
  v1::CompleteJobRequest complete;
  *complete.mutable_lease() = lease.lease();
  ASSERT_TRUE(leases_->CompleteJob(Caller::Anonymous(), complete).ok());
  clock_.Advance(absl::Minutes(5));
  EXPECT_EQ(Reap(), 0);
  EXPECT_EQ(Get(job.name()).state(), v1::SUCCEEDED);
}

INSTANTIATE_TEST_SUITE_P(Backends, LeaseServiceTest, ::testing::ValuesIn(AllTestBackends()),
                         BackendName);

}  // namespace
}  // namespace quantd::server::testing
