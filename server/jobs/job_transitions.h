// The pieces every state change of a job shares: timestamps, the state
// event each transition appends, and the log fields that identify a job.
// JobService (client side), LeaseService (worker side) and the lease reaper
// all change state through Transition(), so the event stream always
// records every state a job passed through.
#ifndef QUANTD_SERVER_JOBS_JOB_TRANSITIONS_H_
#define QUANTD_SERVER_JOBS_JOB_TRANSITIONS_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/time/time.h"
#include "google/protobuf/timestamp.pb.h"
#include "quantd/v1/job.pb.h"
#include "server/store/job_store.h"

namespace quantd::server {

bool IsTerminal(v1::JobState state);
// QUEUED, RUNNING, ... as written in the proto.
std::string StateName(v1::JobState state);

google::protobuf::Timestamp ToTimestamp(absl::Time t);
absl::Time FromTimestamp(const google::protobuf::Timestamp& t);

// Sets the state, update_time (and end_time for a terminal state) and
// appends the state event, stamped with `now` and the job's attempt.
void Transition(JobRecord& record, v1::JobState state, absl::Time now, JobUpdate& update);

// A log event stamped with `now` and the job's attempt.
v1::JobEvent LogEvent(const v1::Job& job, v1::LogSeverity severity, const std::string& message,
                      absl::Time now);

// {"job", "tenant", "worker", "attempt"} for structured logs.
nlohmann::json JobLogFields(const v1::Job& job);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_JOBS_JOB_TRANSITIONS_H_
