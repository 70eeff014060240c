#include "worker/runner/lease_loop.h"

#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>

#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "google/rpc/error_details.pb.h"
#include "gtest/gtest.h"
#include "worker/job_spec/rpc_status.h"

namespace quantd::worker {
namespace {

using google::protobuf::util::TimeUtil;
using quantd::v1::JobEvent;

// A WorkerService that hands out one job and records everything it hears.
class FakeWorkerService final : public quantd::v1::WorkerService::Service {
 public:
  grpc::Status LeaseJob(grpc::ServerContext*, const quantd::v1::LeaseJobRequest* req,
                        quantd::v1::LeaseJobResponse* resp) override {
    std::lock_guard<std::mutex> l(mu);
    if (fail_leases > 0) {
      --fail_leases;
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
    }
    lease_worker = req->worker().id();
    lease_worker_info = req->worker();
    lease_max_response_bytes = req->max_response_bytes();
    if (handed_out) return grpc::Status::OK;
    handed_out = true;
    resp->mutable_job()->set_name("jobs/abc");
    resp->mutable_job()->set_attempt(1);
    resp->mutable_lease()->set_job("jobs/abc");
    resp->mutable_lease()->set_token(7);
    resp->mutable_lease()->set_secret(lease_secret);
    *resp->mutable_lease()->mutable_expire_time() =
        TimeUtil::GetCurrentTime() + TimeUtil::SecondsToDuration(30);
    *resp->mutable_heartbeat_interval() = TimeUtil::MillisecondsToDuration(50);
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const quantd::v1::HeartbeatRequest* req,
                         quantd::v1::HeartbeatResponse* resp) override {
    std::lock_guard<std::mutex> l(mu);
    ++heartbeats;
    secrets_seen.push_back(req->lease().secret());
    if (req->lease().token() != 7)
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "stale");
    if (stale_after_heartbeats > 0 && heartbeats >= stale_after_heartbeats)
      return grpc::Status(stale_code, "STALE_LEASE");
    heartbeat_progress.push_back(req->progress());
    heartbeat_worker_info = req->worker();
    // A renewed lease as quantd sends it; the worker keeps its secret even
    // when an answer leaves it out.
    *resp->mutable_lease() = req->lease();
    resp->mutable_lease()->clear_secret();
    resp->set_cancel_requested(cancel);
    return grpc::Status::OK;
  }
  grpc::Status ReportEvents(grpc::ServerContext*, const quantd::v1::ReportEventsRequest* req,
                            quantd::v1::ReportEventsResponse* resp) override {
    std::lock_guard<std::mutex> l(mu);
    secrets_seen.push_back(req->lease().secret());
    for (const auto& e : req->events()) {
      if (e.log().message() == "poison") {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "events[0]: too large");
      }
    }
    for (const auto& e : req->events()) events.push_back(e);
    resp->set_cancel_requested(cancel);
    return grpc::Status::OK;
  }
  grpc::Status CompleteJob(grpc::ServerContext*, const quantd::v1::CompleteJobRequest* req,
                           quantd::v1::CompleteJobResponse*) override {
    std::lock_guard<std::mutex> l(mu);
    secrets_seen.push_back(req->lease().secret());
    if (refuse_results) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "result: 3000000 bytes, at most 2097152");
    }
    completed.push_back(*req);
    return grpc::Status::OK;
  }
  grpc::Status FailJob(grpc::ServerContext*, const quantd::v1::FailJobRequest* req,
                       quantd::v1::FailJobResponse*) override {
    std::lock_guard<std::mutex> l(mu);
    secrets_seen.push_back(req->lease().secret());
    failed.push_back(*req);
    return grpc::Status::OK;
  }

  std::mutex mu;
  bool handed_out = false;
  bool cancel = false;
  int fail_leases = 0;
  int heartbeats = 0;
  quantd::v1::WorkerInfo lease_worker_info;
  quantd::v1::WorkerInfo heartbeat_worker_info;
  int stale_after_heartbeats = 0;
  grpc::StatusCode stale_code = grpc::StatusCode::FAILED_PRECONDITION;
  bool refuse_results = false;
  std::string lease_secret = "0123456789abcdef0123456789abcdef";
  int64_t lease_max_response_bytes = -1;
  std::vector<std::string> secrets_seen;
  std::string lease_worker;
  std::vector<quantd::v1::Progress> heartbeat_progress;
  std::vector<JobEvent> events;
  std::vector<quantd::v1::CompleteJobRequest> completed;
  std::vector<quantd::v1::FailJobRequest> failed;
};

