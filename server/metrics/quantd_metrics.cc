#include "server/metrics/quantd_metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/common/errors.h"
#include "server/common/json_log.h"
#include "server/jobs/job_transitions.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

const prometheus::Histogram::BucketBoundaries kJobBuckets = {
    1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200, 86400};
const prometheus::Histogram::BucketBoundaries kStageBuckets = {0.1, 0.5, 1,   5,    15,   30,  60,
                                                               120, 300, 600, 1800, 3600, 7200};
const prometheus::Histogram::BucketBoundaries kRpcBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

std::string Lower(const std::string& s) { return absl::AsciiStrToLower(s); }

}  // namespace

// Gauges whose value is read when Prometheus scrapes.
class QuantdMetrics::LiveGauges : public prometheus::Collectable {
 public:
  explicit LiveGauges(QuantdMetrics* metrics) : metrics_(metrics) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> families;
    prometheus::MetricFamily depth{"quantd_queue_depth",
                                   "Jobs waiting in the queue (QUEUED).",
                                   prometheus::MetricType::Gauge,
                                   {}};
    quantd::StatusOr<int64_t> queued = metrics_->store_->CountJobs(std::nullopt, v1::QUEUED);
    if (queued.ok()) {
      prometheus::ClientMetric m;
      m.gauge.value = static_cast<double>(*queued);
      depth.metric.push_back(m);
    }
    families.push_back(std::move(depth));

    prometheus::MetricFamily workers{
        "quantd_workers",
        "Workers that called this frontend within the last lease duration.",
        prometheus::MetricType::Gauge,
        {}};
    prometheus::MetricFamily used{"quantd_gpu_memory_used_bytes",
                                  "GPU memory in use on a live worker's device (all processes), "
                                  "as the worker last reported.",
                                  prometheus::MetricType::Gauge,
                                  {}};
    prometheus::MetricFamily total{"quantd_gpu_memory_total_bytes",
                                   "GPU memory of a live worker's device.",
                                   prometheus::MetricType::Gauge,
                                   {}};
    prometheus::ClientMetric w;
    {
      const absl::Time cutoff = metrics_->clock_->Now() - metrics_->worker_window_;
      absl::MutexLock lock(&metrics_->mu_);
      for (auto it = metrics_->workers_.begin(); it != metrics_->workers_.end();) {
        if (it->second.last_seen < cutoff) {
          metrics_->workers_.erase(it++);
          continue;
        }
        const SeenWorker& seen = it->second;
        if (seen.gpu_memory_total_bytes > 0) {
          prometheus::ClientMetric m;
          m.label = {{"device", seen.device}, {"worker", it->first}};
          m.gauge.value = static_cast<double>(seen.gpu_memory_used_bytes);
          used.metric.push_back(m);
          m.gauge.value = static_cast<double>(seen.gpu_memory_total_bytes);
          total.metric.push_back(m);
        }
        ++it;
      }
      w.gauge.value = static_cast<double>(metrics_->workers_.size());
    }
    workers.metric.push_back(w);
    families.push_back(std::move(workers));
    families.push_back(std::move(used));
    families.push_back(std::move(total));
    return families;
  }

 private:
  QuantdMetrics* metrics_;
};

QuantdMetrics::QuantdMetrics(JobStore* store, Clock* clock, absl::Duration worker_window)
    : store_(store),
      clock_(clock),
      worker_window_(worker_window),
      registry_(std::make_shared<prometheus::Registry>()) {
  live_ = std::make_shared<LiveGauges>(this);
  submitted_ = &prometheus::BuildCounter()
                    .Name("quantd_jobs_submitted_total")
                    .Help("Jobs accepted by CreateJob (idempotent retries not counted).")
                    .Register(*registry_)
                    .Add({});
  finished_ = &prometheus::BuildCounter()
                   .Name("quantd_jobs_finished_total")
                   .Help("Jobs that ended, by final state.")
                   .Register(*registry_);
  for (const char* state : {"succeeded", "failed", "cancelled"}) finished_->Add({{"state", state}});
  job_duration_ = &prometheus::BuildHistogram()
                       .Name("quantd_job_duration_seconds")
                       .Help("Time from CreateJob to the job's end.")
                       .Register(*registry_)
                       .Add({}, kJobBuckets);
  stage_duration_ = &prometheus::BuildHistogram()
                         .Name("quantd_stage_duration_seconds")
                         .Help("Time the pipeline spent per stage, as reported by workers.")
                         .Register(*registry_);
  lease_expirations_ = &prometheus::BuildCounter()
                            .Name("quantd_lease_expirations_total")
                            .Help("Leases that ran out without a heartbeat.")
                            .Register(*registry_)
                            .Add({});
  rpc_handled_ = &prometheus::BuildCounter()
                      .Name("quantd_grpc_server_handled_total")
                      .Help("gRPC calls completed, by method and status code.")
                      .Register(*registry_);
  rpc_seconds_ = &prometheus::BuildHistogram()
                      .Name("quantd_grpc_server_handling_seconds")
                      .Help("gRPC call latency, by method and status code.")
                      .Register(*registry_);
  prometheus::BuildGauge()
      .Name("quantd_build_info")
      .Help("quantd's version and job store backend (always 1).")
      .Register(*registry_)
      .Add({{"version", kQuantdVersion}, {"store", std::string(store_->Backend())}})
      .Set(1);
}

QuantdMetrics::~QuantdMetrics() = default;

void QuantdMetrics::JobSubmitted(const v1::Job&) { submitted_->Increment(); }

void QuantdMetrics::JobFinished(const v1::Job& job, absl::Duration duration) {
  finished_->Add({{"state", Lower(StateName(job.state()))}}).Increment();
  job_duration_->Observe(absl::ToDoubleSeconds(duration));
  for (const v1::StageTiming& timing : job.result().metrics().stage_timings()) {
    stage_duration_->Add({{"stage", Lower(v1::Stage_Name(timing.stage()))}}, kStageBuckets)
        .Observe(timing.seconds());
  }
}

void QuantdMetrics::LeaseExpired(const v1::Job&) { lease_expirations_->Increment(); }

void QuantdMetrics::WorkerSeen(const v1::WorkerInfo& worker) {
  if (worker.id().empty()) return;
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  SeenWorker& seen = workers_[worker.id()];
  seen.last_seen = now;
  seen.device = worker.device();
  // Kept from the last report that had them (LeaseJob and Heartbeat both do).
  if (worker.gpu_memory_total_bytes() > 0) {
    seen.gpu_memory_total_bytes = worker.gpu_memory_total_bytes();
    seen.gpu_memory_used_bytes = worker.gpu_memory_used_bytes();
  }
}

void QuantdMetrics::RpcHandled(const std::string& method, const std::string& code, double seconds) {
  rpc_handled_->Add({{"method", method}, {"code", code}}).Increment();
  rpc_seconds_->Add({{"method", method}, {"code", code}}, kRpcBuckets).Observe(seconds);
}

quantd::Status QuantdMetrics::Serve(const std::string& listen) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(listen);
  } catch (const std::exception& e) {
    return MakeError(quantd::StatusCode::kUnavailable, "LISTEN_FAILED",
                     absl::StrCat("cannot serve /metrics on ", listen, ": ", e.what()));
  }
  exposer_->RegisterCollectable(registry_);
  exposer_->RegisterCollectable(live_);
  return quantd::OkStatus();
}

int QuantdMetrics::port() const {
  if (exposer_ == nullptr) return 0;
  std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

std::string QuantdMetrics::Scrape() {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (auto& f : live_->Collect()) families.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace quantd::server
