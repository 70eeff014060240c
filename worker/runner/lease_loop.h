// LeaseLoop: the worker side of WorkerService.
//
// A worker pulls one job at a time: LeaseJob (long poll), then runs it while
// a background thread renews the lease with heartbeats, forwards events in
// batches and notices cancellation or a lost lease; finally CompleteJob or
// FailJob. Every call carries the lease back, its secret included; a lease
// that cannot become a running job, an executor that throws, or an outcome
// quantd refuses still ends in FailJob with the reason. The job itself runs behind JobExecutor, so
// the loop is tested with a fake executor against an in-process WorkerService.
#ifndef QUANTD_WORKER_RUNNER_LEASE_LOOP_H_
#define QUANTD_WORKER_RUNNER_LEASE_LOOP_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "quantd/v1/worker_service.grpc.pb.h"
#include "worker/common/status.h"

namespace quantd::worker {

// What a running job uses to talk to the frontend. Thread-safe.
class JobContext {
 public:
  virtual ~JobContext() = default;
  // Queues an event (log, block metrics, ...) for the job's event stream.
  virtual void Report(quantd::v1::JobEvent event) = 0;
  // Latest progress: sent with heartbeats, and as a (throttled) event.
  virtual void SetProgress(const quantd::v1::Progress& progress) = 0;
  // True once the job was cancelled or the lease was lost; the executor
  // stops within one iteration of whatever loop it is in (its
  // CancellationScope, worker/common/cancellation.h).
  virtual bool CancelRequested() const = 0;
};

struct ExecutionOutcome {
  Status status;                 // OK, or why the job failed
  quantd::v1::JobResult result;  // kept on failure too (metrics, rejected artifacts)
  bool cancelled = false;        // stopped because CancelRequested()
};

class JobExecutor {
 public:
  virtual ~JobExecutor() = default;
  virtual ExecutionOutcome Execute(const quantd::v1::Job& job, JobContext& ctx) = 0;
};

struct LeaseLoopOptions {
  std::string worker_id;
  std::string device = "cpu";
  // Long-poll duration of each LeaseJob call.
  std::chrono::seconds lease_wait{10};
  // Stop after this many jobs (0 = run until Stop()).
  int max_jobs = 0;
  std::chrono::milliseconds tick{250};  // event flush / progress throttle period
  std::chrono::milliseconds rpc_timeout{10000};
  std::chrono::milliseconds max_backoff{4000};  // reconnect backoff cap
  // The largest message this worker's channel receives (gRPC's default);
  // sent with LeaseJob so quantd never hands out a lease it cannot read.
  int64_t max_receive_bytes = 4 << 20;
  // Extra metadata on every call (e.g. "authorization: Bearer ...").
  std::vector<std::pair<std::string, std::string>> metadata;
  // Fills the GPU memory fields of the WorkerInfo sent with each LeaseJob
  // and Heartbeat (quantd exports them as quantd_gpu_memory_*_bytes); unset
  // on CPU workers.
  std::function<void(quantd::v1::WorkerInfo*)> describe_memory;
};

class LeaseLoop {
 public:
  LeaseLoop(std::shared_ptr<grpc::Channel> channel, JobExecutor* executor,
            LeaseLoopOptions options);

  // Leases and runs jobs until Stop() or max_jobs. Returns the jobs run.
  int Run();
  // Stops leasing; a running job finishes first. Safe from a signal-handling thread.
  void Stop() { stop_.store(true); }

 private:
  void RunLeased(const quantd::v1::LeaseJobResponse& leased);
  void PrepareContext(grpc::ClientContext* ctx) const;

  std::unique_ptr<quantd::v1::WorkerService::Stub> stub_;
  JobExecutor* executor_;
  LeaseLoopOptions options_;
  std::atomic<bool> stop_{false};

  friend class LeasedJob;
};

}  // namespace quantd::worker

#endif  // QUANTD_WORKER_RUNNER_LEASE_LOOP_H_
