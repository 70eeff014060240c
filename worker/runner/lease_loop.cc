#include "worker/runner/lease_loop.h"

#include <google/protobuf/util/time_util.h>

#include <condition_variable>
#include <deque>
#include <iostream>
#include <mutex>
#include <thread>

#include "worker/job_spec/rpc_status.h"

namespace quantd::worker {
namespace {

using Clock = std::chrono::steady_clock;
using google::protobuf::util::TimeUtil;

// The lease is gone for good: another attempt or another worker owns the
// job (STALE_LEASE, LEASE_HELD_BY_ANOTHER_CREDENTIAL), or the job is.
bool IsStaleLease(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
         s.error_code() == grpc::StatusCode::NOT_FOUND ||
         s.error_code() == grpc::StatusCode::PERMISSION_DENIED;
}

// quantd will never accept this request as it is (too large, malformed):
// retrying it unchanged cannot help.
bool IsRefused(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
         s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
}

std::string Truncated(const std::string& text, size_t limit = 2048) {
  return text.size() <= limit ? text : text.substr(0, limit) + "...";
}

// Why a LeaseJob answer cannot become a running job; empty when it can.
std::string LeaseProblem(const quantd::v1::LeaseJobResponse& leased) {
  if (!leased.has_lease()) return "the LeaseJob answer has no lease";
  if (leased.lease().job() != leased.job().name()) {
    return "the lease names " + leased.lease().job() + ", not the job it came with";
  }
  if (leased.lease().secret().empty()) return "the lease has no secret";
  return "";
}

bool SameProgress(const quantd::v1::Progress& a, const quantd::v1::Progress& b) {
  return a.stage() == b.stage() && a.block() == b.block() && a.block_count() == b.block_count() &&
         static_cast<int>(a.percent()) == static_cast<int>(b.percent()) &&
         a.message() == b.message();
}

void Log(const std::string& job, const std::string& msg) {
  std::cerr << "{\"component\":\"worker\",\"job\":\"" << job << "\",\"msg\":\"" << msg << "\"}"
            << std::endl;
}

}  // namespace

// One leased job: the JobContext the executor sees, plus the background
// thread that heartbeats and flushes events while the executor runs.
class LeasedJob : public JobContext {
 public:
  LeasedJob(LeaseLoop* loop, const quantd::v1::LeaseJobResponse& leased)
      : loop_(loop), job_(leased.job()), lease_(leased.lease()) {
    auto hb = leased.heartbeat_interval();
    int64_t ms = hb.seconds() * 1000 + hb.nanos() / 1000000;
    heartbeat_every_ = std::chrono::milliseconds(ms > 0 ? ms : 5000);
  }

  void Report(quantd::v1::JobEvent event) override {
    std::lock_guard<std::mutex> l(mu_);
    event.set_job(job_.name());
    *event.mutable_time() = TimeUtil::GetCurrentTime();
    pending_.push_back(std::move(event));
  }

  // Updates within one block are sampled on the background tick, but the
  // last update of a stage or block is queued before the next one replaces
  // it, so a watcher sees every block of every stage however fast they run.
  void SetProgress(const quantd::v1::Progress& progress) override {
    std::lock_guard<std::mutex> l(mu_);
    if (progress_.stage() != quantd::v1::STAGE_UNSPECIFIED &&
        (progress.stage() != progress_.stage() || progress.block() != progress_.block())) {
      QueueProgressLocked();
    }
    progress_ = progress;
  }

  bool CancelRequested() const override { return cancel_.load() || lease_lost_.load(); }

  void Start() {
    background_ = std::thread([this] { BackgroundLoop(); });
  }