// Runs a scripted job: reports progress for `blocks` blocks, checking for
// cancellation between them, like the real pipeline does.
class ScriptedExecutor : public JobExecutor {
 public:
  ExecutionOutcome Execute(const quantd::v1::Job& job, JobContext& ctx) override {
    ExecutionOutcome out;
    seen_job = job.name();
    quantd::v1::JobEvent log;
    log.mutable_log()->set_message("starting");
    ctx.Report(log);
    for (int b = 1; b <= blocks; ++b) {
      if (ctx.CancelRequested()) {
        out.cancelled = true;
        return out;
      }
      quantd::v1::Progress p;
      p.set_stage(quantd::v1::QUANTIZE);
      p.set_block(b);
      p.set_block_count(blocks);
      p.set_percent(100.0 * b / blocks);
      ctx.SetProgress(p);
      std::this_thread::sleep_for(std::chrono::milliseconds(block_ms));
    }
    if (throw_int) throw 42;
    if (throw_runtime) throw std::runtime_error("tokenizer exploded");
    if (poison_event) {
      quantd::v1::JobEvent poison;
      poison.mutable_log()->set_message("poison");
      ctx.Report(poison);
      quantd::v1::JobEvent after;
      after.mutable_log()->set_message("after the poison");
      ctx.Report(after);
    }
    if (!error.ok()) {
      out.status = error;
      return out;
    }
    out.result.mutable_metrics()->mutable_quantized_perplexity()->set_perplexity(7.25);
    return out;
  }
  int blocks = 4;
  int block_ms = 60;
  Status error;
  bool throw_int = false;
  bool throw_runtime = false;
  bool poison_event = false;
  std::string seen_job;
};

class LeaseLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(&service_);
    server_ = b.BuildAndStart();
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override { server_->Shutdown(); }

  int RunOneJob(std::function<void(quantd::v1::WorkerInfo*)> describe_memory = nullptr) {
    LeaseLoopOptions opt;
    opt.describe_memory = std::move(describe_memory);
    opt.worker_id = "w-test";
    opt.lease_wait = std::chrono::seconds(0);
    opt.max_jobs = 1;
    opt.tick = std::chrono::milliseconds(10);
    opt.max_backoff = std::chrono::milliseconds(50);
    LeaseLoop loop(channel_, &executor_, opt);
    return loop.Run();
  }

  FakeWorkerService service_;
  ScriptedExecutor executor_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(LeaseLoopTest, RunsJobStreamsProgressAndCompletes) {
  EXPECT_EQ(RunOneJob(), 1);
  std::lock_guard<std::mutex> l(service_.mu);
  EXPECT_EQ(executor_.seen_job, "jobs/abc");
  EXPECT_EQ(service_.lease_worker, "w-test");
  ASSERT_EQ(service_.completed.size(), 1u);
  EXPECT_TRUE(service_.failed.empty());
  EXPECT_EQ(service_.completed[0].lease().token(), 7);
  EXPECT_DOUBLE_EQ(service_.completed[0].result().metrics().quantized_perplexity().perplexity(),
                   7.25);
  // Events: the log first, then one progress event per block in order, the
  // last one at block 4/4 (sent before CompleteJob).
  ASSERT_GE(service_.events.size(), 2u);
  EXPECT_EQ(service_.events[0].log().message(), "starting");
  EXPECT_EQ(service_.events[0].job(), "jobs/abc");
  int last_block = 0;
  for (size_t i = 1; i < service_.events.size(); ++i) {
    ASSERT_TRUE(service_.events[i].has_progress());
    EXPECT_GT(service_.events[i].progress().block(), last_block);
    last_block = service_.events[i].progress().block();
  }
  EXPECT_EQ(last_block, 4);
  EXPECT_GE(service_.heartbeats, 2);  // 240 ms of work, 50 ms heartbeats
}

