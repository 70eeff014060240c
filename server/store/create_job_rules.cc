#include "server/store/create_job_rules.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/errors.h"

namespace quantd::server {

quantd::StatusOr<std::optional<CreateJobOutcome>> CheckCreateJob(const v1::Job& job,
                                                                 const CreateJobOptions& options,
                                                                 const CreateJobReads& reads) {
  if (!job.request_id().empty()) {
    QD_ASSIGN_OR_RETURN(std::optional<JobRecord> existing, reads.find_by_request_id());
    if (existing.has_value()) {
      return std::optional<CreateJobOutcome>(CreateJobOutcome{std::move(*existing), false});
    }
  }
  if (options.max_queued_per_tenant > 0) {
    QD_ASSIGN_OR_RETURN(int64_t queued, reads.count_queued());
    if (queued >= options.max_queued_per_tenant) {
      return MakeError(
          quantd::StatusCode::kResourceExhausted, "QUEUE_FULL",
          absl::StrCat("tenant \"", job.tenant(), "\" already has ", queued,
                       " queued jobs (the limit is ", options.max_queued_per_tenant, ")"));
    }
  }
  return std::optional<CreateJobOutcome>();
}

}  // namespace quantd::server
