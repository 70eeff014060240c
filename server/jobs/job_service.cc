#include "server/jobs/job_service.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "server/common/errors.h"
#include "server/common/json_log.h"
#include "server/jobs/job_transitions.h"
#include "server/jobs/page_token.h"
#include "server/jobs/request_validation.h"
#include "server/store/record_columns.h"
#include "worker/common/status.h"
#include "worker/io/uri/uri_parser.h"

namespace quantd::server {
namespace {

constexpr int kWatchBatch = 256;

quantd::Status PermissionDenied(absl::string_view what) {
  return MakeError(quantd::StatusCode::kPermissionDenied, "PERMISSION_DENIED",
                   absl::StrCat("this credential may not ", what));
}

// The spec with the defaults that must not change once a job exists (they
// would otherwise depend on the flags of whichever frontend or worker reads
// it later).
void FillStableDefaults(const JobsOptions& options, const std::string& id, v1::JobSpec& spec) {
  if (!spec.has_max_attempts()) spec.set_max_attempts(options.default_max_attempts);
  if (spec.export_().output_uri().empty() && !id.empty()) {
    // Encoded, so that the one URI parser reads back exactly this path.
    spec.mutable_export_()->set_output_uri(
        io::PathToFileUri(absl::StrCat(options.data_dir, "/artifacts/", id)));
  }
}

// ListJobs' BASIC view (quantization_service.proto, JobView): the job
// without its full quantization config and per-block metrics.
void ApplyBasicView(v1::Job& job) {
  if (job.spec().has_quantization()) {
    v1::QuantizationSettings* q = job.mutable_spec()->mutable_quantization();
    // The kind of source stays visible (an empty config or JSON string is
    // still the oneof's member); its content goes.
    if (q->has_config()) q->mutable_config()->Clear();
    if (q->has_quark_json()) q->set_quark_json("");
    q->clear_exclude();
    q->clear_algorithms();
  }
  if (job.has_result() && job.result().has_metrics()) {
    job.mutable_result()->mutable_metrics()->clear_blocks();
  }
}

}  // namespace

std::string DescribeSpecDifference(const v1::JobSpec& stored, const v1::JobSpec& requested) {
  std::vector<std::string> differing;
  const google::protobuf::Descriptor* descriptor = v1::JobSpec::descriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* keep = descriptor->field(i);
    v1::JobSpec a = stored;
    v1::JobSpec b = requested;
    for (int j = 0; j < descriptor->field_count(); ++j) {
      if (j == i) continue;
      a.GetReflection()->ClearField(&a, descriptor->field(j));
      b.GetReflection()->ClearField(&b, descriptor->field(j));
    }
    if (SerializeDeterministic(a) != SerializeDeterministic(b)) differing.push_back(keep->name());
  }
  return absl::StrJoin(differing, ", ");
}

JobService::JobService(JobStore* store, Clock* clock, ChangeNotifier* notifier,
                       JobObserver* observer, JobsOptions options)
    : store_(store),
      clock_(clock),
      notifier_(notifier),
      observer_(observer),
      options_(std::move(options)) {}

