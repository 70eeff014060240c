#include "server/store/sqlite_job_store.h"

#include <sqlite3.h>

#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/errors.h"
#include "server/store/create_job_rules.h"
#include "server/store/record_columns.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

struct Migration {
  int version;
  const char* description;
  const char* sql;
};

// Append-only: a released migration is never edited, later changes get a
// new version.
const Migration kMigrations[] = {
    {1, "jobs, labels and events",
     R"sql(
CREATE TABLE jobs (
  name TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  request_id TEXT,
  request_spec BLOB NOT NULL,
  state INTEGER NOT NULL,
  device TEXT NOT NULL,
  create_time INTEGER NOT NULL,
  available_time INTEGER NOT NULL,
  lease_token INTEGER NOT NULL,
  lease_expire_time INTEGER,
  last_sequence INTEGER NOT NULL,
  job BLOB NOT NULL
);
CREATE UNIQUE INDEX jobs_by_request_id ON jobs (tenant, request_id);
CREATE INDEX jobs_queue ON jobs (state, create_time, name);
CREATE INDEX jobs_by_tenant ON jobs (tenant, create_time, name);
CREATE INDEX jobs_by_create_time ON jobs (create_time, name);
CREATE INDEX jobs_leases ON jobs (state, lease_expire_time);
CREATE TABLE job_labels (
  name TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (name, key)
) WITHOUT ROWID;
CREATE INDEX job_labels_by_pair ON job_labels (key, value, name);
CREATE TABLE job_events (
  name TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  payload BLOB NOT NULL,
  PRIMARY KEY (name, sequence)
) WITHOUT ROWID;
)sql"},
    {2, "lease secrets, lease holders and outcome digests",
     R"sql(
ALTER TABLE jobs ADD COLUMN lease_secret_hash BLOB NOT NULL DEFAULT x'';
ALTER TABLE jobs ADD COLUMN lease_holder TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN outcome_hash BLOB NOT NULL DEFAULT x'';
)sql"},
};

constexpr char kRecordColumns[] =
    "name, tenant, request_id, request_spec, state, device, create_time, available_time, "
    "lease_token, lease_expire_time, last_sequence, job, lease_secret_hash, lease_holder, "
    "outcome_hash";

quantd::Status SqliteError(sqlite3* db, int rc, absl::string_view what) {
  const char* detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  int primary = rc & 0xff;
  quantd::StatusCode code = quantd::StatusCode::kInternal;
  std::string reason = "STORE_ERROR";
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
    code = quantd::StatusCode::kUnavailable;
    reason = "STORE_BUSY";
  } else if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) {
    code = quantd::StatusCode::kDataLoss;
    reason = "STORE_CORRUPT";
  }
  return MakeError(code, reason, absl::StrCat("sqlite: ", what, ": ", detail));
}