  // Stops the background thread, then sends the remaining events and the
  // outcome. Gives up when the lease is lost (another attempt owns the job).
  // An outcome quantd refuses as it is (a result over its size limit) is
  // replaced once by a failure saying so, so the job never ends silently.
  void Finish(const ExecutionOutcome& outcome_in) {
    {
      std::lock_guard<std::mutex> l(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (background_.joinable()) background_.join();
    QueueProgressIfChanged();
    ExecutionOutcome outcome = outcome_in;
    bool replaced = false;
    const auto deadline = Clock::now() + LeaseRemaining();
    auto backoff = std::chrono::milliseconds(200);
    while (!lease_lost_.load()) {
      grpc::Status s = FlushEvents();
      if (s.ok()) s = SendOutcome(outcome);
      if (s.ok()) return;
      if (IsStaleLease(s)) {
        Log(job_.name(), "lease lost before the outcome was recorded: " + s.error_message());
        return;
      }
      if (IsRefused(s)) {
        Log(job_.name(), "quantd refused the outcome: " + Truncated(s.error_message()));
        if (replaced) return;  // the lease expires; quantd retries or fails the job
        outcome = ExecutionOutcome();
        outcome.status = FailedPreconditionError("quantd refused the job's outcome (" +
                                                 std::to_string(s.error_code()) + ": " +
                                                 Truncated(s.error_message()) + ")")
                             .WithReason("OUTCOME_REFUSED");
        replaced = true;
        continue;
      }
      if (Clock::now() > deadline) {
        Log(job_.name(), "frontend unreachable until the lease expired; the job will be retried");
        return;
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, loop_->options_.max_backoff);
    }
  }

 private:
  std::chrono::milliseconds LeaseRemaining() {
    std::lock_guard<std::mutex> l(mu_);
    auto now = TimeUtil::GetCurrentTime();
    int64_t ms = TimeUtil::DurationToMilliseconds(lease_.expire_time() - now);
    return std::chrono::milliseconds(std::max<int64_t>(ms, 0));
  }

  void BackgroundLoop() {
    auto next_heartbeat = Clock::now() + heartbeat_every_;
    std::unique_lock<std::mutex> l(mu_);
    while (!done_) {
      cv_.wait_for(l, loop_->options_.tick);
      if (done_) break;
      l.unlock();
      QueueProgressIfChanged();
      FlushEvents();
      if (Clock::now() >= next_heartbeat) {
        Heartbeat();
        next_heartbeat = Clock::now() + heartbeat_every_;
      }
      l.lock();
    }
  }

  void QueueProgressIfChanged() {
    std::lock_guard<std::mutex> l(mu_);
    QueueProgressLocked();
  }

  void QueueProgressLocked() {
    if (progress_.stage() == quantd::v1::STAGE_UNSPECIFIED) return;
    if (sent_any_progress_ && SameProgress(progress_, last_sent_progress_)) return;
    quantd::v1::JobEvent ev;
    ev.set_job(job_.name());
    *ev.mutable_time() = TimeUtil::GetCurrentTime();
    *ev.mutable_progress() = progress_;
    pending_.push_back(std::move(ev));
    last_sent_progress_ = progress_;
    sent_any_progress_ = true;
  }

  // Sends the pending events. A batch quantd refuses as it is (an event
  // over its size limit) is dropped, and a warning saying so is sent in its
  // place, so later events and the outcome still get through.
  grpc::Status FlushEvents(bool report_refusal = true) {
    quantd::v1::ReportEventsRequest req;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (pending_.empty()) return grpc::Status::OK;
      *req.mutable_lease() = lease_;
      for (auto& e : pending_) *req.add_events() = e;
    }
    const int sent = req.events_size();
    quantd::v1::ReportEventsResponse resp;
    grpc::ClientContext ctx;
    loop_->PrepareContext(&ctx);
    grpc::Status s = loop_->stub_->ReportEvents(&ctx, req, &resp);
    if (s.ok()) {
      std::lock_guard<std::mutex> l(mu_);
      pending_.erase(pending_.begin(), pending_.begin() + sent);
      if (resp.cancel_requested()) cancel_.store(true);
    } else if (IsStaleLease(s)) {
      lease_lost_.store(true);
    } else if (IsRefused(s)) {
      Log(job_.name(), "quantd refused " + std::to_string(sent) +
                           " events; dropped: " + Truncated(s.error_message()));
      {
        std::lock_guard<std::mutex> l(mu_);
        pending_.erase(pending_.begin(), pending_.begin() + sent);
        if (report_refusal) {
          quantd::v1::JobEvent warning;
          warning.set_job(job_.name());
          *warning.mutable_time() = TimeUtil::GetCurrentTime();
          warning.mutable_log()->set_severity(quantd::v1::WARNING);
          warning.mutable_log()->set_message(
              "the worker dropped " + std::to_string(sent) +
              " events that quantd refused: " + Truncated(s.error_message(), 512));
          pending_.push_front(std::move(warning));
        }
      }
      return report_refusal ? FlushEvents(false) : grpc::Status::OK;
    }
    return s;
  }

  void Heartbeat() {
    quantd::v1::HeartbeatRequest req;
    req.mutable_worker()->set_id(loop_->options_.worker_id);
    req.mutable_worker()->set_device(loop_->options_.device);
    if (loop_->options_.describe_memory) loop_->options_.describe_memory(req.mutable_worker());
    {
      std::lock_guard<std::mutex> l(mu_);
      *req.mutable_lease() = lease_;
      *req.mutable_progress() = progress_;
    }
    quantd::v1::HeartbeatResponse resp;
    grpc::ClientContext ctx;
    loop_->PrepareContext(&ctx);
    grpc::Status s = loop_->stub_->Heartbeat(&ctx, req, &resp);
    if (s.ok()) {
      std::lock_guard<std::mutex> l(mu_);
      if (resp.has_lease()) {
        // The renewed expiry; the secret stays the one LeaseJob gave.
        const std::string secret = lease_.secret();
        lease_ = resp.lease();
        if (lease_.secret().empty()) lease_.set_secret(secret);
      }
      if (resp.cancel_requested()) cancel_.store(true);
    } else if (IsStaleLease(s)) {
      Log(job_.name(), "lease lost: " + s.error_message());
      lease_lost_.store(true);
    }
  }

  grpc::Status SendOutcome(const ExecutionOutcome& outcome) {
    grpc::ClientContext ctx;
    loop_->PrepareContext(&ctx);
    quantd::v1::Lease lease;
    {
      std::lock_guard<std::mutex> l(mu_);
      lease = lease_;
    }
    if (outcome.status.ok() && !outcome.cancelled) {
      quantd::v1::CompleteJobRequest req;
      *req.mutable_lease() = lease;
      *req.mutable_result() = outcome.result;
      quantd::v1::CompleteJobResponse resp;
      return loop_->stub_->CompleteJob(&ctx, req, &resp);
    }
    quantd::v1::FailJobRequest req;
    *req.mutable_lease() = lease;
    *req.mutable_error() =
        ToRpcStatus(outcome.status.ok() ? CancelledError("cancelled") : outcome.status);
    *req.mutable_result() = outcome.result;
    req.set_cancelled(outcome.cancelled);
    quantd::v1::FailJobResponse resp;
    return loop_->stub_->FailJob(&ctx, req, &resp);
  }

  LeaseLoop* loop_;
  const quantd::v1::Job job_;
  std::chrono::milliseconds heartbeat_every_;

  std::mutex mu_;
  std::condition_variable cv_;
  quantd::v1::Lease lease_;
  std::deque<quantd::v1::JobEvent> pending_;
  quantd::v1::Progress progress_;
  quantd::v1::Progress last_sent_progress_;
  bool sent_any_progress_ = false;
  bool done_ = false;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> lease_lost_{false};
  std::thread background_;
};

LeaseLoop::LeaseLoop(std::shared_ptr<grpc::Channel> channel, JobExecutor* executor,
                     LeaseLoopOptions options)
    : stub_(quantd::v1::WorkerService::NewStub(channel)),
      executor_(executor),
      options_(std::move(options)) {}

void LeaseLoop::PrepareContext(grpc::ClientContext* ctx) const {
  ctx->set_deadline(std::chrono::system_clock::now() + options_.rpc_timeout);
  for (const auto& [k, v] : options_.metadata) ctx->AddMetadata(k, v);
}

int LeaseLoop::Run() {
  int jobs = 0;
  auto backoff = std::chrono::milliseconds(100);
  while (!stop_.load() && (options_.max_jobs == 0 || jobs < options_.max_jobs)) {
    quantd::v1::LeaseJobRequest req;
    req.mutable_worker()->set_id(options_.worker_id);
    req.mutable_worker()->set_device(options_.device);
    if (options_.describe_memory) options_.describe_memory(req.mutable_worker());
    req.mutable_wait()->set_seconds(options_.lease_wait.count());
    req.set_max_response_bytes(options_.max_receive_bytes);
    quantd::v1::LeaseJobResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.lease_wait + options_.rpc_timeout);
    for (const auto& [k, v] : options_.metadata) ctx.AddMetadata(k, v);
    grpc::Status s = stub_->LeaseJob(&ctx, req, &resp);
    if (!s.ok()) {
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
          s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
        Log("", "LeaseJob failed (" + std::to_string(s.error_code()) +
                    "): " + Truncated(s.error_message()) + "; retrying");
      }
      // The frontend may be restarting; retry with capped backoff.
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, options_.max_backoff);
      continue;
    }
    backoff = std::chrono::milliseconds(100);
    if (!resp.has_job() || resp.job().name().empty()) continue;
    RunLeased(resp);
    ++jobs;
  }
  return jobs;
}

