#include "server/store/postgres_job_store.h"

#include <postgresql/libpq-fe.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/errors.h"
#include "server/store/create_job_rules.h"
#include "server/store/postgres_wire.h"
#include "server/store/record_columns.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

using postgres::Params;
using postgres::Result;
using postgres::TextArray;

struct Migration {
  int version;
  const char* description;
  const char* sql;
};

// Append-only, like the SQLite list; the two describe the same schema.
const Migration kMigrations[] = {
    {1, "jobs, labels and events",
     R"sql(
CREATE TABLE jobs (
  name TEXT COLLATE "C" PRIMARY KEY,
  tenant TEXT NOT NULL,
  request_id TEXT,
  request_spec BYTEA NOT NULL,
  state BIGINT NOT NULL,
  device TEXT NOT NULL,
  create_time BIGINT NOT NULL,
  available_time BIGINT NOT NULL,
  lease_token BIGINT NOT NULL,
  lease_expire_time BIGINT,
  last_sequence BIGINT NOT NULL,
  job BYTEA NOT NULL
);
CREATE UNIQUE INDEX jobs_by_request_id ON jobs (tenant, request_id);
CREATE INDEX jobs_queue ON jobs (state, create_time, name);
CREATE INDEX jobs_by_tenant ON jobs (tenant, create_time, name);
CREATE INDEX jobs_by_create_time ON jobs (create_time, name);
CREATE INDEX jobs_leases ON jobs (state, lease_expire_time);
CREATE TABLE job_labels (
  name TEXT COLLATE "C" NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (name, key)
);
CREATE INDEX job_labels_by_pair ON job_labels (key, value, name);
CREATE TABLE job_events (
  name TEXT COLLATE "C" NOT NULL,
  sequence BIGINT NOT NULL,
  payload BYTEA NOT NULL,
  PRIMARY KEY (name, sequence)
);
)sql"},
    {2, "lease secrets, lease holders and outcome digests",
     R"sql(
ALTER TABLE jobs ADD COLUMN lease_secret_hash BYTEA NOT NULL DEFAULT ''::bytea;
ALTER TABLE jobs ADD COLUMN lease_holder TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN outcome_hash BYTEA NOT NULL DEFAULT ''::bytea;
)sql"},
};

// Serializes schema migrations across frontends (an arbitrary constant).
constexpr int64_t kMigrationLockKey = 0x71756e7464;  // "quntd"
constexpr int kMaxTransactionAttempts = 4;

constexpr char kRecordColumns[] =
    "name, tenant, request_id, request_spec, state, device, create_time, available_time, "
    "lease_token, lease_expire_time, last_sequence, job, lease_secret_hash, lease_holder, "
    "outcome_hash";

quantd::Status Unavailable(absl::string_view what) {
  return MakeError(quantd::StatusCode::kUnavailable, "STORE_UNAVAILABLE",
                   absl::StrCat("postgresql: ", what));
}

quantd::StatusOr<JobRecord> ReadRecord(const Result& r, int row) {
  JobRecord record;
  std::string name(r.Bytes(row, 0));
  record.request_spec = std::string(r.Bytes(row, 3));
  record.available_time = absl::FromUnixMicros(r.Int(row, 7));
  record.lease_token = r.Int(row, 8);
  record.lease_expire_time = TimeFromOptionalMicros(
      r.IsNull(row, 9) ? std::nullopt : std::optional<int64_t>(r.Int(row, 9)));
  record.last_sequence = r.Int(row, 10);
  record.lease_secret_hash = std::string(r.Bytes(row, 12));
  record.lease_holder = std::string(r.Bytes(row, 13));
  record.outcome_hash = std::string(r.Bytes(row, 14));
  QD_RETURN_IF_ERROR(ParseJobBlob(name, r.Bytes(row, 11), &record.job));
  return record;
}

int64_t AvailableMicros(const JobRecord& record) {
  return absl::ToUnixMicros(record.available_time == absl::InfinitePast() ? absl::UnixEpoch()
                                                                          : record.available_time);
}

}  // namespace

class PostgresJobStore::Connection {
 public:
  Connection(PostgresJobStore* store, PGconn* conn) : store_(store), conn_(conn) {}
  ~Connection() { store_->Release(conn_, broken_); }

