// quantd's Prometheus metrics, all prefixed quantd_ and never labelled with
// a job id: jobs submitted and finished (by state), job and stage
// durations, lease expirations, gRPC calls handled and their latency (by
// method and code), build info, and two gauges computed at scrape time:
// queue depth (from the job store, so it is the same on every frontend),
// live workers (those this frontend heard from within a lease) and, per
// live GPU worker, its device's used and total memory as it last reported.
// QuantdMetrics is a JobObserver, so the job logic feeds it directly.
#ifndef QUANTD_SERVER_METRICS_QUANTD_METRICS_H_
#define QUANTD_SERVER_METRICS_QUANTD_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "server/common/clock.h"
#include "server/jobs/job_observer.h"
#include "server/store/job_store.h"
#include "worker/common/status.h"

namespace quantd::server {

inline constexpr char kQuantdVersion[] = "0.1.0";

class QuantdMetrics : public JobObserver {
 public:
  // `store` feeds quantd_queue_depth; `worker_window` is how recently a
  // worker must have called to count in quantd_workers (the lease).
  // Neither pointer is owned.
  QuantdMetrics(JobStore* store, Clock* clock, absl::Duration worker_window);
  ~QuantdMetrics() override;

  void JobSubmitted(const v1::Job& job) override;
  void JobFinished(const v1::Job& job, absl::Duration duration) override;
  void LeaseExpired(const v1::Job& job) override;
  void WorkerSeen(const v1::WorkerInfo& worker) override;

  // One finished RPC: `method` like "quantd.v1.QuantizationService/CreateJob",
  // `code` like "OK" or "NOT_FOUND".
  void RpcHandled(const std::string& method, const std::string& code, double seconds);

  // Serves /metrics on `listen` (host:port; port 0 picks one).
  quantd::Status Serve(const std::string& listen);
  // The bound port after Serve().
  int port() const;

  // The text exposition of every metric, as /metrics returns it.
  std::string Scrape();

 private:
  class LiveGauges;

  JobStore* store_;
  Clock* clock_;
  const absl::Duration worker_window_;

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<LiveGauges> live_;
  prometheus::Counter* submitted_;
  prometheus::Family<prometheus::Counter>* finished_;
  prometheus::Histogram* job_duration_;
  prometheus::Family<prometheus::Histogram>* stage_duration_;
  prometheus::Counter* lease_expirations_;
  prometheus::Family<prometheus::Counter>* rpc_handled_;
  prometheus::Family<prometheus::Histogram>* rpc_seconds_;
  std::unique_ptr<prometheus::Exposer> exposer_;

  absl::Mutex mu_;
  struct SeenWorker {
    absl::Time last_seen;
    std::string device;
    int64_t gpu_memory_total_bytes = 0;  // 0: not a GPU worker
    int64_t gpu_memory_used_bytes = 0;
  };
  absl::flat_hash_map<std::string, SeenWorker> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_METRICS_QUANTD_METRICS_H_