quantd::Status JobService::CheckSpec(const v1::CreateJobRequest& request, const std::string& tenant,
                                     std::vector<std::string>* warnings) {
  std::vector<FieldViolation> violations = ValidateCreateJobRequest(request);
  if (!request.has_spec()) return InvalidRequestError(violations);
  // An oversized spec is refused before anything parses it further: it
  // could never be delivered to a client or a worker.
  std::vector<FieldViolation> size = CheckJobSpecSize(request.spec());
  if (!size.empty()) {
    violations.insert(violations.end(), size.begin(), size.end());
    quantd::Status too_large = InvalidRequestError(violations);
    SetReason(too_large, "JOB_SPEC_TOO_LARGE");
    return too_large;
  }
  // A URI outside the allowed roots is refused before anything looks at it
  // further, whatever else is wrong with the request. A malformed URI is one
  // more bad field: it goes out with the others, and the engine's words for
  // the same field are left out.
  std::set<std::string> uri_fields;
  if (options_.uri_policy) {
    quantd::Status uris = options_.uri_policy(request.spec(), tenant);
    if (uris.code() != quantd::StatusCode::kInvalidArgument && !uris.ok()) return uris;
    for (const FieldViolation& v : uris.violations()) {
      uri_fields.insert(v.field);
      violations.push_back(v);
    }
  }
  // The server's envelope problems and the engine's bad fields go out
  // together, so one answer names every bad field.
  quantd::Status engine =
      options_.spec_check ? options_.spec_check(request.spec(), warnings) : quantd::OkStatus();
  if (!violations.empty()) {
    if (engine.code() == quantd::StatusCode::kInvalidArgument) {
      for (const FieldViolation& v : engine.violations()) {
        if (uri_fields.count(v.field) == 0) violations.push_back(v);
      }
    }
    return InvalidRequestError(violations);
  }
  return engine;
}

quantd::StatusOr<v1::Job> JobService::CreateJob(const Caller& caller,
                                                const v1::CreateJobRequest& request) {
  if (!caller.MaySubmit()) return PermissionDenied("submit jobs");
  std::vector<std::string> warnings;
  QD_RETURN_IF_ERROR(CheckSpec(request, caller.tenant, &warnings));

  const absl::Time now = clock_->Now();
  JobRecord record;
  v1::Job& job = record.job;
  *job.mutable_spec() = request.spec();
  job.set_tenant(caller.tenant);
  job.set_request_id(request.request_id());
  job.set_state(v1::QUEUED);
  *job.mutable_create_time() = ToTimestamp(now);
  *job.mutable_update_time() = ToTimestamp(now);
  record.request_spec = SerializeDeterministic(request.spec());
  record.available_time = now;

  if (request.validate_only()) {
    FillStableDefaults(options_, "", *job.mutable_spec());
    return job;
  }
  const std::string id = ids_.NewId(now);
  job.set_name(absl::StrCat(kJobNamePrefix, id));
  FillStableDefaults(options_, id, *job.mutable_spec());

  JobUpdate first;
  Transition(record, v1::QUEUED, now, first);
  for (const std::string& w : warnings) first.events.push_back(LogEvent(job, v1::WARNING, w, now));
  CreateJobOptions create_options;
  create_options.max_queued_per_tenant = options_.max_queued_per_tenant;
  QD_ASSIGN_OR_RETURN(CreateJobOutcome outcome,
                      store_->CreateJob(record, std::move(first.events), create_options));

  if (!outcome.created) {
    const JobRecord& stored = outcome.record;
    if (stored.request_spec == record.request_spec) return stored.job;
    v1::JobSpec stored_spec;
    stored_spec.ParseFromString(stored.request_spec);
    return MakeError(quantd::StatusCode::kAlreadyExists, "REQUEST_ID_REUSED",
                     absl::StrCat("request_id \"", request.request_id(), "\" was already used for ",
                                  stored.job.name(), " with a different spec (differs in: ",
                                  DescribeSpecDifference(stored_spec, request.spec()),
                                  "); use a new request_id for a different job"));
  }
  notifier_->NotifyQueue();
  if (observer_ != nullptr) observer_->JobSubmitted(outcome.record.job);
  Log(LogLevel::kInfo, "job created", JobLogFields(outcome.record.job));
  return outcome.record.job;
}

quantd::StatusOr<JobRecord> JobService::ReadVisibleJob(const Caller& caller, absl::string_view name,
                                                       absl::string_view field) {
  QD_RETURN_IF_ERROR(CheckJobName(name, field));
  QD_ASSIGN_OR_RETURN(JobRecord record, store_->GetJob(name));
  // Another tenant's job gets the same answer as a missing one, so names
  // reveal nothing across tenants.
  if (!caller.MaySee(record.job.tenant())) return JobNotFoundError(name);
  return record;
}