  quantd::StatusOr<Result> Exec(absl::string_view sql, const Params& params = Params()) {
    std::string text(sql);
    std::vector<const char*> values = params.values();
    std::vector<int> lengths = params.lengths();
    PGresult* raw = PQexecParams(conn_, text.c_str(), params.size(), nullptr, values.data(),
                                 lengths.data(), params.formats().data(), /*resultFormat=*/1);
    Result result(raw);
    ExecStatusType status = raw != nullptr ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
    return Error(raw, text);
  }

  // Several statements in one string (migrations), through the simple
  // query protocol, which the parameterized one does not allow.
  quantd::Status ExecScript(absl::string_view sql) {
    std::string text(sql);
    Result result(PQexec(conn_, text.c_str()));
    PGresult* raw = result.raw();
    ExecStatusType status = raw != nullptr ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return quantd::OkStatus();
    return Error(raw, text);
  }

  bool broken() const { return broken_; }

 private:
  quantd::Status Error(PGresult* raw, const std::string& sql) {
    if (PQstatus(conn_) != CONNECTION_OK) {
      broken_ = true;
      return Unavailable(absl::StrCat("connection lost: ", PQerrorMessage(conn_)));
    }
    const char* state = raw != nullptr ? PQresultErrorField(raw, PG_DIAG_SQLSTATE) : nullptr;
    std::string sqlstate = state != nullptr ? state : "";
    std::string message = raw != nullptr ? PQresultErrorMessage(raw) : PQerrorMessage(conn_);
    while (!message.empty() && message.back() == '\n') message.pop_back();
    std::string context =
        absl::StrCat("postgresql: ", message, " (SQLSTATE ", sqlstate, ") in: ", sql.substr(0, 60));
    if (sqlstate == "40001" || sqlstate == "40P01") {
      return MakeError(quantd::StatusCode::kAborted, "STORE_CONFLICT", context);
    }
    if (sqlstate == "57014") {
      return MakeError(quantd::StatusCode::kDeadlineExceeded, "STORE_TIMEOUT", context);
    }
    if (absl::StartsWith(sqlstate, "08") || absl::StartsWith(sqlstate, "57P")) {
      broken_ = true;
      return MakeError(quantd::StatusCode::kUnavailable, "STORE_UNAVAILABLE", context);
    }
    return MakeError(quantd::StatusCode::kInternal, "STORE_ERROR", context);
  }

  PostgresJobStore* store_;
  PGconn* conn_;
  bool broken_ = false;
};

namespace {

using Connection = PostgresJobStore::Connection;

// BEGIN ... COMMIT, rolled back unless committed.
class Transaction {
 public:
  static quantd::StatusOr<Transaction> Begin(Connection& c) {
    QD_RETURN_IF_ERROR(c.Exec("BEGIN"));
    return Transaction(&c);
  }
  Transaction(Transaction&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  ~Transaction() {
    if (c_ != nullptr && !c_->broken()) c_->Exec("ROLLBACK").status().IgnoreError();
  }
  quantd::Status Commit() {
    quantd::StatusOr<Result> r = c_->Exec("COMMIT");
    c_ = nullptr;
    return r.status();
  }

 private:
  explicit Transaction(Connection* c) : c_(c) {}
  Connection* c_;
};

quantd::Status InsertEvents(Connection& c, const std::vector<v1::JobEvent>& events) {
  for (const v1::JobEvent& event : events) {
    Params p;
    p.Text(event.job()).Int(event.sequence()).Bytes(SerializeDeterministic(event));
    QD_RETURN_IF_ERROR(
        c.Exec("INSERT INTO job_events (name, sequence, payload) VALUES ($1, $2, $3)", p));
  }
  return quantd::OkStatus();
}

quantd::Status WriteMutation(Connection& c, JobRecord& record, const Mutation& mutate) {
  const std::string name = record.job.name();
  JobUpdate update;
  QD_RETURN_IF_ERROR(mutate(record, update));
  if (!update.write) return quantd::OkStatus();
  if (record.job.name() != name) return quantd::InternalError("a mutation must not rename a job");
  QD_RETURN_IF_ERROR(CheckWritableRecord(record));
  AssignEventSequences(record, update.events);
  Params p;
  p.Int(record.job.state())
      .Int(AvailableMicros(record))
      .Int(record.lease_token)
      .OptInt(OptionalMicros(record.lease_expire_time))
      .Int(record.last_sequence)
      .Bytes(SerializeDeterministic(record.job))
      .Bytes(record.lease_secret_hash)
      .Text(record.lease_holder)
      .Bytes(record.outcome_hash)
      .Text(name);
  QD_RETURN_IF_ERROR(
      c.Exec("UPDATE jobs SET state = $1, available_time = $2, lease_token = $3, "
             "lease_expire_time = $4, "
             "last_sequence = $5, job = $6, lease_secret_hash = $7, lease_holder = $8, "
             "outcome_hash = $9 WHERE name = $10",
             p));
  return InsertEvents(c, update.events);
}

}  // namespace

quantd::StatusOr<std::unique_ptr<PostgresJobStore>> PostgresJobStore::Open(
    const PostgresJobStoreOptions& options) {
  std::unique_ptr<PostgresJobStore> store(new PostgresJobStore(options));
  QD_RETURN_IF_ERROR(store->Migrate());
  return store;
}

PostgresJobStore::~PostgresJobStore() {
  absl::MutexLock lock(&mu_);
  for (PGconn* conn : idle_) PQfinish(conn);
}

quantd::StatusOr<PGconn*> PostgresJobStore::Connect() {
  // Options travel as keywords so the URI stays exactly what the operator
  // gave (libpq expands "dbname" as a URI).
  std::string connect_timeout =
      absl::StrCat(std::max<int64_t>(1, absl::ToInt64Seconds(options_.connect_timeout)));
  std::string pg_options =
      absl::StrCat("-c statement_timeout=", absl::ToInt64Milliseconds(options_.statement_timeout),
                   " -c client_min_messages=warning");
  const char* keywords[] = {"dbname", "connect_timeout", "options", "application_name", nullptr};
  const char* values[] = {options_.uri.c_str(), connect_timeout.c_str(), pg_options.c_str(),
                          "quantd", nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn == nullptr) return Unavailable("out of memory connecting");
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message = PQerrorMessage(conn);
    while (!message.empty() && message.back() == '\n') message.pop_back();
    PQfinish(conn);
    return Unavailable(absl::StrCat("cannot connect: ", message));
  }
  return conn;
}

