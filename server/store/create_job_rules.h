// The rules CreateJob applies before it inserts a job, the same in every
// JobStore backend: an idempotent retry (same tenant and request_id) gets
// the stored job back, and a new job of a tenant that already has its limit
// of QUEUED jobs is refused with RESOURCE_EXHAUSTED, reason QUEUE_FULL. The
// backend supplies the two reads, inside its creating transaction.
#ifndef QUANTD_SERVER_STORE_CREATE_JOB_RULES_H_
#define QUANTD_SERVER_STORE_CREATE_JOB_RULES_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "quantd/v1/job.pb.h"
#include "server/store/job_store.h"
#include "worker/common/status.h"

namespace quantd::server {

// Reads from the backend's open creating transaction.
struct CreateJobReads {
  // The job stored under the new job's (tenant, request_id), if any.
  std::function<quantd::StatusOr<std::optional<JobRecord>>()> find_by_request_id;
  // How many QUEUED jobs the tenant has; the backend keeps the count true
  // until its transaction commits (a lock, or a single writer).
  std::function<quantd::StatusOr<int64_t>()> count_queued;
};

// The stored job when `job` retries an earlier create (created = false),
// QUEUE_FULL when the tenant's queue is full, or nullopt: insert `job`.
// An idempotent retry is answered before the queue is counted, so it is
// never refused.
quantd::StatusOr<std::optional<CreateJobOutcome>> CheckCreateJob(const v1::Job& job,
                                                                 const CreateJobOptions& options,
                                                                 const CreateJobReads& reads);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_STORE_CREATE_JOB_RULES_H_
