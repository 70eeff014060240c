// JobStore on an embedded SQLite database (the default backend):
// `--store sqlite:///path/to/quantd.db`. WAL journal, a busy timeout, one
// writer connection behind a mutex (SQLite has a single writer anyway) and
// a pool of reader connections so reads never wait for writes.
#ifndef QUANTD_SERVER_STORE_SQLITE_JOB_STORE_H_
#define QUANTD_SERVER_STORE_SQLITE_JOB_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/store/job_store.h"
#include "worker/common/status.h"

struct sqlite3;

namespace quantd::server {

struct SqliteJobStoreOptions {
  // Database file; created (with its schema) when missing.
  std::string path;
  absl::Duration busy_timeout = absl::Seconds(10);
  // Reader connections kept open between reads.
  int max_idle_readers = 16;
};

class SqliteJobStore : public JobStore {
 public:
  // Opens (or creates) the database and applies pending schema migrations.
  // FAILED_PRECONDITION when the file's schema is newer than this binary.
  static quantd::StatusOr<std::unique_ptr<SqliteJobStore>> Open(
      const SqliteJobStoreOptions& options);

  // Parses "sqlite:///abs/path" or "sqlite://rel/path" into the file path.
  static quantd::StatusOr<std::string> PathFromUri(absl::string_view uri);

  ~SqliteJobStore() override;

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
  absl::string_view Backend() const override { return "sqlite"; }

 private:
  explicit SqliteJobStore(SqliteJobStoreOptions options) : options_(std::move(options)) {}

  quantd::StatusOr<sqlite3*> OpenConnection();
  // Borrows a reader connection; ReturnReader gives it back.
  quantd::StatusOr<sqlite3*> TakeReader();
  void ReturnReader(sqlite3* db);
  quantd::Status Migrate();

  // Shared by UpdateJob and ClaimQueuedJob: runs `mutate` on `record` (read
  // inside the open transaction) and writes the result.
  quantd::Status ApplyMutation(JobRecord& record, const Mutation& mutate)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  const SqliteJobStoreOptions options_;
  int schema_version_ = 0;

  absl::Mutex write_mu_;
  sqlite3* writer_ ABSL_GUARDED_BY(write_mu_) = nullptr;

  absl::Mutex readers_mu_;
  std::vector<sqlite3*> idle_readers_ ABSL_GUARDED_BY(readers_mu_);
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_STORE_SQLITE_JOB_STORE_H_