quantd::StatusOr<std::unique_ptr<PostgresJobStore::Connection>> PostgresJobStore::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !idle_.empty() || open_ < options_.max_connections;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&available), options_.acquire_timeout)) {
      return MakeError(
          quantd::StatusCode::kUnavailable, "STORE_BUSY",
          absl::StrCat("all ", options_.max_connections, " PostgreSQL connections stayed busy for ",
                       absl::FormatDuration(options_.acquire_timeout)));
    }
    if (!idle_.empty()) {
      PGconn* conn = idle_.back();
      idle_.pop_back();
      return std::make_unique<Connection>(this, conn);
    }
    ++open_;  // reserve the slot while connecting outside the lock
  }
  quantd::StatusOr<PGconn*> conn = Connect();
  if (!conn.ok()) {
    absl::MutexLock lock(&mu_);
    --open_;
    return conn.status();
  }
  return std::make_unique<Connection>(this, *conn);
}

void PostgresJobStore::Release(PGconn* conn, bool broken) {
  // A connection that lost its server, or is stuck mid-transaction, is
  // closed; the next Acquire opens a fresh one.
  if (!broken && PQtransactionStatus(conn) != PQTRANS_IDLE) broken = true;
  absl::MutexLock lock(&mu_);
  if (broken) {
    PQfinish(conn);
    --open_;
  } else {
    idle_.push_back(conn);
  }
}

quantd::Status PostgresJobStore::Migrate() {
  QD_ASSIGN_OR_RETURN(auto c, Acquire());
  Connection& conn = *c;
  Params lock_key;
  lock_key.Int(kMigrationLockKey);
  QD_RETURN_IF_ERROR(conn.Exec("SELECT pg_advisory_lock($1::bigint)", lock_key));
  auto body = [&]() -> quantd::Status {
    QD_RETURN_IF_ERROR(
        conn.Exec("CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, "
                  "description TEXT NOT NULL, applied_at BIGINT NOT NULL)"));
    QD_ASSIGN_OR_RETURN(auto tx, Transaction::Begin(conn));
    QD_ASSIGN_OR_RETURN(
        auto current, conn.Exec("SELECT COALESCE(MAX(version), 0)::bigint FROM schema_migrations"));
    int version = static_cast<int>(current.Int(0, 0));
    const int latest = kMigrations[sizeof(kMigrations) / sizeof(kMigrations[0]) - 1].version;
    if (version > latest) {
      return MakeError(quantd::StatusCode::kFailedPrecondition, "STORE_SCHEMA_TOO_NEW",
                       absl::StrCat("the database has schema version ", version,
                                    ", newer than this quantd's ", latest));
    }
    for (const Migration& m : kMigrations) {
      if (m.version <= version) continue;
      QD_RETURN_IF_ERROR(conn.ExecScript(m.sql));
      Params p;
      p.Int(m.version).Text(m.description).Int(absl::ToUnixMicros(absl::Now()));
      QD_RETURN_IF_ERROR(
          conn.Exec("INSERT INTO schema_migrations (version, "
                    "description, applied_at) VALUES ($1, $2, $3)",
                    p));
      version = m.version;
    }
    QD_RETURN_IF_ERROR(tx.Commit());
    schema_version_ = version;
    return quantd::OkStatus();
  };
  quantd::Status s = body();
  if (!conn.broken())
    conn.Exec("SELECT pg_advisory_unlock($1::bigint)", lock_key).status().IgnoreError();
  return s;
}

