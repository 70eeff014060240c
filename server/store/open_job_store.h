// Opens the JobStore a --store URI names: sqlite:///path/to/quantd.db or
// postgresql://user@host:port/db (libpq URI syntax).
#ifndef QUANTD_SERVER_STORE_OPEN_JOB_STORE_H_
#define QUANTD_SERVER_STORE_OPEN_JOB_STORE_H_

#include <memory>

#include "absl/strings/string_view.h"
#include "server/store/job_store.h"
#include "worker/common/status.h"

namespace quantd::server {

// INVALID_ARGUMENT (INVALID_STORE_URI) for an unknown scheme; otherwise the
// backend's own errors (e.g. UNAVAILABLE when PostgreSQL is unreachable).
quantd::StatusOr<std::unique_ptr<JobStore>> OpenJobStore(absl::string_view uri);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_STORE_OPEN_JOB_STORE_H_
