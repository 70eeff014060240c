// LeaseService and LeaseReaper semantics (leasing, fencing, heartbeats,
// events, completion, expiry) on every store backend, with a FakeClock.
#include "server/jobs/lease_service.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "server/jobs/job_transitions.h"
#include "server/jobs/jobs_test_fixture.h"

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

  void ExpectStale(const absl::Status& status) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_EQ(GetReason(status), "STALE_LEASE") << status;
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
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(GetViolations(refused.status()).size(), 2u);
  EXPECT_EQ(GetViolations(refused.status())[0].field, "worker.id");
  EXPECT_EQ(GetViolations(refused.status())[1].field, "worker.device");
  auto submitter = leases_->LeaseJob(Caller{"acme", Role::kSubmitter}, LeaseRequest());
  EXPECT_EQ(submitter.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(leases_->LeaseJob(Caller{"", Role::kWorker}, LeaseRequest()).ok());
}

TEST_P(LeaseServiceTest, LongPollWakesWhenAJobArrives) {
  v1::LeaseJobRequest request = LeaseRequest();
  request.mutable_wait()->set_seconds(20);
  absl::StatusOr<v1::LeaseJobResponse> response;
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
            absl::StatusCode::kInvalidArgument);
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
  EXPECT_EQ(Heartbeat(unknown).code(), absl::StatusCode::kNotFound);
  v1::HeartbeatRequest no_lease;
  EXPECT_EQ(leases_->Heartbeat(Caller::Anonymous(), no_lease).status().code(),
            absl::StatusCode::kInvalidArgument);
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
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<std::string> fields;
  for (const auto& v : GetViolations(refused.status())) fields.push_back(v.field);
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

  // A failure without an error still says something.
  v1::Job other = Create();
  v1::LeaseJobResponse l2 = Lease();
  v1::FailJobRequest bare;
  *bare.mutable_lease() = l2.lease();
  ASSERT_TRUE(leases_->FailJob(Caller::Anonymous(), bare).ok());
  EXPECT_EQ(Get(other.name()).error().code(), 2);
  EXPECT_EQ(Get(other.name()).error().message(), "the worker reported a failure without an error");
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
      EXPECT_EQ(now.error().code(), static_cast<int>(absl::StatusCode::kAborted));
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
