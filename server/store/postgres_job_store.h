// JobStore on PostgreSQL (`--store postgresql://user@host:port/db`), for
// several quantd frontends sharing one queue. Leasing takes the oldest
// eligible row with SELECT ... FOR UPDATE SKIP LOCKED, so frontends never
// wait on each other's claims; idempotency is the unique (tenant,
// request_id) index, used by INSERT ... ON CONFLICT in the creating
// transaction. Schema migrations are versioned and applied under an
// advisory lock, so frontends starting together migrate once.
#ifndef QUANTD_SERVER_STORE_POSTGRES_JOB_STORE_H_
#define QUANTD_SERVER_STORE_POSTGRES_JOB_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/store/job_store.h"
#include "worker/common/status.h"

typedef struct pg_conn PGconn;

namespace quantd::server {

struct PostgresJobStoreOptions {
  // A libpq connection URI, e.g. postgresql://quantd@db:5432/quantd.
  std::string uri;
  // Connections kept open at most; callers wait for one beyond that.
  int max_connections = 16;
  // How long a caller waits for a free connection before UNAVAILABLE.
  absl::Duration acquire_timeout = absl::Seconds(10);
  // Connect timeout, and how long one statement may run.
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration statement_timeout = absl::Seconds(30);
};

class PostgresJobStore : public JobStore {
 public:
  // Connects, migrates the schema, and returns the store. UNAVAILABLE
  // (STORE_UNAVAILABLE) when the database cannot be reached.
  static quantd::StatusOr<std::unique_ptr<PostgresJobStore>> Open(
      const PostgresJobStoreOptions& options);

  ~PostgresJobStore() override;

  quantd::StatusOr<CreateJobOutcome> CreateJob(const JobRecord& record,
                                               std::vector<v1::JobEvent> events,
                                               const CreateJobOptions& options) override;
  quantd::StatusOr<JobRecord> GetJob(absl::string_view name) override;
  quantd::StatusOr<JobRecord> UpdateJob(absl::string_view name, const Mutation& mutate) override;
  quantd::StatusOr<std::optional<JobRecord>> ClaimQueuedJob(const ClaimQuery& query,
                                                            const Mutation& mutate) override;
  quantd::StatusOr<std::vector<std::string>> ListExpiredLeases(absl::Time now, int limit) override;
  quantd::StatusOr<std::vector<JobRecord>> ListJobs(const ListJobsQuery& query) override;
  quantd::StatusOr<std::vector<v1::JobEvent>> ListEvents(absl::string_view name,
                                                         int64_t after_sequence,
                                                         int limit) override;
  quantd::StatusOr<int64_t> CountJobs(const std::optional<std::string>& tenant,
                                      v1::JobState state) override;
  int SchemaVersion() const override { return schema_version_; }
  absl::string_view Backend() const override { return "postgresql"; }

  // A borrowed connection, returned to the pool (or closed when broken) on
  // destruction. Public only for the implementation's helpers.
  class Connection;

 private:
  explicit PostgresJobStore(PostgresJobStoreOptions options) : options_(std::move(options)) {}

  quantd::StatusOr<PGconn*> Connect();
  quantd::StatusOr<std::unique_ptr<Connection>> Acquire();
  void Release(PGconn* conn, bool broken);
  quantd::Status Migrate();

  const PostgresJobStoreOptions options_;
  int schema_version_ = 0;

  absl::Mutex mu_;
  std::vector<PGconn*> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_STORE_POSTGRES_JOB_STORE_H_