namespace {

// Runs `body` on a pooled connection, again (on a fresh transaction) when
// PostgreSQL aborted it for a serialization failure or deadlock.
template <typename T, typename Body>
quantd::StatusOr<T> WithRetries(
    std::function<quantd::StatusOr<std::unique_ptr<Connection>>()> acquire, Body body) {
  quantd::Status last;
  for (int attempt = 0; attempt < kMaxTransactionAttempts; ++attempt) {
    QD_ASSIGN_OR_RETURN(auto c, acquire());
    quantd::StatusOr<T> result = body(*c);
    if (result.ok() || result.status().code() != quantd::StatusCode::kAborted ||
        result.status().reason() != "STORE_CONFLICT") {
      return result;
    }
    last = result.status();
  }
  return last;
}

}  // namespace

quantd::StatusOr<CreateJobOutcome> PostgresJobStore::CreateJob(const JobRecord& record_in,
                                                               std::vector<v1::JobEvent> events_in,
                                                               const CreateJobOptions& options) {
  QD_RETURN_IF_ERROR(CheckWritableRecord(record_in));
  return WithRetries<CreateJobOutcome>(
      [this] { return Acquire(); },
      [&](Connection& c) -> quantd::StatusOr<CreateJobOutcome> {
        JobRecord record = record_in;
        std::vector<v1::JobEvent> events = events_in;
        record.last_sequence = 0;
        AssignEventSequences(record, events);
        const v1::Job& job = record.job;
        QD_ASSIGN_OR_RETURN(auto tx, Transaction::Begin(c));

        auto find_existing = [&]() -> quantd::StatusOr<std::optional<JobRecord>> {
          Params p;
          p.Text(job.tenant()).Text(job.request_id());
          QD_ASSIGN_OR_RETURN(
              auto r, c.Exec(absl::StrCat("SELECT ", kRecordColumns,
                                          " FROM jobs WHERE tenant = $1 AND request_id = $2"),
                             p));
          if (r.rows() == 0) return std::optional<JobRecord>();
          QD_ASSIGN_OR_RETURN(auto existing, ReadRecord(r, 0));
          return std::optional<JobRecord>(std::move(existing));
        };
        CreateJobReads reads;
        reads.find_by_request_id = find_existing;
        reads.count_queued = [&]() -> quantd::StatusOr<int64_t> {
          // Serializes creates of one tenant so the count stays true until
          // this transaction commits.
          Params t;
          t.Text(job.tenant());
          QD_RETURN_IF_ERROR(c.Exec("SELECT pg_advisory_xact_lock(hashtext($1)::bigint)", t));
          Params p;
          p.Text(job.tenant()).Int(v1::QUEUED);
          QD_ASSIGN_OR_RETURN(
              auto count,
              c.Exec("SELECT COUNT(*)::bigint FROM jobs WHERE tenant = $1 AND state = $2", p));
          return count.Int(0, 0);
        };
        QD_ASSIGN_OR_RETURN(std::optional<CreateJobOutcome> decided,
                            CheckCreateJob(job, options, reads));
        if (decided.has_value()) return std::move(*decided);
        Params p;
        p.Text(job.name())
            .Text(job.tenant())
            .OptText(RequestIdColumn(job))
            .Bytes(record.request_spec)
            .Int(job.state())
            .Text(job.spec().device())
            .Int(CreateTimeColumn(job))
            .Int(AvailableMicros(record))
            .Int(record.lease_token)
            .OptInt(OptionalMicros(record.lease_expire_time))
            .Int(record.last_sequence)
            .Bytes(SerializeDeterministic(job))
            .Bytes(record.lease_secret_hash)
            .Text(record.lease_holder)
            .Bytes(record.outcome_hash);
        // ON CONFLICT waits for a concurrent insert of the same key to
        // commit and then skips ours: the unique index decides.
        QD_ASSIGN_OR_RETURN(
            auto inserted,
            c.Exec(absl::StrCat("INSERT INTO jobs (", kRecordColumns,
                                ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, "
                                "$13, $14, $15) "
                                "ON CONFLICT (tenant, request_id) DO NOTHING RETURNING name"),
                   p));
        if (inserted.rows() == 0) {
          QD_ASSIGN_OR_RETURN(auto existing, find_existing());
          if (!existing.has_value()) {
            return MakeError(quantd::StatusCode::kAborted, "STORE_CONFLICT",
                             "request_id conflict with a job that is gone");
          }
          QD_RETURN_IF_ERROR(tx.Commit());
          return CreateJobOutcome{std::move(*existing), false};
        }
        for (const auto& [key, value] : job.spec().labels()) {
          Params l;
          l.Text(job.name()).Text(key).Text(value);
          QD_RETURN_IF_ERROR(
              c.Exec("INSERT INTO job_labels (name, key, value) VALUES ($1, $2, $3)", l));
        }
        QD_RETURN_IF_ERROR(InsertEvents(c, events));
        QD_RETURN_IF_ERROR(tx.Commit());
        return CreateJobOutcome{std::move(record), true};
      });
}

