#include "server/jobs/lease_service.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"
#include "google/rpc/error_details.pb.h"
#include "server/common/errors.h"
#include "server/common/json_log.h"
#include "server/common/secrets.h"
#include "server/jobs/job_names.h"
#include "server/jobs/job_transitions.h"
#include "server/jobs/request_validation.h"
#include "server/store/record_columns.h"
#include "worker/common/status.h"
#include "worker/job_spec/rpc_status.h"

namespace quantd::server {
namespace {

using google::protobuf::util::TimeUtil;

constexpr int kReapBatch = 100;
// google.rpc.Code values (the same numbers as quantd::StatusCode).
constexpr int kRpcOk = static_cast<int>(quantd::StatusCode::kOk);
constexpr int kRpcUnknown = static_cast<int>(quantd::StatusCode::kUnknown);
constexpr int kRpcAborted = static_cast<int>(quantd::StatusCode::kAborted);
constexpr int kRpcFailedPrecondition = static_cast<int>(quantd::StatusCode::kFailedPrecondition);
// Random bits of a lease secret.
constexpr int kLeaseSecretBytes = 16;

quantd::Status PermissionDenied(const Caller& caller) {
  return MakeError(
      quantd::StatusCode::kPermissionDenied, "PERMISSION_DENIED",
      caller.role == Role::kAdmin
          ? "an admin credential may not call the WorkerService; workers use a worker credential"
          : "this credential may not call the WorkerService; use a worker credential");
}

quantd::Status StaleLease(const JobRecord& record, int64_t token) {
  return MakeError(quantd::StatusCode::kFailedPrecondition, "STALE_LEASE",
                   absl::StrCat("lease token ", token, " is not the current lease of ",
                                record.job.name(), " (", StateName(record.job.state()),
                                ", current token ", record.lease_token, "); stop working on it"));
}

quantd::Status WrongSecret(const JobRecord& record, int64_t token) {
  return MakeError(
      quantd::StatusCode::kFailedPrecondition, "STALE_LEASE",
      absl::StrCat("the lease secret is not the one LeaseJob gave for lease token ", token, " of ",
                   record.job.name(), "; only the worker that took the lease may act on it"));
}

quantd::Status HeldByAnotherCredential(const JobRecord& record) {
  return MakeError(quantd::StatusCode::kPermissionDenied, "LEASE_HELD_BY_ANOTHER_CREDENTIAL",
                   absl::StrCat(record.job.name(),
                                " is leased to another worker credential; only the credential "
                                "that took the lease may act on it"));
}

quantd::Status AlreadyEndedDifferently(const JobRecord& record) {
  return MakeError(quantd::StatusCode::kFailedPrecondition, "JOB_ALREADY_FINISHED",
                   absl::StrCat(record.job.name(), " already ended ", StateName(record.job.state()),
                                " with a different outcome; a repeated call must carry the same "
                                "result and error"));
}

// The lease must be present and name a job; the secret is checked against
// the store.
quantd::Status CheckLeaseShape(const v1::Lease& lease, bool present) {
  if (!present) return InvalidRequestError({{"lease", "the lease from LeaseJob is required"}});
  return CheckJobName(lease.job(), "lease.job");
}

std::string TooLarge(size_t bytes, size_t limit) {
  return absl::StrCat(bytes, " bytes, at most ", limit, " are accepted");
}

// `lease` (whose secret digests to `secret_hash`) is the record's current
// lease and `caller` is the credential that took it. The generation is
// compared first, so a worker whose lease was taken over (by whichever
// credential) learns it is stale; the secret in constant time.
quantd::Status CheckHolder(const JobRecord& record, const Caller& caller, const v1::Lease& lease,
                           const std::string& secret_hash) {
  if (record.lease_token != lease.token()) return StaleLease(record, lease.token());
  if (record.lease_holder != caller.identity) return HeldByAnotherCredential(record);
  if (!ConstantTimeEquals(secret_hash, record.lease_secret_hash)) {
    return WrongSecret(record, lease.token());
  }
  return quantd::OkStatus();
}

// The lease is current and the job is still held by a worker.
quantd::Status CheckHoldsLease(const JobRecord& record, const Caller& caller,
                               const v1::Lease& lease, const std::string& secret_hash) {
  if (record.job.state() != v1::RUNNING && record.job.state() != v1::CANCELLING) {
    return StaleLease(record, lease.token());
  }
  return CheckHolder(record, caller, lease, secret_hash);
}

// A repeated CompleteJob/FailJob: the job already ended in `target` under
// this lease. OK (nothing to write) only for the same holder, secret and
// outcome.
quantd::Status CheckRepeatedOutcome(const JobRecord& record, const Caller& caller,
                                    const v1::Lease& lease, const std::string& secret_hash,
                                    const std::string& outcome_hash) {
  QD_RETURN_IF_ERROR(CheckHolder(record, caller, lease, secret_hash));
  if (!ConstantTimeEquals(outcome_hash, record.outcome_hash)) {
    return AlreadyEndedDifferently(record);
  }
  return quantd::OkStatus();
}

std::string ProgressProblem(const v1::Progress& progress) {
  const size_t bytes = progress.ByteSizeLong();
  return bytes > kMaxProgressBytes ? TooLarge(bytes, kMaxProgressBytes) : "";
}

// Job devices a worker of `device` may run.
std::vector<std::string> MatchingJobDevices(const std::string& device) {
  std::vector<std::string> devices = {"", device};
  if (absl::StartsWith(device, "cuda:")) devices.push_back("cuda");
  return devices;
}

v1::Lease MakeLease(const JobRecord& record, const std::string& secret) {
  v1::Lease lease;
  lease.set_job(record.job.name());
  lease.set_token(record.lease_token);
  *lease.mutable_expire_time() = ToTimestamp(record.lease_expire_time);
  lease.set_secret(secret);
  return lease;
}

// Ends a job whose lease no worker of this size can receive (a spec stored
// before the spec size limit, or by a frontend with another one): FAILED
// with reason LEASE_UNDELIVERABLE, instead of leases that expire one after
// another because the worker cannot even read them.
void FailUndeliverable(JobRecord& record, JobUpdate& update, const v1::WorkerInfo& worker,
                       size_t response_bytes, int64_t limit, absl::Time now) {
  v1::Job& job = record.job;
  const std::string message =
      absl::StrCat("the lease of this job would be ", response_bytes, " bytes, more than worker ",
                   worker.id(), " can receive (", limit, " bytes): its spec is ",
                   job.spec().ByteSizeLong(), " bytes (CreateJob accepts at most ",
                   kMaxJobSpecBytes, "); the job fails instead of being leased");
  google::rpc::Status* error = job.mutable_error();
  error->set_code(kRpcFailedPrecondition);
  error->set_message(message);
  google::rpc::ErrorInfo info;
  info.set_reason("LEASE_UNDELIVERABLE");
  info.set_domain(kErrorDomain);
  (*info.mutable_metadata())["worker"] = worker.id();
  (*info.mutable_metadata())["lease_bytes"] = absl::StrCat(response_bytes);
  (*info.mutable_metadata())["worker_limit_bytes"] = absl::StrCat(limit);
  error->clear_details();
  error->add_details()->PackFrom(info);
  record.lease_expire_time = absl::InfinitePast();
  update.events.push_back(LogEvent(job, v1::ERROR, message, now));
  Transition(record, v1::FAILED, now, update);
}

// What a repeated CompleteJob/FailJob must match: the request less its
// lease, deterministically serialized, with the method's name in front.
std::string OutcomeHash(absl::string_view method, const google::protobuf::Message& request) {
  return Sha256Digest(absl::StrCat(method, "\n", SerializeDeterministic(request)));
}

bool IsEmptyResult(const v1::JobResult& result) { return result.ByteSizeLong() == 0; }

}  // namespace

LeaseService::LeaseService(JobStore* store, Clock* clock, ChangeNotifier* notifier,
                           JobObserver* observer, JobsOptions options)
    : store_(store),
      clock_(clock),
      notifier_(notifier),
      observer_(observer),
      options_(std::move(options)) {}

quantd::StatusOr<v1::LeaseJobResponse> LeaseService::LeaseJob(
    const Caller& caller, const v1::LeaseJobRequest& request,
    const std::function<bool()>& cancelled) {
  if (!caller.MayWork()) return PermissionDenied(caller);
  std::vector<FieldViolation> violations;
  if (request.worker().id().empty()) {
    violations.push_back({"worker.id", "a worker id, unique per process, is required"});
  } else if (request.worker().id().size() > kMaxWorkerIdBytes) {
    violations.push_back({"worker.id", TooLarge(request.worker().id().size(), kMaxWorkerIdBytes)});
  }
  if (std::string problem = CheckWorkerDevice(request.worker().device()); !problem.empty()) {
    violations.push_back({"worker.device", problem});
  }
  absl::Duration wait = absl::ZeroDuration();
  if (request.has_wait()) {
    if (request.wait().seconds() < 0 || request.wait().nanos() < 0) {
      violations.push_back({"wait", "must be a non-negative duration"});
    } else {
      wait = absl::Seconds(request.wait().seconds()) + absl::Nanoseconds(request.wait().nanos());
    }
  }
  if (request.max_response_bytes() != 0 && request.max_response_bytes() < kMinWorkerReceiveBytes) {
    violations.push_back(
        {"max_response_bytes", absl::StrCat("0 (4 MiB) or at least ", kMinWorkerReceiveBytes,
                                            ", got ", request.max_response_bytes())});
  }
  if (!violations.empty()) return InvalidRequestError(violations);
  wait = std::min(wait, options_.max_lease_wait);
  const int64_t receive_limit =
      request.max_response_bytes() != 0 ? request.max_response_bytes() : kDefaultWorkerReceiveBytes;

  const v1::WorkerInfo& worker = request.worker();
  if (observer_ != nullptr && !worker.id().empty()) observer_->WorkerSeen(worker);
  const std::vector<std::string> devices = MatchingJobDevices(worker.device());
  const absl::Time give_up = absl::Now() + wait;  // real time: this is how long the RPC blocks
  v1::LeaseJobResponse response;
  *response.mutable_heartbeat_interval() =
      TimeUtil::MicrosecondsToDuration(absl::ToInt64Microseconds(heartbeat_interval()));
  while (true) {
    const uint64_t generation = notifier_->QueueGeneration();
    const absl::Time now = clock_->Now();
    // A fresh secret for each claim; only its digest is stored.
    QD_ASSIGN_OR_RETURN(std::string secret, RandomHex(kLeaseSecretBytes));
    const std::string secret_hash = Sha256Digest(secret);
    bool undeliverable = false;
    quantd::StatusOr<std::optional<JobRecord>> claimed =
        store_->ClaimQueuedJob({devices, now}, [&](JobRecord& record, JobUpdate& update) {
          const JobRecord queued = record;
          undeliverable = false;
          v1::Job& job = record.job;
          job.set_attempt(job.attempt() + 1);
          job.set_worker(worker.id());
          job.clear_progress();
          if (!job.has_start_time()) *job.mutable_start_time() = ToTimestamp(now);
          record.lease_token += 1;
          record.lease_expire_time = now + options_.lease_duration;
          record.lease_secret_hash = secret_hash;
          record.lease_holder = caller.identity;
          update.events.push_back(LogEvent(
              job, v1::INFO,
              absl::StrCat("leased by worker ", worker.id(), " (", worker.device(), "), attempt ",
                           job.attempt(), " of ", job.spec().max_attempts()),
              now));
          Transition(record, v1::RUNNING, now, update);
          // The exact answer this worker would have to receive.
          v1::LeaseJobResponse answer = response;
          *answer.mutable_job() = record.job;
          *answer.mutable_lease() = MakeLease(record, secret);
          const size_t bytes = answer.ByteSizeLong();
          if (bytes <= static_cast<size_t>(receive_limit)) return quantd::OkStatus();
          record = queued;
          update.events.clear();
          undeliverable = true;
          FailUndeliverable(record, update, worker, bytes, receive_limit, now);
          return quantd::OkStatus();
        });
    if (!claimed.ok()) return claimed.status();
    if (claimed->has_value() && undeliverable) {
      const JobRecord& record = **claimed;
      notifier_->NotifyJob(record.job.name());
      if (observer_ != nullptr) {
        observer_->JobFinished(record.job, FromTimestamp(record.job.end_time()) -
                                               FromTimestamp(record.job.create_time()));
      }
      nlohmann::json fields = JobLogFields(record.job);
      fields["error"] = record.job.error().message();
      Log(LogLevel::kWarning, "job failed: lease undeliverable", fields);
      continue;  // this worker gets the next job
    }
    if (claimed->has_value()) {
      const JobRecord& record = **claimed;
      *response.mutable_job() = record.job;
      *response.mutable_lease() = MakeLease(record, secret);
      notifier_->NotifyJob(record.job.name());
      Log(LogLevel::kInfo, "job leased", JobLogFields(record.job));
      return response;
    }
    const absl::Duration left = give_up - absl::Now();
    if (left <= absl::ZeroDuration() || cancelled() || notifier_->IsShutdown()) return response;
    notifier_->WaitForQueueChange(generation, std::min(left, options_.poll_interval));
  }
}

quantd::StatusOr<v1::HeartbeatResponse> LeaseService::Heartbeat(
    const Caller& caller, const v1::HeartbeatRequest& request) {
  if (!caller.MayWork()) return PermissionDenied(caller);
  QD_RETURN_IF_ERROR(CheckLeaseShape(request.lease(), request.has_lease()));
  std::vector<FieldViolation> violations;
  if (std::string problem = ProgressProblem(request.progress()); !problem.empty()) {
    violations.push_back({"progress", problem});
  }
  if (request.worker().id().size() > kMaxWorkerIdBytes) {
    violations.push_back({"worker.id", TooLarge(request.worker().id().size(), kMaxWorkerIdBytes)});
  }
  if (!violations.empty()) return InvalidRequestError(violations);
  const std::string secret_hash = Sha256Digest(request.lease().secret());
  const absl::Time now = clock_->Now();
  quantd::StatusOr<JobRecord> updated =
      store_->UpdateJob(request.lease().job(), [&](JobRecord& record, JobUpdate&) {
        QD_RETURN_IF_ERROR(CheckHoldsLease(record, caller, request.lease(), secret_hash));
        record.lease_expire_time = now + options_.lease_duration;
        if (request.has_progress()) *record.job.mutable_progress() = request.progress();
        *record.job.mutable_update_time() = ToTimestamp(now);
        return quantd::OkStatus();
      });
  if (!updated.ok()) return updated.status();
  if (observer_ != nullptr) {
    v1::WorkerInfo worker = request.worker();
    if (worker.id().empty()) worker.set_id(updated->job.worker());
    if (!worker.id().empty()) observer_->WorkerSeen(worker);
  }
  v1::HeartbeatResponse response;
  *response.mutable_lease() = MakeLease(*updated, request.lease().secret());
  response.set_cancel_requested(updated->job.state() == v1::CANCELLING);
  return response;
}

quantd::StatusOr<v1::ReportEventsResponse> LeaseService::ReportEvents(
    const Caller& caller, const v1::ReportEventsRequest& request) {
  if (!caller.MayWork()) return PermissionDenied(caller);
  QD_RETURN_IF_ERROR(CheckLeaseShape(request.lease(), request.has_lease()));
  std::vector<FieldViolation> violations;
  if (request.events_size() > options_.max_events_per_report) {
    violations.push_back({"events", absl::StrCat("at most ", options_.max_events_per_report,
                                                 " events per call, got ", request.events_size())});
  }
  for (int i = 0; i < request.events_size(); ++i) {
    const v1::JobEvent& event = request.events(i);
    std::string field = absl::StrCat("events[", i, "]");
    if (const size_t bytes = event.ByteSizeLong(); bytes > kMaxEventBytes) {
      violations.push_back({field, TooLarge(bytes, kMaxEventBytes)});
      continue;
    }
    switch (event.payload_case()) {
      case v1::JobEvent::kProgress:
        if (std::string problem = ProgressProblem(event.progress()); !problem.empty()) {
          violations.push_back({field + ".progress", problem});
        }
        break;
      case v1::JobEvent::kLog:
      case v1::JobEvent::kBlockMetrics:
        break;
      case v1::JobEvent::kState:
        violations.push_back(
            {field + ".state", "workers change state with CompleteJob or FailJob, not events"});
        break;
      case v1::JobEvent::kResult:
        violations.push_back({field + ".result", "send the result with CompleteJob"});
        break;
      case v1::JobEvent::PAYLOAD_NOT_SET:
        violations.push_back({field, "an event needs a progress, log or block_metrics payload"});
        break;
    }
  }
  if (!violations.empty()) return InvalidRequestError(violations);

  const std::string secret_hash = Sha256Digest(request.lease().secret());
  const absl::Time now = clock_->Now();
  quantd::StatusOr<JobRecord> updated =
      store_->UpdateJob(request.lease().job(), [&](JobRecord& record, JobUpdate& update) {
        QD_RETURN_IF_ERROR(CheckHoldsLease(record, caller, request.lease(), secret_hash));
        for (const v1::JobEvent& in : request.events()) {
          v1::JobEvent event = in;
          if (!event.has_time()) *event.mutable_time() = ToTimestamp(now);
          event.set_attempt(record.job.attempt());
          event.clear_sequence();
          if (event.has_progress()) *record.job.mutable_progress() = event.progress();
          update.events.push_back(std::move(event));
        }
        *record.job.mutable_update_time() = ToTimestamp(now);
        return quantd::OkStatus();
      });
  if (!updated.ok()) return updated.status();
  notifier_->NotifyJob(updated->job.name());
  v1::ReportEventsResponse response;
  response.set_cancel_requested(updated->job.state() == v1::CANCELLING);
  return response;
}

quantd::StatusOr<v1::CompleteJobResponse> LeaseService::CompleteJob(
    const Caller& caller, const v1::CompleteJobRequest& request) {
  if (!caller.MayWork()) return PermissionDenied(caller);
  QD_RETURN_IF_ERROR(CheckLeaseShape(request.lease(), request.has_lease()));
  if (const size_t bytes = request.result().ByteSizeLong(); bytes > kMaxResultBytes) {
    return InvalidRequestError({{"result", TooLarge(bytes, kMaxResultBytes)}});
  }
  const std::string secret_hash = Sha256Digest(request.lease().secret());
  v1::CompleteJobRequest outcome = request;
  outcome.clear_lease();
  const std::string outcome_hash = OutcomeHash("CompleteJob", outcome);
  const absl::Time now = clock_->Now();
  bool finished_now = false;
  quantd::StatusOr<JobRecord> updated =
      store_->UpdateJob(request.lease().job(), [&](JobRecord& record, JobUpdate& update) {
        finished_now = false;
        if (record.job.state() == v1::SUCCEEDED && record.lease_token == request.lease().token()) {
          // A retry of a completion that already landed: the same worker
          // with the same result, or a refusal.
          update.write = false;
          return CheckRepeatedOutcome(record, caller, request.lease(), secret_hash, outcome_hash);
        }
        QD_RETURN_IF_ERROR(CheckHoldsLease(record, caller, request.lease(), secret_hash));
        record.outcome_hash = outcome_hash;
        *record.job.mutable_result() = request.result();
        record.job.mutable_progress()->set_percent(100);
        record.lease_expire_time = absl::InfinitePast();
        v1::JobEvent result;
        *result.mutable_result() = request.result();
        *result.mutable_time() = ToTimestamp(now);
        result.set_attempt(record.job.attempt());
        update.events.push_back(std::move(result));
        Transition(record, v1::SUCCEEDED, now, update);
        finished_now = true;
        return quantd::OkStatus();
      });
  if (!updated.ok()) return updated.status();
  if (finished_now) {
    notifier_->NotifyJob(updated->job.name());
    if (observer_ != nullptr) {
      observer_->JobFinished(updated->job, FromTimestamp(updated->job.end_time()) -
                                               FromTimestamp(updated->job.create_time()));
    }
    Log(LogLevel::kInfo, "job succeeded", JobLogFields(updated->job));
  }
  return v1::CompleteJobResponse();
}

quantd::StatusOr<v1::FailJobResponse> LeaseService::FailJob(const Caller& caller,
                                                            const v1::FailJobRequest& request) {
  if (!caller.MayWork()) return PermissionDenied(caller);
  QD_RETURN_IF_ERROR(CheckLeaseShape(request.lease(), request.has_lease()));
  std::vector<FieldViolation> violations;
  if (const size_t bytes = request.error().ByteSizeLong(); bytes > kMaxErrorBytes) {
    violations.push_back({"error", TooLarge(bytes, kMaxErrorBytes)});
  }
  if (const size_t bytes = request.result().ByteSizeLong(); bytes > kMaxResultBytes) {
    violations.push_back({"result", TooLarge(bytes, kMaxResultBytes)});
  }
  if (!violations.empty()) return InvalidRequestError(violations);
  const std::string secret_hash = Sha256Digest(request.lease().secret());
  v1::FailJobRequest outcome = request;
  outcome.clear_lease();
  const std::string outcome_hash = OutcomeHash("FailJob", outcome);
  const absl::Time now = clock_->Now();
  const v1::JobState target = request.cancelled() ? v1::CANCELLED : v1::FAILED;
  bool finished_now = false;
  quantd::StatusOr<JobRecord> updated =
      store_->UpdateJob(request.lease().job(), [&](JobRecord& record, JobUpdate& update) {
        finished_now = false;
        if (record.job.state() == target && record.lease_token == request.lease().token()) {
          update.write = false;  // a retry: only of the same outcome by the same worker
          return CheckRepeatedOutcome(record, caller, request.lease(), secret_hash, outcome_hash);
        }
        QD_RETURN_IF_ERROR(CheckHoldsLease(record, caller, request.lease(), secret_hash));
        record.outcome_hash = outcome_hash;
        google::rpc::Status error = request.error();
        if (target == v1::FAILED && error.code() == kRpcOk) {
          // A failure must say something; never store FAILED without a cause.
          error.set_code(kRpcUnknown);
          if (error.message().empty())
            error.set_message("the worker reported a failure without an error");
        }
        if (error.code() != kRpcOk) *record.job.mutable_error() = error;
        if (!IsEmptyResult(request.result())) {
          *record.job.mutable_result() = request.result();
          v1::JobEvent result;
          *result.mutable_result() = request.result();
          *result.mutable_time() = ToTimestamp(now);
          result.set_attempt(record.job.attempt());
          update.events.push_back(std::move(result));
        }
        record.lease_expire_time = absl::InfinitePast();
        if (error.code() != kRpcOk) {
          update.events.push_back(LogEvent(record.job, target == v1::FAILED ? v1::ERROR : v1::INFO,
                                           error.message(), now));
        }
        Transition(record, target, now, update);
        finished_now = true;
        return quantd::OkStatus();
      });
  if (!updated.ok()) return updated.status();
  if (finished_now) {
    notifier_->NotifyJob(updated->job.name());
    if (observer_ != nullptr) {
      observer_->JobFinished(updated->job, FromTimestamp(updated->job.end_time()) -
                                               FromTimestamp(updated->job.create_time()));
    }
    nlohmann::json fields = JobLogFields(updated->job);
    fields["error"] = updated->job.error().message();
    Log(target == v1::FAILED ? LogLevel::kWarning : LogLevel::kInfo,
        target == v1::FAILED ? "job failed" : "job cancelled", fields);
  }
  return v1::FailJobResponse();
}

quantd::StatusOr<int> LeaseService::ReapExpiredLeases() {
  const absl::Time now = clock_->Now();
  int changed = 0;
  bool requeued = false;
  while (true) {
    QD_ASSIGN_OR_RETURN(std::vector<std::string> expired,
                        store_->ListExpiredLeases(now, kReapBatch));
    int changed_in_batch = 0;
    for (const std::string& name : expired) {
      v1::JobState before = v1::JOB_STATE_UNSPECIFIED;
      bool reaped = false;
      quantd::StatusOr<JobRecord> updated = store_->UpdateJob(name, [&](JobRecord& record,
                                                                        JobUpdate& update) {
        v1::Job& job = record.job;
        before = job.state();
        reaped = false;
        // Re-check under the row lock: a heartbeat or another
        // frontend's reaper may have got here first.
        if ((before != v1::RUNNING && before != v1::CANCELLING) || record.lease_expire_time > now) {
          update.write = false;
          return quantd::OkStatus();
        }
        reaped = true;
        record.lease_expire_time = absl::InfinitePast();
        const int max_attempts = job.spec().has_max_attempts() ? job.spec().max_attempts()
                                                               : options_.default_max_attempts;
        if (before == v1::CANCELLING) {
          update.events.push_back(LogEvent(
              job, v1::WARNING,
              absl::StrCat("lease expired on worker ", job.worker(), " while cancelling"), now));
          Transition(record, v1::CANCELLED, now, update);
        } else if (job.attempt() >= max_attempts) {
          std::string message = absl::StrCat("lease expired on worker ", job.worker(), ", attempt ",
                                             job.attempt(), " of ", max_attempts, "; giving up");
          google::rpc::Status* error = job.mutable_error();
          error->set_code(kRpcAborted);
          error->set_message(message);
          google::rpc::ErrorInfo info;
          info.set_reason("LEASE_EXPIRED_MAX_ATTEMPTS");
          info.set_domain(kErrorDomain);
          (*info.mutable_metadata())["worker"] = job.worker();
          (*info.mutable_metadata())["attempts"] = absl::StrCat(job.attempt());
          error->clear_details();
          error->add_details()->PackFrom(info);
          update.events.push_back(LogEvent(job, v1::ERROR, message, now));
          Transition(record, v1::FAILED, now, update);
        } else {
          absl::Duration backoff = options_.requeue_backoff;
          for (int i = 1; i < job.attempt() && backoff < options_.max_requeue_backoff; ++i) {
            backoff *= 2;
          }
          backoff = std::min(backoff, options_.max_requeue_backoff);
          record.available_time = now + backoff;
          update.events.push_back(LogEvent(
              job, v1::WARNING,
              absl::StrCat("lease expired on worker ", job.worker(), ", attempt ", job.attempt(),
                           "; queued again (eligible in ", absl::FormatDuration(backoff), ")"),
              now));
          Transition(record, v1::QUEUED, now, update);
        }
        return quantd::OkStatus();
      });
      if (!updated.ok()) {
        if (updated.status().code() == quantd::StatusCode::kNotFound) continue;
        return updated.status();
      }
      if (!reaped) continue;
      ++changed;
      ++changed_in_batch;
      notifier_->NotifyJob(name);
      if (observer_ != nullptr) {
        observer_->LeaseExpired(updated->job);
        if (IsTerminal(updated->job.state())) {
          observer_->JobFinished(updated->job, FromTimestamp(updated->job.end_time()) -
                                                   FromTimestamp(updated->job.create_time()));
        }
      }
      nlohmann::json fields = JobLogFields(updated->job);
      fields["state"] = StateName(updated->job.state());
      Log(LogLevel::kWarning, "lease expired", fields);
      if (updated->job.state() == v1::QUEUED) requeued = true;
    }
    if (static_cast<int>(expired.size()) < kReapBatch || changed_in_batch == 0) break;
  }
  if (requeued) notifier_->NotifyQueue();
  return changed;
}

}  // namespace quantd::server
