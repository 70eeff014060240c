// What both JobStore backends derive from a JobRecord when they write it:
// the indexed column values and the event sequence numbers. Kept in one
// place so SQLite and PostgreSQL index and number jobs identically.
#ifndef QUANTD_SERVER_STORE_RECORD_COLUMNS_H_
#define QUANTD_SERVER_STORE_RECORD_COLUMNS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/store/job_store.h"
#include "worker/common/status.h"

namespace quantd::server {

// The request_id column: NULL (nullopt) when the job has none, so that the
// unique (tenant, request_id) index ignores it.
std::optional<std::string> RequestIdColumn(const v1::Job& job);

// The create_time column in microseconds since the epoch.
int64_t CreateTimeColumn(const v1::Job& job);

// Microseconds since the epoch; NULL for InfinitePast (no lease).
std::optional<int64_t> OptionalMicros(absl::Time t);
absl::Time TimeFromOptionalMicros(std::optional<int64_t> micros);

// Sets `job` and assigns the next sequence numbers, advancing
// record.last_sequence.
void AssignEventSequences(JobRecord& record, std::vector<v1::JobEvent>& events);

// Checks what every write needs: a name and a known state.
quantd::Status CheckWritableRecord(const JobRecord& record);

// Parses a stored blob; DATA_LOSS naming the job when it is corrupt.
quantd::Status ParseJobBlob(absl::string_view name, absl::string_view blob, v1::Job* job);
quantd::Status ParseEventBlob(absl::string_view name, absl::string_view blob, v1::JobEvent* event);

// Deterministic serialization (sorted maps), for blobs and comparisons.
std::string SerializeDeterministic(const google::protobuf::Message& message);

// NOT_FOUND with reason JOB_NOT_FOUND.
quantd::Status JobNotFoundError(absl::string_view name);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_STORE_RECORD_COLUMNS_H_