quantd::StatusOr<v1::Job> JobService::GetJob(const Caller& caller,
                                             const v1::GetJobRequest& request) {
  if (!caller.MaySubmit()) return PermissionDenied("read jobs");
  QD_ASSIGN_OR_RETURN(JobRecord record, ReadVisibleJob(caller, request.name(), "name"));
  return std::move(record.job);
}

quantd::StatusOr<v1::ListJobsResponse> JobService::ListJobs(const Caller& caller,
                                                            const v1::ListJobsRequest& request) {
  if (!caller.MaySubmit()) return PermissionDenied("list jobs");
  std::vector<FieldViolation> violations = ValidateListJobsRequest(request);
  if (!violations.empty()) return InvalidRequestError(violations);
  const uint64_t fingerprint = ListQueryFingerprint(request);

  ListJobsQuery query;
  if (caller.role != Role::kAdmin) query.tenant = caller.tenant;
  std::set<v1::JobState> states;
  for (int s : request.states()) states.insert(static_cast<v1::JobState>(s));
  query.states.assign(states.begin(), states.end());
  std::map<std::string, std::string> labels(request.labels().begin(), request.labels().end());
  query.labels.assign(labels.begin(), labels.end());
  query.ascending = OrderAscending(request.order_by());
  const int page_size = EffectivePageSize(request.page_size());
  query.limit = page_size + 1;  // one more tells whether there is a next page
  if (!request.page_token().empty()) {
    QD_ASSIGN_OR_RETURN(PageToken token, DecodePageToken(request.page_token(), fingerprint));
    query.after = ListJobsQuery::Cursor{token.create_time, token.name};
  }
  QD_ASSIGN_OR_RETURN(std::vector<JobRecord> records, store_->ListJobs(query));

  v1::ListJobsResponse response;
  const bool full = request.view() == v1::FULL;
  const int available = std::min<int>(page_size, records.size());
  size_t bytes = 0;
  int shown = 0;
  for (; shown < available; ++shown) {
    v1::Job& job = (records)[shown].job;
    if (!full) ApplyBasicView(job);
    // A page stays small enough for any client to receive; the next page
    // token continues after the last job shown.
    const size_t job_bytes = job.ByteSizeLong() + 8;  // + the field's tag and length
    if (shown > 0 && bytes + job_bytes > kMaxListResponseBytes) break;
    bytes += job_bytes;
    *response.add_jobs() = std::move(job);
  }
  if (static_cast<int>(records.size()) > shown) {
    const v1::Job& last = response.jobs(shown - 1);
    response.set_next_page_token(
        EncodePageToken({FromTimestamp(last.create_time()), last.name(), fingerprint}));
  }
  return response;
}

quantd::StatusOr<v1::Job> JobService::CancelJob(const Caller& caller,
                                                const v1::CancelJobRequest& request) {
  if (!caller.MaySubmit()) return PermissionDenied("cancel jobs");
  QD_RETURN_IF_ERROR(ReadVisibleJob(caller, request.name(), "name"));

  const absl::Time now = clock_->Now();
  quantd::StatusOr<JobRecord> updated =
      store_->UpdateJob(request.name(), [&](JobRecord& record, JobUpdate& update) {
        switch (record.job.state()) {
          case v1::QUEUED:
            update.events.push_back(LogEvent(record.job, v1::INFO, "cancelled while queued", now));
            Transition(record, v1::CANCELLED, now, update);
            return quantd::OkStatus();
          case v1::RUNNING:
            update.events.push_back(
                LogEvent(record.job, v1::INFO,
                         absl::StrCat("cancel requested; worker ", record.job.worker(),
                                      " stops at its next block boundary"),
                         now));
            Transition(record, v1::CANCELLING, now, update);
            return quantd::OkStatus();
          case v1::CANCELLING:
            update.write = false;  // already on its way
            return quantd::OkStatus();
          default:
            return MakeError(
                quantd::StatusCode::kFailedPrecondition, "JOB_ALREADY_FINISHED",
                absl::StrCat(record.job.name(), " already ended ", StateName(record.job.state()),
                             "; there is nothing to cancel"));
        }
      });
  if (!updated.ok()) return updated.status();
  notifier_->NotifyJob(updated->job.name());
  if (updated->job.state() == v1::CANCELLED) {
    if (observer_ != nullptr) {
      observer_->JobFinished(updated->job, FromTimestamp(updated->job.end_time()) -
                                               FromTimestamp(updated->job.create_time()));
    }
    Log(LogLevel::kInfo, "job cancelled while queued", JobLogFields(updated->job));
  } else {
    Log(LogLevel::kInfo, "job cancel requested", JobLogFields(updated->job));
  }
  return std::move(updated->job);
}

