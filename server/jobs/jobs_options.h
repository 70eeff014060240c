// Settings shared by JobService, LeaseService and the LeaseReaper (one
// options struct, filled from quantd's flags).
#ifndef QUANTD_SERVER_JOBS_JOBS_OPTIONS_H_
#define QUANTD_SERVER_JOBS_JOBS_OPTIONS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "quantd/v1/job.pb.h"
#include "worker/common/status.h"

namespace quantd::server {

// The URI policy (server/uri_policy) for a job of `tenant`: PERMISSION_DENIED
// (URI_NOT_ALLOWED) or INVALID_ARGUMENT (INVALID_URI) naming every bad URI
// field as a BadRequest violation (paths like "spec.model_uri").
using UriCheck = std::function<quantd::Status(const v1::JobSpec& spec, const std::string& tenant)>;
// The engine's check of a job spec beyond the server's envelope checks
// (quantization settings, export formats, features not built yet:
// //worker/job_spec:resolve_job), which may also return warnings about an accepted spec
// (e.g. an exclude pattern that matches no layer); CreateJob stores them as
// the job's first WARNING log events.
using EngineSpecCheck =
    std::function<quantd::Status(const v1::JobSpec& spec, std::vector<std::string>* warnings)>;

struct JobsOptions {
  // Absolute directory; a job without export.output_uri writes to
  // file://<data_dir>/artifacts/<id>.
  std::string data_dir;
  // How long a lease lasts without a heartbeat.
  absl::Duration lease_duration = absl::Seconds(60);
  // Leases before a job fails with LEASE_EXPIRED_MAX_ATTEMPTS (when the
  // spec does not say).
  int default_max_attempts = 3;
  // A re-queued job waits requeue_backoff * 2^(attempt-1), at most
  // max_requeue_backoff, before it can be leased again.
  absl::Duration requeue_backoff = absl::Seconds(1);
  absl::Duration max_requeue_backoff = absl::Minutes(1);
  // LeaseJob waits at most this long for a job (the request may ask less).
  absl::Duration max_lease_wait = absl::Seconds(30);
  // Waiting LeaseJob calls and WatchJob streams re-read the store at least
  // this often, so they notice changes made by other frontends.
  absl::Duration poll_interval = absl::Milliseconds(500);
  // Engine checks of the spec (CheckJobSpec); none when empty.
  EngineSpecCheck spec_check;
  // URI roots (per tenant); none when empty.
  UriCheck uri_policy;
  // Per-tenant QUEUED job limit (RESOURCE_EXHAUSTED); 0 = no limit.
  int max_queued_per_tenant = 0;
  // Concurrent WatchJob streams per frontend (RESOURCE_EXHAUSTED); 0 = no
  // limit.
  int max_concurrent_watches = 0;
  // Concurrent WatchJob streams per tenant of the watching caller, on one
  // frontend (RESOURCE_EXHAUSTED); 0 = no limit.
  int max_watches_per_tenant = 0;
  // Events a worker may send in one ReportEvents call.
  int max_events_per_report = 1000;
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_JOBS_JOBS_OPTIONS_H_