void LeaseLoop::RunLeased(const quantd::v1::LeaseJobResponse& leased) {
  Log(leased.job().name(), "leased, attempt " + std::to_string(leased.job().attempt()));
  // Whatever goes wrong between here and the executor's answer ends in
  // FailJob with the reason, never in a lease left to expire.
  LeasedJob job(this, leased);
  ExecutionOutcome outcome;
  std::string problem = LeaseProblem(leased);
  if (problem.empty()) {
    try {
      job.Start();
    } catch (const std::exception& e) {
      problem = std::string("cannot start the job's heartbeat thread: ") + e.what();
    }
  }
  if (!problem.empty()) {
    outcome.status = FailedPreconditionError(problem).WithReason("LEASE_UNUSABLE");
  } else {
    try {
      outcome = executor_->Execute(leased.job(), job);
    } catch (const std::exception& e) {
      // The executor converts engine errors itself; this is the last guard
      // so a stray exception fails the job instead of killing the worker.
      outcome = ExecutionOutcome();
      outcome.status = InternalError(std::string("unexpected exception: ") + e.what());
    } catch (...) {
      outcome = ExecutionOutcome();
      outcome.status = InternalError("unexpected exception of an unknown type");
    }
  }
  job.Finish(outcome);
  Log(leased.job().name(), outcome.status.ok() ? "done" : "ended: " + outcome.status.ToString());
}

}  // namespace quantd::worker
