// The client side of quantd's job logic, without a network: create (with
// validation and idempotency), get, list, cancel and watch. The gRPC
// QuantizationService is a thin shell around it. Every method enforces the
// caller's tenant: a job of another tenant looks exactly like a job that
// does not exist.
#ifndef QUANTD_SERVER_JOBS_JOB_SERVICE_H_
#define QUANTD_SERVER_JOBS_JOB_SERVICE_H_

#include <atomic>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "quantd/v1/quantization_service.pb.h"
#include "server/common/clock.h"
#include "server/jobs/caller.h"
#include "server/jobs/change_notifier.h"
#include "server/jobs/job_names.h"
#include "server/jobs/job_observer.h"
#include "server/jobs/jobs_options.h"
#include "server/store/job_store.h"
#include "worker/common/status.h"

namespace quantd::server {

// Where WatchJob writes. `send` blocks while the reader is slow (that is
// the backpressure; it only holds this stream's thread) and returns false
// when the reader went away. `cancelled` says whether the RPC was
// cancelled.
struct WatchStream {
  std::function<bool(const v1::JobEvent&)> send;
  std::function<bool()> cancelled = [] { return false; };
};

class JobService {
 public:
  // Nothing is owned; all must outlive the service. `observer` may be null.
  JobService(JobStore* store, Clock* clock, ChangeNotifier* notifier, JobObserver* observer,
             JobsOptions options);

  // Validates and stores a QUEUED job. Errors: INVALID_ARGUMENT with a
  // BadRequest naming each bad field (reason JOB_SPEC_TOO_LARGE, naming the
  // large fields, for a spec over kMaxJobSpecBytes); UNIMPLEMENTED for features the engine
  // does not have; ALREADY_EXISTS (REQUEST_ID_REUSED) when the request_id
  // was used with a different spec; RESOURCE_EXHAUSTED (QUEUE_FULL);
  // PERMISSION_DENIED for callers that may not submit. A retry with the
  // same request_id and spec returns the stored job as it is now.
  quantd::StatusOr<v1::Job> CreateJob(const Caller& caller, const v1::CreateJobRequest& request);

  // INVALID_ARGUMENT for a malformed name, NOT_FOUND for an unknown job or
  // one of another tenant.
  quantd::StatusOr<v1::Job> GetJob(const Caller& caller, const v1::GetJobRequest& request);

  // The caller's jobs (every tenant's for an admin), filtered by state and
  // labels, newest first unless order_by says "create_time asc". In the
  // BASIC view unless request.view is FULL; a page holds at most page_size
  // jobs and stops before passing kMaxListResponseBytes.
  quantd::StatusOr<v1::ListJobsResponse> ListJobs(const Caller& caller,
                                                  const v1::ListJobsRequest& request);

  // QUEUED -> CANCELLED at once; RUNNING -> CANCELLING (the worker stops at
  // its next block boundary); CANCELLING stays; a finished job is
  // FAILED_PRECONDITION (JOB_ALREADY_FINISHED).
  quantd::StatusOr<v1::Job> CancelJob(const Caller& caller, const v1::CancelJobRequest& request);

  // Sends the events after request.after_sequence, then follows new ones
  // until the job has ended and all its events were sent (OK). CANCELLED
  // when the reader went away; UNAVAILABLE when the server shuts down;
  // RESOURCE_EXHAUSTED (TOO_MANY_WATCHES) over the concurrent-watch limit
  // of the frontend or of the caller's tenant.
  quantd::Status WatchJob(const Caller& caller, const v1::WatchJobRequest& request,
                          const WatchStream& stream);

  int active_watches() const { return active_watches_.load(); }

 private:
  // Reads a job the caller may see; NOT_FOUND otherwise.
  quantd::StatusOr<JobRecord> ReadVisibleJob(const Caller& caller, absl::string_view name,
                                             absl::string_view field);
  quantd::Status CheckSpec(const v1::CreateJobRequest& request, const std::string& tenant,
                           std::vector<std::string>* warnings);

  JobStore* store_;
  Clock* clock_;
  ChangeNotifier* notifier_;
  JobObserver* observer_;
  const JobsOptions options_;
  JobIdGenerator ids_;
  std::atomic<int> active_watches_{0};
  absl::Mutex watches_mu_;
  absl::flat_hash_map<std::string, int> watches_by_tenant_ ABSL_GUARDED_BY(watches_mu_);
};

// Names the top-level JobSpec fields that differ ("model_uri, labels"),
// for the ALREADY_EXISTS explanation of a reused request_id.
std::string DescribeSpecDifference(const v1::JobSpec& stored, const v1::JobSpec& requested);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_JOBS_JOB_SERVICE_H_