// A prepared statement with 1-based binds and 0-based column reads.
class Statement {
 public:
  static quantd::StatusOr<Statement> Prepare(sqlite3* db, absl::string_view sql) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
    if (rc != SQLITE_OK) return SqliteError(db, rc, "prepare");
    return Statement(db, stmt);
  }
  Statement(Statement&& o) noexcept : db_(o.db_), stmt_(std::exchange(o.stmt_, nullptr)) {}
  Statement(const Statement&) = delete;
  ~Statement() {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
  }

  Statement& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& Bind(int i, absl::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& BindBlob(int i, absl::string_view v) {
    sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& Bind(int i, const std::optional<std::string>& v) {
    if (v.has_value()) return Bind(i, absl::string_view(*v));
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  Statement& Bind(int i, std::optional<int64_t> v) {
    if (v.has_value()) return Bind(i, *v);
    sqlite3_bind_null(stmt_, i);
    return *this;
  }

  // Makes the statement runnable again with new bindings.
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  // True when a row is available, false when done.
  quantd::StatusOr<bool> Step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteError(db_, rc, "step");
  }
  quantd::Status Run() {
    quantd::StatusOr<bool> row = Step();
    return row.status();
  }

  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  bool IsNull(int col) { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  absl::string_view Bytes(int col) {
    const void* p = sqlite3_column_blob(stmt_, col);
    int n = sqlite3_column_bytes(stmt_, col);
    if (p == nullptr) return absl::string_view();
    return absl::string_view(static_cast<const char*>(p), n);
  }

 private:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

quantd::Status Exec(sqlite3* db, absl::string_view sql) {
  std::string copy(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db, copy.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return SqliteError(nullptr, rc, absl::StrCat(sql.substr(0, 40), ": ", msg));
  }
  return quantd::OkStatus();
}

// Reads a row selected with kRecordColumns.
quantd::StatusOr<JobRecord> ReadRecord(Statement& stmt) {
  JobRecord record;
  std::string name(stmt.Bytes(0));
  record.request_spec = std::string(stmt.Bytes(3));
  record.available_time = absl::FromUnixMicros(stmt.Int(7));
  record.lease_token = stmt.Int(8);
  record.lease_expire_time =
      TimeFromOptionalMicros(stmt.IsNull(9) ? std::nullopt : std::optional<int64_t>(stmt.Int(9)));
  record.last_sequence = stmt.Int(10);
  record.lease_secret_hash = std::string(stmt.Bytes(12));
  record.lease_holder = std::string(stmt.Bytes(13));
  record.outcome_hash = std::string(stmt.Bytes(14));
  QD_RETURN_IF_ERROR(ParseJobBlob(name, stmt.Bytes(11), &record.job));
  return record;
}

// Rolls back an open transaction unless Commit() ran.
class Transaction {
 public:
  static quantd::StatusOr<Transaction> Begin(sqlite3* db) {
    // IMMEDIATE takes the write lock up front, so a read-modify-write never
    // fails halfway with SQLITE_BUSY on upgrade.
    QD_RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE"));
    return Transaction(db);
  }
  Transaction(Transaction&& o) noexcept : db_(std::exchange(o.db_, nullptr)) {}
  ~Transaction() {
    if (db_ != nullptr) Exec(db_, "ROLLBACK").IgnoreError();
  }
  quantd::Status Commit() {
    quantd::Status s = Exec(db_, "COMMIT");
    if (s.ok()) db_ = nullptr;
    return s;
  }

 private:
  explicit Transaction(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

quantd::Status InsertEvents(sqlite3* db, const std::vector<v1::JobEvent>& events) {
  if (events.empty()) return quantd::OkStatus();
  QD_ASSIGN_OR_RETURN(
      auto insert,
      Statement::Prepare(db, "INSERT INTO job_events (name, sequence, payload) VALUES (?, ?, ?)"));
  for (const v1::JobEvent& event : events) {
    insert.Reset();
    insert.Bind(1, absl::string_view(event.job()))
        .Bind(2, static_cast<int64_t>(event.sequence()))
        .BindBlob(3, SerializeDeterministic(event));
    QD_RETURN_IF_ERROR(insert.Run());
  }
  return quantd::OkStatus();
}

quantd::StatusOr<std::optional<JobRecord>> SelectOne(Statement& stmt) {
  QD_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return std::optional<JobRecord>();
  QD_ASSIGN_OR_RETURN(JobRecord record, ReadRecord(stmt));
  return std::optional<JobRecord>(std::move(record));
}

}  // namespace

quantd::StatusOr<std::string> SqliteJobStore::PathFromUri(absl::string_view uri) {
  constexpr absl::string_view kPrefix = "sqlite://";
  if (!absl::StartsWith(uri, kPrefix) || uri.size() == kPrefix.size()) {
    return MakeError(
        quantd::StatusCode::kInvalidArgument, "INVALID_STORE_URI",
        absl::StrCat("a SQLite store URI looks like sqlite:///path/to/quantd.db, got \"", uri,
                     "\""));
  }
  return std::string(uri.substr(kPrefix.size()));
}

quantd::StatusOr<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(
    const SqliteJobStoreOptions& options) {
  std::unique_ptr<SqliteJobStore> store(new SqliteJobStore(options));
  QD_ASSIGN_OR_RETURN(sqlite3 * writer, store->OpenConnection());
  {
    absl::MutexLock lock(&store->write_mu_);
    store->writer_ = writer;
  }
  QD_RETURN_IF_ERROR(store->Migrate());
  return store;
}

SqliteJobStore::~SqliteJobStore() {
  absl::MutexLock lock(&write_mu_);
  if (writer_ != nullptr) sqlite3_close_v2(writer_);
  absl::MutexLock readers_lock(&readers_mu_);
  for (sqlite3* db : idle_readers_) sqlite3_close_v2(db);
}

quantd::StatusOr<sqlite3*> SqliteJobStore::OpenConnection() {
  sqlite3* db = nullptr;
  // NOMUTEX: every connection is used by one thread at a time (the writer
  // under write_mu_, readers borrowed from the pool).
  int rc =
      sqlite3_open_v2(options_.path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    quantd::Status s = SqliteError(db, rc, absl::StrCat("open ", options_.path));
    sqlite3_close_v2(db);
    return s;
  }
  sqlite3_busy_timeout(db, static_cast<int>(absl::ToInt64Milliseconds(options_.busy_timeout)));
  // WAL lets readers run beside the writer; synchronous=FULL makes every
  // acknowledged job survive a power loss, not only a process crash.
  for (const char* pragma :
       {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
    quantd::Status s = Exec(db, pragma);
    if (!s.ok()) {
      sqlite3_close_v2(db);
      return s;
    }
  }
  return db;
}

quantd::StatusOr<sqlite3*> SqliteJobStore::TakeReader() {
  {
    absl::MutexLock lock(&readers_mu_);
    if (!idle_readers_.empty()) {
      sqlite3* db = idle_readers_.back();
      idle_readers_.pop_back();
      return db;
    }
  }
  return OpenConnection();
}

void SqliteJobStore::ReturnReader(sqlite3* db) {
  absl::MutexLock lock(&readers_mu_);
  if (static_cast<int>(idle_readers_.size()) < options_.max_idle_readers) {
    idle_readers_.push_back(db);
  } else {
    sqlite3_close_v2(db);
  }
}

quantd::Status SqliteJobStore::Migrate() {
  absl::MutexLock lock(&write_mu_);
  quantd::Status s =
      Exec(writer_,
           "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
           "description TEXT NOT NULL, applied_at INTEGER NOT NULL)");
  if (!s.ok()) return s;
  QD_ASSIGN_OR_RETURN(auto tx, Transaction::Begin(writer_));
  QD_ASSIGN_OR_RETURN(
      auto current,
      Statement::Prepare(writer_, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations"));
  QD_RETURN_IF_ERROR(current.Step());
  int version = static_cast<int>(current.Int(0));
  const int latest = kMigrations[sizeof(kMigrations) / sizeof(kMigrations[0]) - 1].version;
  if (version > latest) {
    return MakeError(quantd::StatusCode::kFailedPrecondition, "STORE_SCHEMA_TOO_NEW",
                     absl::StrCat("database ", options_.path, " has schema version ", version,
                                  ", newer than this quantd's ", latest));
  }
  for (const Migration& m : kMigrations) {
    if (m.version <= version) continue;
    QD_RETURN_IF_ERROR(Exec(writer_, m.sql));
    QD_ASSIGN_OR_RETURN(
        auto record,
        Statement::Prepare(
            writer_,
            "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)"));
    record.Bind(1, static_cast<int64_t>(m.version))
        .Bind(2, absl::string_view(m.description))
        .Bind(3, absl::ToUnixMicros(absl::Now()));
    QD_RETURN_IF_ERROR(record.Run());
    version = m.version;
  }
  QD_RETURN_IF_ERROR(tx.Commit());
  schema_version_ = version;
  return quantd::OkStatus();
}

quantd::StatusOr<CreateJobOutcome> SqliteJobStore::CreateJob(const JobRecord& record_in,
                                                             std::vector<v1::JobEvent> events,
                                                             const CreateJobOptions& options) {
  QD_RETURN_IF_ERROR(CheckWritableRecord(record_in));
  JobRecord record = record_in;
  record.last_sequence = 0;
  AssignEventSequences(record, events);
  const v1::Job& job = record.job;

  absl::MutexLock lock(&write_mu_);
  QD_ASSIGN_OR_RETURN(auto tx, Transaction::Begin(writer_));

  // write_mu_ makes this the only writer: the count stays true until commit.
  CreateJobReads reads;
  reads.find_by_request_id = [&]() -> quantd::StatusOr<std::optional<JobRecord>> {
    QD_ASSIGN_OR_RETURN(
        auto existing,
        Statement::Prepare(writer_,
                           absl::StrCat("SELECT ", kRecordColumns,
                                        " FROM jobs WHERE tenant = ? AND request_id = ?")));
    existing.Bind(1, absl::string_view(job.tenant())).Bind(2, absl::string_view(job.request_id()));
    return SelectOne(existing);
  };
  reads.count_queued = [&]() -> quantd::StatusOr<int64_t> {
    QD_ASSIGN_OR_RETURN(
        auto count,
        Statement::Prepare(writer_, "SELECT COUNT(*) FROM jobs WHERE tenant = ? AND state = ?"));
    count.Bind(1, absl::string_view(job.tenant())).Bind(2, static_cast<int64_t>(v1::QUEUED));
    QD_RETURN_IF_ERROR(count.Step());
    return count.Int(0);
  };
  QD_ASSIGN_OR_RETURN(std::optional<CreateJobOutcome> decided, CheckCreateJob(job, options, reads));
  if (decided.has_value()) return std::move(*decided);

  QD_ASSIGN_OR_RETURN(
      auto insert,
      Statement::Prepare(writer_, absl::StrCat("INSERT INTO jobs (", kRecordColumns,
                                               ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                                               "?, ?, ?)")));
  insert.Bind(1, absl::string_view(job.name()))
      .Bind(2, absl::string_view(job.tenant()))
      .Bind(3, RequestIdColumn(job))
      .BindBlob(4, record.request_spec)
      .Bind(5, static_cast<int64_t>(job.state()))
      .Bind(6, absl::string_view(job.spec().device()))
      .Bind(7, CreateTimeColumn(job))
      .Bind(8, absl::ToUnixMicros(record.available_time == absl::InfinitePast()
                                      ? absl::UnixEpoch()
                                      : record.available_time))
      .Bind(9, record.lease_token)
      .Bind(10, OptionalMicros(record.lease_expire_time))
      .Bind(11, record.last_sequence)
      .BindBlob(12, SerializeDeterministic(job))
      .BindBlob(13, record.lease_secret_hash)
      .Bind(14, absl::string_view(record.lease_holder))
      .BindBlob(15, record.outcome_hash);
  QD_RETURN_IF_ERROR(insert.Run());

  for (const auto& [key, value] : job.spec().labels()) {
    QD_ASSIGN_OR_RETURN(
        auto label,
        Statement::Prepare(writer_, "INSERT INTO job_labels (name, key, value) VALUES (?, ?, ?)"));
    label.Bind(1, absl::string_view(job.name()))
        .Bind(2, absl::string_view(key))
        .Bind(3, absl::string_view(value));
    QD_RETURN_IF_ERROR(label.Run());
  }
  QD_RETURN_IF_ERROR(InsertEvents(writer_, events));
  QD_RETURN_IF_ERROR(tx.Commit());
  return CreateJobOutcome{std::move(record), true};
}

quantd::StatusOr<JobRecord> SqliteJobStore::GetJob(absl::string_view name) {
  QD_ASSIGN_OR_RETURN(sqlite3 * db, TakeReader());
  absl::Cleanup give_back = [&] { ReturnReader(db); };
  QD_ASSIGN_OR_RETURN(auto stmt, Statement::Prepare(db, absl::StrCat("SELECT ", kRecordColumns,
                                                                     " FROM jobs WHERE name = ?")));
  stmt.Bind(1, name);
  QD_ASSIGN_OR_RETURN(auto found, SelectOne(stmt));
  if (!found.has_value()) return JobNotFoundError(name);
  return std::move(*found);
}

quantd::Status SqliteJobStore::ApplyMutation(JobRecord& record, const Mutation& mutate) {
  JobUpdate update;
  QD_RETURN_IF_ERROR(mutate(record, update));
  if (!update.write) return quantd::OkStatus();
  QD_RETURN_IF_ERROR(CheckWritableRecord(record));
  AssignEventSequences(record, update.events);
  QD_ASSIGN_OR_RETURN(
      auto stmt,
      Statement::Prepare(
          writer_,
          "UPDATE jobs SET state = ?, available_time = ?, lease_token = ?, lease_expire_time = ?, "
          "last_sequence = ?, job = ?, lease_secret_hash = ?, lease_holder = ?, outcome_hash = ? "
          "WHERE name = ?"));
  stmt.Bind(1, static_cast<int64_t>(record.job.state()))
      .Bind(2, absl::ToUnixMicros(record.available_time == absl::InfinitePast()
                                      ? absl::UnixEpoch()
                                      : record.available_time))
      .Bind(3, record.lease_token)
      .Bind(4, OptionalMicros(record.lease_expire_time))
      .Bind(5, record.last_sequence)
      .BindBlob(6, SerializeDeterministic(record.job))
      .BindBlob(7, record.lease_secret_hash)
      .Bind(8, absl::string_view(record.lease_holder))
      .BindBlob(9, record.outcome_hash)
      .Bind(10, absl::string_view(record.job.name()));
  QD_RETURN_IF_ERROR(stmt.Run());
  return InsertEvents(writer_, update.events);
}

quantd::StatusOr<JobRecord> SqliteJobStore::UpdateJob(absl::string_view name,
                                                      const Mutation& mutate) {
  absl::MutexLock lock(&write_mu_);
  QD_ASSIGN_OR_RETURN(auto tx, Transaction::Begin(writer_));
  QD_ASSIGN_OR_RETURN(auto stmt,
                      Statement::Prepare(writer_, absl::StrCat("SELECT ", kRecordColumns,
                                                               " FROM jobs WHERE name = ?")));
  stmt.Bind(1, name);
  QD_ASSIGN_OR_RETURN(auto found, SelectOne(stmt));
  if (!found.has_value()) return JobNotFoundError(name);
  JobRecord record = std::move(*found);
  const std::string original_name = record.job.name();
  QD_RETURN_IF_ERROR(ApplyMutation(record, mutate));
  if (record.job.name() != original_name) {
    return quantd::InternalError("a mutation must not rename a job");
  }
  QD_RETURN_IF_ERROR(tx.Commit());
  return record;
}

quantd::StatusOr<std::optional<JobRecord>> SqliteJobStore::ClaimQueuedJob(const ClaimQuery& query,
                                                                          const Mutation& mutate) {
  if (query.devices.empty()) return std::optional<JobRecord>();
  absl::MutexLock lock(&write_mu_);
  QD_ASSIGN_OR_RETURN(auto tx, Transaction::Begin(writer_));
  std::vector<std::string> marks(query.devices.size(), "?");
  QD_ASSIGN_OR_RETURN(
      auto stmt,
      Statement::Prepare(
          writer_,
          absl::StrCat("SELECT ", kRecordColumns,
                       " FROM jobs WHERE state = ? AND available_time <= ? AND device IN (",
                       absl::StrJoin(marks, ", "), ") ORDER BY create_time, name LIMIT 1")));
  stmt.Bind(1, static_cast<int64_t>(v1::QUEUED)).Bind(2, absl::ToUnixMicros(query.now));
  for (size_t i = 0; i < query.devices.size(); ++i) {
    stmt.Bind(static_cast<int>(i) + 3, absl::string_view(query.devices[i]));
  }
  QD_ASSIGN_OR_RETURN(auto found, SelectOne(stmt));
  if (!found.has_value()) return std::optional<JobRecord>();
  JobRecord record = std::move(*found);
  QD_RETURN_IF_ERROR(ApplyMutation(record, mutate));
  QD_RETURN_IF_ERROR(tx.Commit());
  return std::optional<JobRecord>(std::move(record));
}

quantd::StatusOr<std::vector<std::string>> SqliteJobStore::ListExpiredLeases(absl::Time now,
                                                                             int limit) {
  QD_ASSIGN_OR_RETURN(sqlite3 * db, TakeReader());
  absl::Cleanup give_back = [&] { ReturnReader(db); };
  QD_ASSIGN_OR_RETURN(
      auto stmt,
      Statement::Prepare(db,
                         "SELECT name FROM jobs WHERE state IN (?, ?) AND lease_expire_time <= ? "
                         "ORDER BY lease_expire_time, name LIMIT ?"));
  stmt.Bind(1, static_cast<int64_t>(v1::RUNNING))
      .Bind(2, static_cast<int64_t>(v1::CANCELLING))
      .Bind(3, absl::ToUnixMicros(now))
      .Bind(4, static_cast<int64_t>(limit));
  std::vector<std::string> names;
  while (true) {
    QD_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    names.emplace_back(stmt.Bytes(0));
  }
  return names;
}

quantd::StatusOr<std::vector<JobRecord>> SqliteJobStore::ListJobs(const ListJobsQuery& query) {
  std::string sql = absl::StrCat("SELECT ", kRecordColumns, " FROM jobs WHERE 1 = 1");
  if (query.tenant.has_value()) absl::StrAppend(&sql, " AND tenant = ?");
  if (!query.states.empty()) {
    std::vector<std::string> marks(query.states.size(), "?");
    absl::StrAppend(&sql, " AND state IN (", absl::StrJoin(marks, ", "), ")");
  }
  for (size_t i = 0; i < query.labels.size(); ++i) {
    absl::StrAppend(&sql,
                    " AND EXISTS (SELECT 1 FROM job_labels l WHERE l.name = jobs.name AND "
                    "l.key = ? AND l.value = ?)");
  }
  const char* cmp = query.ascending ? ">" : "<";
  const char* dir = query.ascending ? "ASC" : "DESC";
  if (query.after.has_value()) {
    absl::StrAppend(&sql, " AND (create_time ", cmp, " ? OR (create_time = ? AND name ", cmp,
                    " ?))");
  }
  absl::StrAppend(&sql, " ORDER BY create_time ", dir, ", name ", dir, " LIMIT ?");

  QD_ASSIGN_OR_RETURN(sqlite3 * db, TakeReader());
  absl::Cleanup give_back = [&] { ReturnReader(db); };
  QD_ASSIGN_OR_RETURN(auto stmt, Statement::Prepare(db, sql));
  int i = 1;
  if (query.tenant.has_value()) stmt.Bind(i++, absl::string_view(*query.tenant));
  for (v1::JobState state : query.states) stmt.Bind(i++, static_cast<int64_t>(state));
  for (const auto& [key, value] : query.labels) {
    stmt.Bind(i++, absl::string_view(key));
    stmt.Bind(i++, absl::string_view(value));
  }
  if (query.after.has_value()) {
    int64_t t = absl::ToUnixMicros(query.after->create_time);
    stmt.Bind(i++, t);
    stmt.Bind(i++, t);
    stmt.Bind(i++, absl::string_view(query.after->name));
  }
  stmt.Bind(i++, static_cast<int64_t>(query.limit));
  std::vector<JobRecord> out;
  while (true) {
    QD_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    QD_ASSIGN_OR_RETURN(JobRecord record, ReadRecord(stmt));
    out.push_back(std::move(record));
  }
  return out;
}

quantd::StatusOr<std::vector<v1::JobEvent>> SqliteJobStore::ListEvents(absl::string_view name,
                                                                       int64_t after_sequence,
                                                                       int limit) {
  QD_ASSIGN_OR_RETURN(sqlite3 * db, TakeReader());
  absl::Cleanup give_back = [&] { ReturnReader(db); };
  QD_ASSIGN_OR_RETURN(auto stmt, Statement::Prepare(db,
                                                    "SELECT payload FROM job_events WHERE name = ? "
                                                    "AND sequence > ? ORDER BY sequence LIMIT ?"));
  stmt.Bind(1, name).Bind(2, after_sequence).Bind(3, static_cast<int64_t>(limit));
  std::vector<v1::JobEvent> events;
  while (true) {
    QD_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    v1::JobEvent event;
    QD_RETURN_IF_ERROR(ParseEventBlob(name, stmt.Bytes(0), &event));
    events.push_back(std::move(event));
  }
  return events;
}

quantd::StatusOr<int64_t> SqliteJobStore::CountJobs(const std::optional<std::string>& tenant,
                                                    v1::JobState state) {
  QD_ASSIGN_OR_RETURN(sqlite3 * db, TakeReader());
  absl::Cleanup give_back = [&] { ReturnReader(db); };
  QD_ASSIGN_OR_RETURN(
      auto stmt,
      Statement::Prepare(db, tenant.has_value()
                                 ? "SELECT COUNT(*) FROM jobs WHERE state = ? AND tenant = ?"
                                 : "SELECT COUNT(*) FROM jobs WHERE state = ?"));
  stmt.Bind(1, static_cast<int64_t>(state));
  if (tenant.has_value()) stmt.Bind(2, absl::string_view(*tenant));
  QD_RETURN_IF_ERROR(stmt.Step());
  return stmt.Int(0);
}

}  // namespace quantd::server
