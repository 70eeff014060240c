// The worker side of quantd's job logic, without a network: lease a job
// (long-polling), heartbeat, report events, complete or fail, all fenced by
// the lease (its generation, its random secret, and the credential that
// took it); and the re-queueing of expired leases that the LeaseReaper
// runs. The gRPC WorkerService is a thin shell around it.
//
// Only worker credentials may call it (with authentication off, the
// anonymous caller); PERMISSION_DENIED otherwise, admins included.
#ifndef QUANTD_SERVER_JOBS_LEASE_SERVICE_H_
#define QUANTD_SERVER_JOBS_LEASE_SERVICE_H_

#include <functional>

#include "quantd/v1/worker_service.pb.h"
#include "server/common/clock.h"
#include "server/jobs/caller.h"
#include "server/jobs/change_notifier.h"
#include "server/jobs/job_observer.h"
#include "server/jobs/jobs_options.h"
#include "server/store/job_store.h"
#include "worker/common/status.h"

namespace quantd::server {

class LeaseService {
 public:
  // Nothing is owned; all must outlive the service. `observer` may be null.
  LeaseService(JobStore* store, Clock* clock, ChangeNotifier* notifier, JobObserver* observer,
               JobsOptions options);

  // Leases the oldest QUEUED job for the worker's device ("" jobs match any
  // worker, "cuda" jobs any cuda:N worker): RUNNING, attempt + 1, the next
  // lease generation (Lease.token), a new random 128-bit Lease.secret (only
  // its SHA-256 is stored), bound to caller.identity, expiry now +
  // lease_duration. A job whose answer would be larger than the worker can
  // receive (request.max_response_bytes, default 4 MiB) FAILS instead
  // (LEASE_UNDELIVERABLE) and the next one is tried. Waits up to
  // request.wait (at most max_lease_wait) for one; returns an empty
  // response when none came, or at once when `cancelled` turns true or the
  // server shuts down.
  quantd::StatusOr<v1::LeaseJobResponse> LeaseJob(
      const Caller& caller, const v1::LeaseJobRequest& request,
      const std::function<bool()>& cancelled = [] { return false; });

  // Renews the lease and records progress; cancel_requested when the job
  // is CANCELLING. Every call below checks the lease first and changes
  // nothing when it fails: FAILED_PRECONDITION (STALE_LEASE) for a lease
  // that is not the job's current one or a wrong secret; PERMISSION_DENIED
  // (LEASE_HELD_BY_ANOTHER_CREDENTIAL) when another credential took it.
  quantd::StatusOr<v1::HeartbeatResponse> Heartbeat(const Caller& caller,
                                                    const v1::HeartbeatRequest& request);

  // Appends progress, log and block-metrics events (the server numbers
  // them); progress events also update Job.progress.
  quantd::StatusOr<v1::ReportEventsResponse> ReportEvents(const Caller& caller,
                                                          const v1::ReportEventsRequest& request);

  // RUNNING or CANCELLING -> SUCCEEDED with the result (at most
  // kMaxResultBytes). Repeating the call after it succeeded is OK only with
  // the same lease and a byte-identical result; otherwise
  // FAILED_PRECONDITION (JOB_ALREADY_FINISHED).
  quantd::StatusOr<v1::CompleteJobResponse> CompleteJob(const Caller& caller,
                                                        const v1::CompleteJobRequest& request);

  // -> FAILED with the error and partial result, or CANCELLED when
  // request.cancelled. Repeating it is OK only with the same lease, error,
  // result and `cancelled`.
  quantd::StatusOr<v1::FailJobResponse> FailJob(const Caller& caller,
                                                const v1::FailJobRequest& request);

  // One pass of lease expiry at the clock's now: an expired RUNNING lease
  // re-queues its job (with backoff) until attempt == max_attempts, then
  // the job FAILS with LEASE_EXPIRED_MAX_ATTEMPTS; an expired CANCELLING
  // lease ends the job CANCELLED. Returns how many jobs it changed. Safe to
  // run on several frontends at once.
  quantd::StatusOr<int> ReapExpiredLeases();

  absl::Duration heartbeat_interval() const { return options_.lease_duration / 3; }

 private:
  JobStore* store_;
  Clock* clock_;
  ChangeNotifier* notifier_;
  JobObserver* observer_;
  const JobsOptions options_;
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_JOBS_LEASE_SERVICE_H_