quantd::StatusOr<JobRecord> PostgresJobStore::GetJob(absl::string_view name) {
  QD_ASSIGN_OR_RETURN(auto c, Acquire());
  Params p;
  p.Text(name);
  QD_ASSIGN_OR_RETURN(
      auto r, (c)->Exec(absl::StrCat("SELECT ", kRecordColumns, " FROM jobs WHERE name = $1"), p));
  if (r.rows() == 0) return JobNotFoundError(name);
  return ReadRecord(r, 0);
}

quantd::StatusOr<JobRecord> PostgresJobStore::UpdateJob(absl::string_view name,
                                                        const Mutation& mutate) {
  return WithRetries<JobRecord>(
      [this] { return Acquire(); },
      [&](Connection& c) -> quantd::StatusOr<JobRecord> {
        QD_ASSIGN_OR_RETURN(auto tx, Transaction::Begin(c));
        Params p;
        p.Text(name);
        QD_ASSIGN_OR_RETURN(auto r, c.Exec(absl::StrCat("SELECT ", kRecordColumns,
                                                        " FROM jobs WHERE name = $1 FOR UPDATE"),
                                           p));
        if (r.rows() == 0) return JobNotFoundError(name);
        QD_ASSIGN_OR_RETURN(auto record, ReadRecord(r, 0));
        QD_RETURN_IF_ERROR(WriteMutation(c, record, mutate));
        QD_RETURN_IF_ERROR(tx.Commit());
        return std::move(record);
      });
}

quantd::StatusOr<std::optional<JobRecord>> PostgresJobStore::ClaimQueuedJob(
    const ClaimQuery& query, const Mutation& mutate) {
  if (query.devices.empty()) return std::optional<JobRecord>();
  return WithRetries<std::optional<JobRecord>>(
      [this] { return Acquire(); },
      [&](Connection& c) -> quantd::StatusOr<std::optional<JobRecord>> {
        QD_ASSIGN_OR_RETURN(auto tx, Transaction::Begin(c));
        Params p;
        p.Int(v1::QUEUED).Int(absl::ToUnixMicros(query.now)).Text(TextArray(query.devices));
        // SKIP LOCKED: a row another frontend is claiming right now is
        // passed over instead of waited for.
        QD_ASSIGN_OR_RETURN(
            auto r, c.Exec(absl::StrCat("SELECT ", kRecordColumns,
                                        " FROM jobs WHERE state = $1 AND available_time <= $2 AND "
                                        "device = ANY($3::text[]) ORDER BY create_time, name "
                                        "LIMIT 1 FOR UPDATE SKIP LOCKED"),
                           p));
        if (r.rows() == 0) return std::optional<JobRecord>();
        QD_ASSIGN_OR_RETURN(auto record, ReadRecord(r, 0));
        QD_RETURN_IF_ERROR(WriteMutation(c, record, mutate));
        QD_RETURN_IF_ERROR(tx.Commit());
        return std::optional<JobRecord>(std::move(record));
      });
}