quantd::Status JobService::WatchJob(const Caller& caller, const v1::WatchJobRequest& request,
                                    const WatchStream& stream) {
  if (!caller.MaySubmit()) return PermissionDenied("watch jobs");
  if (request.after_sequence() < 0) {
    return InvalidRequestError({{"after_sequence", "must not be negative"}});
  }
  QD_ASSIGN_OR_RETURN(JobRecord visible, ReadVisibleJob(caller, request.name(), "name"));

  const int active = ++active_watches_;
  absl::Cleanup release = [this] { --active_watches_; };
  if (options_.max_concurrent_watches > 0 && active > options_.max_concurrent_watches) {
    return MakeError(quantd::StatusCode::kResourceExhausted, "TOO_MANY_WATCHES",
                     absl::StrCat("this frontend already serves ", options_.max_concurrent_watches,
                                  " WatchJob streams; retry later or poll GetJob"));
  }
  // Counted by the watching caller's tenant, so one tenant cannot take
  // every stream of the frontend from the others.
  int tenant_active = 0;
  {
    absl::MutexLock lock(&watches_mu_);
    tenant_active = ++watches_by_tenant_[caller.tenant];
  }
  absl::Cleanup release_tenant = [this, &caller] {
    absl::MutexLock lock(&watches_mu_);
    auto it = watches_by_tenant_.find(caller.tenant);
    if (--it->second == 0) watches_by_tenant_.erase(it);
  };
  if (options_.max_watches_per_tenant > 0 && tenant_active > options_.max_watches_per_tenant) {
    return MakeError(
        quantd::StatusCode::kResourceExhausted, "TOO_MANY_WATCHES",
        absl::StrCat("tenant \"", caller.tenant, "\" already has ", options_.max_watches_per_tenant,
                     " WatchJob streams open on this frontend (the per-tenant limit, "
                     "--max-watches-per-tenant); close one, retry later or poll GetJob"));
  }

  const std::string& name = request.name();
  ChangeNotifier::Subscription subscription(notifier_, name);
  int64_t last_sent = request.after_sequence();
  // A job's terminal state event is always the last event it gets (nothing
  // is appended after it), so seeing one ends the stream. Only a watcher
  // that resumes past it needs the job row; later polls read events alone.
  if (IsTerminal(visible.job.state()) && visible.last_sequence <= last_sent) {
    return quantd::OkStatus();
  }
  while (true) {
    if (stream.cancelled()) return quantd::CancelledError("the watcher went away");
    if (notifier_->IsShutdown()) {
      return MakeError(quantd::StatusCode::kUnavailable, "SHUTTING_DOWN",
                       "quantd is shutting down; resume with after_sequence");
    }
    // Read the generation before the store, so an event committed after
    // the read below still wakes the wait.
    const uint64_t generation = subscription.Generation();
    QD_ASSIGN_OR_RETURN(std::vector<v1::JobEvent> events,
                        store_->ListEvents(name, last_sent, kWatchBatch));
    for (const v1::JobEvent& event : events) {
      if (!stream.send(event)) return quantd::CancelledError("the watcher went away");
      last_sent = event.sequence();
      if (event.has_state() && IsTerminal(event.state())) return quantd::OkStatus();
    }
    if (static_cast<int>(events.size()) == kWatchBatch) continue;
    subscription.WaitForChange(generation, options_.poll_interval);
  }
}

}  // namespace quantd::server
