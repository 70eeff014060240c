// Notifications of what happens to jobs, for metrics. The job logic calls
// these after the store committed the change; implementations must be
// cheap and thread-safe. server/metrics implements it with Prometheus.
#ifndef QUANTD_SERVER_JOBS_JOB_OBSERVER_H_
#define QUANTD_SERVER_JOBS_JOB_OBSERVER_H_

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "quantd/v1/job.pb.h"
#include "quantd/v1/worker_service.pb.h"

namespace quantd::server {

class JobObserver {
 public:
  virtual ~JobObserver() = default;
  // A new job was stored (not an idempotent retry).
  virtual void JobSubmitted(const v1::Job& job) {}
  // A job reached SUCCEEDED, FAILED or CANCELLED. `duration` runs from
  // create_time to end_time.
  virtual void JobFinished(const v1::Job& job, absl::Duration duration) {}
  // A lease ran out (the job is re-queued, failed, or cancelled).
  virtual void LeaseExpired(const v1::Job& job) {}
  // A worker leased or heartbeat (liveness for the worker gauge; a GPU
  // worker's memory for the GPU gauges). `worker.id()` is never empty.
  virtual void WorkerSeen(const v1::WorkerInfo& worker) {}
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_JOBS_JOB_OBSERVER_H_