quantd::StatusOr<std::vector<std::string>> PostgresJobStore::ListExpiredLeases(absl::Time now,
                                                                               int limit) {
  QD_ASSIGN_OR_RETURN(auto c, Acquire());
  Params p;
  p.Int(v1::RUNNING).Int(v1::CANCELLING).Int(absl::ToUnixMicros(now)).Int(limit);
  QD_ASSIGN_OR_RETURN(
      auto r, (c)->Exec("SELECT name FROM jobs WHERE state IN ($1, $2) AND lease_expire_time <= $3 "
                        "ORDER BY lease_expire_time, name LIMIT $4",
                        p));
  std::vector<std::string> names;
  for (int i = 0; i < r.rows(); ++i) names.emplace_back(r.Bytes(i, 0));
  return names;
}

quantd::StatusOr<std::vector<JobRecord>> PostgresJobStore::ListJobs(const ListJobsQuery& query) {
  std::string sql = absl::StrCat("SELECT ", kRecordColumns, " FROM jobs WHERE TRUE");
  Params p;
  int n = 0;
  auto next = [&n] { return absl::StrCat("$", ++n); };
  if (query.tenant.has_value()) {
    absl::StrAppend(&sql, " AND tenant = ", next());
    p.Text(*query.tenant);
  }
  if (!query.states.empty()) {
    std::vector<std::string> marks;
    for (v1::JobState state : query.states) {
      marks.push_back(next());
      p.Int(state);
    }
    absl::StrAppend(&sql, " AND state IN (", absl::StrJoin(marks, ", "), ")");
  }
  for (const auto& [key, value] : query.labels) {
    std::string k = next();
    std::string v = next();
    absl::StrAppend(
        &sql, " AND EXISTS (SELECT 1 FROM job_labels l WHERE l.name = jobs.name AND l.key = ", k,
        " AND l.value = ", v, ")");
    p.Text(key).Text(value);
  }
  const char* cmp = query.ascending ? ">" : "<";
  const char* dir = query.ascending ? "ASC" : "DESC";
  if (query.after.has_value()) {
    std::string t = next();
    std::string name = next();
    absl::StrAppend(&sql, " AND (create_time ", cmp, " ", t, " OR (create_time = ", t, " AND name ",
                    cmp, " ", name, "))");
    p.Int(absl::ToUnixMicros(query.after->create_time)).Text(query.after->name);
  }
  // Names are COLLATE "C" in the schema: the same byte order as SQLite,
  // whatever the database's locale.
  absl::StrAppend(&sql, " ORDER BY create_time ", dir, ", name ", dir, " LIMIT ", next());
  p.Int(query.limit);
  QD_ASSIGN_OR_RETURN(auto c, Acquire());
  QD_ASSIGN_OR_RETURN(auto r, (c)->Exec(sql, p));
  std::vector<JobRecord> out;
  for (int i = 0; i < r.rows(); ++i) {
    QD_ASSIGN_OR_RETURN(auto record, ReadRecord(r, i));
    out.push_back(std::move(record));
  }
  return out;
}

quantd::StatusOr<std::vector<v1::JobEvent>> PostgresJobStore::ListEvents(absl::string_view name,
                                                                         int64_t after_sequence,
                                                                         int limit) {
  QD_ASSIGN_OR_RETURN(auto c, Acquire());
  Params p;
  p.Text(name).Int(after_sequence).Int(limit);
  QD_ASSIGN_OR_RETURN(
      auto r,
      (c)->Exec(
          "SELECT payload FROM job_events WHERE name = $1 AND sequence > $2 ORDER BY sequence "
          "LIMIT $3",
          p));
  std::vector<v1::JobEvent> events(r.rows());
  for (int i = 0; i < r.rows(); ++i) {
    QD_RETURN_IF_ERROR(ParseEventBlob(name, r.Bytes(i, 0), &events[i]));
  }
  return events;
}

quantd::StatusOr<int64_t> PostgresJobStore::CountJobs(const std::optional<std::string>& tenant,
                                                      v1::JobState state) {
  QD_ASSIGN_OR_RETURN(auto c, Acquire());
  Params p;
  p.Int(state);
  if (tenant.has_value()) p.Text(*tenant);
  QD_ASSIGN_OR_RETURN(
      auto r, (c)->Exec(tenant.has_value()
                            ? "SELECT COUNT(*)::bigint FROM jobs WHERE state = $1 AND tenant = $2"
                            : "SELECT COUNT(*)::bigint FROM jobs WHERE state = $1",
                        p));
  return r.Int(0, 0);
}

}  // namespace quantd::server