// A GPU worker's memory rides on every LeaseJob and Heartbeat.
TEST_F(LeaseLoopTest, GpuMemoryIsReportedWithLeasesAndHeartbeats) {
  int64_t used = 1000;
  EXPECT_EQ(RunOneJob([&](quantd::v1::WorkerInfo* w) {
              w->set_gpu_memory_total_bytes(80'000'000'000);
              w->set_gpu_memory_used_bytes(used += 1000);
            }),
            1);
  std::lock_guard<std::mutex> l(service_.mu);
  EXPECT_EQ(service_.lease_worker_info.gpu_memory_total_bytes(), 80'000'000'000);
  EXPECT_GT(service_.lease_worker_info.gpu_memory_used_bytes(), 1000);
  EXPECT_EQ(service_.heartbeat_worker_info.gpu_memory_total_bytes(), 80'000'000'000);
  EXPECT_GT(service_.heartbeat_worker_info.gpu_memory_used_bytes(),
            service_.lease_worker_info.gpu_memory_used_bytes());
}

// Blocks far shorter than the background tick: every block still reaches
// the event stream, in order (a CI run once missed "quantize block 5/5").
TEST_F(LeaseLoopTest, FastBlocksEachGetAProgressEvent) {
  executor_.blocks = 40;
  executor_.block_ms = 0;
  EXPECT_EQ(RunOneJob(), 1);
  std::lock_guard<std::mutex> l(service_.mu);
  std::vector<int> blocks;
  for (const auto& e : service_.events) {
    if (e.has_progress()) blocks.push_back(e.progress().block());
  }
  ASSERT_EQ(blocks.size(), 40u);
  for (int b = 1; b <= 40; ++b) EXPECT_EQ(blocks[b - 1], b);
}

TEST_F(LeaseLoopTest, CancelFromHeartbeatStopsAtNextBlockAndReportsCancelled) {
  service_.cancel = true;
  executor_.blocks = 50;
  EXPECT_EQ(RunOneJob(), 1);
  std::lock_guard<std::mutex> l(service_.mu);
  EXPECT_TRUE(service_.completed.empty());
  ASSERT_EQ(service_.failed.size(), 1u);
  EXPECT_TRUE(service_.failed[0].cancelled());
  EXPECT_EQ(service_.failed[0].error().code(), grpc::StatusCode::CANCELLED);
  // Stopped long before all 50 blocks.
  int max_block = 0;
  for (const auto& e : service_.events)
    if (e.has_progress()) max_block = std::max(max_block, e.progress().block());
  EXPECT_LT(max_block, 20);
}

TEST_F(LeaseLoopTest, LostLeaseStopsWithoutReportingAnOutcome) {
  service_.stale_after_heartbeats = 2;
  executor_.blocks = 50;
  EXPECT_EQ(RunOneJob(), 1);
  std::lock_guard<std::mutex> l(service_.mu);
  EXPECT_TRUE(service_.completed.empty());
  EXPECT_TRUE(service_.failed.empty());
}

TEST_F(LeaseLoopTest, FailureKeepsCodeReasonAndViolations) {
  executor_.error = InvalidArgumentError(
                        "layer model.layers.0.mlp.down_proj: group size 128 does "
                        "not divide in_features 172")
                        .WithReason("GROUP_SIZE_MISMATCH");
  executor_.error.AddViolation("spec.quantization.group_size", "does not divide 172");
  EXPECT_EQ(RunOneJob(), 1);
  std::lock_guard<std::mutex> l(service_.mu);
  ASSERT_EQ(service_.failed.size(), 1u);
  EXPECT_FALSE(service_.failed[0].cancelled());
  Status back = FromRpcStatus(service_.failed[0].error());
  EXPECT_EQ(back.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(back.reason(), "GROUP_SIZE_MISMATCH");
  ASSERT_EQ(back.violations().size(), 1u);
  EXPECT_EQ(back.violations()[0].field, "spec.quantization.group_size");
  EXPECT_NE(back.message().find("down_proj"), std::string::npos);
}

// The lease's secret rides on every call after LeaseJob, also after a
// heartbeat answer that carried none; LeaseJob says what the worker can
// receive.
TEST_F(LeaseLoopTest, EveryCallCarriesTheLeaseSecret) {
  EXPECT_EQ(RunOneJob(), 1);
  std::lock_guard<std::mutex> l(service_.mu);
  EXPECT_EQ(service_.lease_max_response_bytes, 4 << 20);
  ASSERT_EQ(service_.completed.size(), 1u);
  EXPECT_GE(service_.heartbeats, 2);
  ASSERT_GE(service_.secrets_seen.size(), 4u);  // heartbeats, events, completion
  for (const std::string& secret : service_.secrets_seen) {
    EXPECT_EQ(secret, service_.lease_secret);
  }
}

// A heartbeat refused because another credential holds the lease is a
// lost lease: the worker stops and reports nothing.
TEST_F(LeaseLoopTest, LeaseHeldByAnotherCredentialStopsTheWorker) {
  service_.stale_after_heartbeats = 2;
  service_.stale_code = grpc::StatusCode::PERMISSION_DENIED;
  executor_.blocks = 50;
  EXPECT_EQ(RunOneJob(), 1);
  std::lock_guard<std::mutex> l(service_.mu);
  EXPECT_TRUE(service_.completed.empty());
  EXPECT_TRUE(service_.failed.empty());
}

// A lease that cannot become a running job fails the job with the reason;
// the executor never runs.
TEST_F(LeaseLoopTest, UnusableLeaseFailsTheJobWithTheReason) {
  service_.lease_secret = "";
  EXPECT_EQ(RunOneJob(), 1);
  std::lock_guard<std::mutex> l(service_.mu);
  EXPECT_EQ(executor_.seen_job, "");
  ASSERT_EQ(service_.failed.size(), 1u);
  Status back = FromRpcStatus(service_.failed[0].error());
  EXPECT_EQ(back.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(back.reason(), "LEASE_UNUSABLE");
  EXPECT_NE(back.message().find("no secret"), std::string::npos) << back.ToString();
}

TEST_F(LeaseLoopTest, ExceptionsOfAnyTypeFailTheJob) {
  executor_.throw_int = true;
  EXPECT_EQ(RunOneJob(), 1);
  {
    std::lock_guard<std::mutex> l(service_.mu);
    ASSERT_EQ(service_.failed.size(), 1u);
    Status back = FromRpcStatus(service_.failed[0].error());
    EXPECT_EQ(back.code(), StatusCode::kInternal);
    EXPECT_EQ(back.message(), "unexpected exception of an unknown type");
    service_.failed.clear();
    service_.handed_out = false;
  }
  executor_.throw_int = false;
  executor_.throw_runtime = true;
  EXPECT_EQ(RunOneJob(), 1);
  std::lock_guard<std::mutex> l(service_.mu);
  ASSERT_EQ(service_.failed.size(), 1u);
  EXPECT_EQ(FromRpcStatus(service_.failed[0].error()).message(),
            "unexpected exception: tokenizer exploded");
}

// quantd refuses the result as it is (too large): the job still ends, as a
// failure that says why, instead of retrying until the lease runs out.
TEST_F(LeaseLoopTest, RefusedResultEndsInFailJob) {
  service_.refuse_results = true;
  EXPECT_EQ(RunOneJob(), 1);
  std::lock_guard<std::mutex> l(service_.mu);
  EXPECT_TRUE(service_.completed.empty());
  ASSERT_EQ(service_.failed.size(), 1u);
  EXPECT_FALSE(service_.failed[0].cancelled());
  Status back = FromRpcStatus(service_.failed[0].error());
  EXPECT_EQ(back.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(back.reason(), "OUTCOME_REFUSED");
  EXPECT_NE(back.message().find("at most 2097152"), std::string::npos) << back.ToString();
  EXPECT_EQ(service_.failed[0].result().ByteSizeLong(), 0u);  // the refused result is not resent
}

// A batch of events quantd refuses is dropped with a warning in its place;
// later events and the outcome still arrive.
TEST_F(LeaseLoopTest, RefusedEventsAreDroppedAndTheJobStillCompletes) {
  executor_.poison_event = true;
  EXPECT_EQ(RunOneJob(), 1);
  std::lock_guard<std::mutex> l(service_.mu);
  ASSERT_EQ(service_.completed.size(), 1u);
  bool warned = false;
  for (const auto& e : service_.events) {
    EXPECT_NE(e.log().message(), "poison");
    if (e.log().severity() == quantd::v1::WARNING &&
        e.log().message().find("quantd refused") != std::string::npos) {
      warned = true;
    }
  }
  EXPECT_TRUE(warned);
}

TEST_F(LeaseLoopTest, RetriesWhileFrontendIsUnavailable) {
  service_.fail_leases = 3;
  EXPECT_EQ(RunOneJob(), 1);
  std::lock_guard<std::mutex> l(service_.mu);
  EXPECT_EQ(service_.fail_leases, 0);
  EXPECT_EQ(service_.completed.size(), 1u);
}

TEST(RpcStatusTest, RoundTripsThroughGoogleRpcStatus) {
  Status s = FailedPreconditionError("unsupported architecture").WithReason("UNSUPPORTED_MODEL");
  s.AddViolation("spec.model_uri", "GPTNeoX is not supported");
  google::rpc::Status wire = ToRpcStatus(s);
  EXPECT_EQ(wire.code(), 9);
  ASSERT_EQ(wire.details_size(), 2);
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(wire.details(0).UnpackTo(&info));
  EXPECT_EQ(info.domain(), "quantd");
  Status back = FromRpcStatus(wire);
  EXPECT_EQ(back.ToString(), s.ToString());
  EXPECT_EQ(back.reason(), "UNSUPPORTED_MODEL");
}

}  // namespace
}  // namespace quantd::worker
