// JobStore: the durable home of every job and its event stream. quantd keeps
// no job state that is not here, so a restart (or another frontend sharing
// the same database) loses nothing.
//
// The store knows rows, indexes and transactions; the job state machine
// lives in server/jobs and reaches the store through Mutations, which the
// store runs inside one transaction on a locked row. SQLite and PostgreSQL
// implement the same contract (CreateJob's idempotency and QUEUE_FULL rules
// in one place, server/store/create_job_rules.h), and
// server/store/job_store_test.cc tests it against both.
#ifndef QUANTD_SERVER_STORE_JOB_STORE_H_
#define QUANTD_SERVER_STORE_JOB_STORE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "quantd/v1/job.pb.h"
#include "worker/common/status.h"

namespace quantd::server {

// A job as stored: the Job proto plus the queue and lease bookkeeping that
// clients never see. The indexed columns (state, tenant, request_id,
// create_time, device, labels) are derived from `job` on every write.
struct JobRecord {
  v1::Job job;
  // Deterministic serialization of the spec as the client sent it, before
  // defaults were filled in; idempotent retries compare against it.
  std::string request_spec;
  // The generation of the current (or last) lease; 0 before the first.
  int64_t lease_token = 0;
  // SHA-256 (32 bytes) of the current (or last) lease's secret; empty
  // before the first lease. The secret itself is never stored.
  std::string lease_secret_hash;
  // The identity (Caller::identity) of the credential that took the
  // current (or last) lease.
  std::string lease_holder;
  // SHA-256 of the CompleteJob or FailJob request (less its lease) that
  // ended the job; a repeated call must carry the same outcome. Empty until
  // a worker ends the job.
  std::string outcome_hash;
  // When the current lease ends. Meaningful while RUNNING or CANCELLING.
  absl::Time lease_expire_time = absl::InfinitePast();
  // A QUEUED job may be leased from this time on (re-queue backoff).
  absl::Time available_time = absl::InfinitePast();
  // The highest event sequence number of this job (0: no events yet).
  int64_t last_sequence = 0;
};

// What a Mutation asks the store to write besides the record.
struct JobUpdate {
  // Appended in order; the store sets `job` and assigns `sequence`
  // (last_sequence + 1, + 2, ...) and advances record.last_sequence.
  std::vector<v1::JobEvent> events;
  // False: the mutation decided there is nothing to do; nothing is written
  // and the call returns the record as read.
  bool write = true;
};

// Runs inside the store's transaction with the row locked. A non-OK status
// aborts the transaction: nothing is written and the store call returns it.
using Mutation = std::function<quantd::Status(JobRecord& record, JobUpdate& update)>;

struct CreateJobOptions {
  // When > 0, refuse (RESOURCE_EXHAUSTED, reason QUEUE_FULL) a new job when
  // the tenant already has this many QUEUED jobs. An idempotent retry of an
  // existing job is never refused.
  int max_queued_per_tenant = 0;
};

struct CreateJobOutcome {
  JobRecord record;
  // False when a job with the same (tenant, request_id) already existed;
  // `record` is then that job, unchanged.
  bool created = false;
};

// Leasing: the oldest QUEUED job (by create_time, then name) whose device is
// one of `devices` and whose available_time <= now.
struct ClaimQuery {
  std::vector<std::string> devices;
  absl::Time now;
};

// A page of jobs in create_time order (ties broken by name).
struct ListJobsQuery {
  std::optional<std::string> tenant;                        // nullopt: every tenant
  std::vector<v1::JobState> states;                         // empty: any state
  std::vector<std::pair<std::string, std::string>> labels;  // all must match
  bool ascending = false;
  // Keyset cursor: only jobs strictly after this (create_time, name) in the
  // requested order.
  struct Cursor {
    absl::Time create_time;
    std::string name;
  };
  std::optional<Cursor> after;
  int limit = 50;
};

class JobStore {
 public:
  virtual ~JobStore() = default;

  // Inserts `record` (its job.name must be new) and its first events in one
  // transaction, unless the job's (tenant, request_id) already exists; then
  // it returns the existing job with created = false. An empty request_id
  // never matches. Uniqueness is enforced by an index, so concurrent
  // creates with one request_id store exactly one job.
  virtual quantd::StatusOr<CreateJobOutcome> CreateJob(const JobRecord& record,
                                                       std::vector<v1::JobEvent> events,
                                                       const CreateJobOptions& options) = 0;

  // NOT_FOUND (reason JOB_NOT_FOUND) when there is no such job.
  virtual quantd::StatusOr<JobRecord> GetJob(absl::string_view name) = 0;

  // Reads the job with its row locked, runs `mutate`, writes the record and
  // the update's events atomically, and returns the record as written.
  virtual quantd::StatusOr<JobRecord> UpdateJob(absl::string_view name, const Mutation& mutate) = 0;

  // Atomically picks the job ClaimQuery describes (skipping rows other
  // transactions hold) and applies `mutate` to it. nullopt when none.
  virtual quantd::StatusOr<std::optional<JobRecord>> ClaimQueuedJob(const ClaimQuery& query,
                                                                    const Mutation& mutate) = 0;

  // Names of RUNNING or CANCELLING jobs whose lease_expire_time <= now,
  // oldest expiry first. The caller re-checks each under UpdateJob.
  virtual quantd::StatusOr<std::vector<std::string>> ListExpiredLeases(absl::Time now,
                                                                       int limit) = 0;

  virtual quantd::StatusOr<std::vector<JobRecord>> ListJobs(const ListJobsQuery& query) = 0;

  // Events of `name` with sequence > after_sequence, ascending, at most
  // `limit`. An unknown job has no events (empty, not an error).
  virtual quantd::StatusOr<std::vector<v1::JobEvent>> ListEvents(absl::string_view name,
                                                                 int64_t after_sequence,
                                                                 int limit) = 0;

  // Jobs in `state`, of one tenant or (nullopt) of all.
  virtual quantd::StatusOr<int64_t> CountJobs(const std::optional<std::string>& tenant,
                                              v1::JobState state) = 0;

  // The schema version this store migrated its database to.
  virtual int SchemaVersion() const = 0;

  // "sqlite" or "postgresql".
  virtual absl::string_view Backend() const = 0;
};

// The reason of the NOT_FOUND a store returns for an unknown job.
inline constexpr char kJobNotFoundReason[] = "JOB_NOT_FOUND";

}  // namespace quantd::server

#endif  // QUANTD_SERVER_STORE_JOB_STORE_H_
