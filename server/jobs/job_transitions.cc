#include "server/jobs/job_transitions.h"

#include "google/protobuf/util/time_util.h"

namespace quantd::server {

using google::protobuf::util::TimeUtil;

bool IsTerminal(v1::JobState state) {
  return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
}

std::string StateName(v1::JobState state) { return v1::JobState_Name(state); }

google::protobuf::Timestamp ToTimestamp(absl::Time t) {
  return TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(t));
}

absl::Time FromTimestamp(const google::protobuf::Timestamp& t) {
  return absl::FromUnixMicros(TimeUtil::TimestampToMicroseconds(t));
}

void Transition(JobRecord& record, v1::JobState state, absl::Time now, JobUpdate& update) {
  v1::Job& job = record.job;
  job.set_state(state);
  *job.mutable_update_time() = ToTimestamp(now);
  if (IsTerminal(state)) *job.mutable_end_time() = ToTimestamp(now);
  v1::JobEvent event;
  event.set_state(state);
  *event.mutable_time() = ToTimestamp(now);
  event.set_attempt(job.attempt());
  update.events.push_back(std::move(event));
}

v1::JobEvent LogEvent(const v1::Job& job, v1::LogSeverity severity, const std::string& message,
                      absl::Time now) {
  v1::JobEvent event;
  event.mutable_log()->set_severity(severity);
  event.mutable_log()->set_message(message);
  *event.mutable_time() = ToTimestamp(now);
  event.set_attempt(job.attempt());
  return event;
}

nlohmann::json JobLogFields(const v1::Job& job) {
  nlohmann::json fields = {{"job", job.name()}, {"tenant", job.tenant()}};
  if (!job.worker().empty()) fields["worker"] = job.worker();
  if (job.attempt() > 0) fields["attempt"] = job.attempt();
  return fields;
}

}  // namespace quantd::server
