#include "server/store/open_job_store.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/errors.h"
#include "server/store/postgres_job_store.h"
#include "server/store/sqlite_job_store.h"
#include "worker/common/status.h"

namespace quantd::server {

quantd::StatusOr<std::unique_ptr<JobStore>> OpenJobStore(absl::string_view uri) {
  if (absl::StartsWith(uri, "sqlite:")) {
    QD_ASSIGN_OR_RETURN(std::string path, SqliteJobStore::PathFromUri(uri));
    SqliteJobStoreOptions options;
    options.path = path;
    QD_ASSIGN_OR_RETURN(auto store, SqliteJobStore::Open(options));
    return std::unique_ptr<JobStore>(std::move(store));
  }
  if (absl::StartsWith(uri, "postgresql://") || absl::StartsWith(uri, "postgres://")) {
    PostgresJobStoreOptions options;
    options.uri = std::string(uri);
    QD_ASSIGN_OR_RETURN(auto store, PostgresJobStore::Open(options));
    return std::unique_ptr<JobStore>(std::move(store));
  }
  return MakeError(
      quantd::StatusCode::kInvalidArgument, "INVALID_STORE_URI",
      absl::StrCat("unknown store URI \"", uri,
                   "\"; use sqlite:///path/to/quantd.db or postgresql://user@host:port/db"));
}

}  // namespace quantd::server
