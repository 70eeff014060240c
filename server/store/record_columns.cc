#include "server/store/record_columns.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/time_util.h"
#include "server/common/errors.h"
#include "worker/common/status.h"

namespace quantd::server {

std::optional<std::string> RequestIdColumn(const v1::Job& job) {
  if (job.request_id().empty()) return std::nullopt;
  return job.request_id();
}

int64_t CreateTimeColumn(const v1::Job& job) {
  return google::protobuf::util::TimeUtil::TimestampToMicroseconds(job.create_time());
}

std::optional<int64_t> OptionalMicros(absl::Time t) {
  if (t == absl::InfinitePast()) return std::nullopt;
  return absl::ToUnixMicros(t);
}

absl::Time TimeFromOptionalMicros(std::optional<int64_t> micros) {
  if (!micros.has_value()) return absl::InfinitePast();
  return absl::FromUnixMicros(*micros);
}

void AssignEventSequences(JobRecord& record, std::vector<v1::JobEvent>& events) {
  for (v1::JobEvent& event : events) {
    event.set_job(record.job.name());
    event.set_sequence(++record.last_sequence);
  }
}

quantd::Status CheckWritableRecord(const JobRecord& record) {
  if (record.job.name().empty()) {
    return quantd::InvalidArgumentError("a stored job needs a name");
  }
  if (!v1::JobState_IsValid(record.job.state()) ||
      record.job.state() == v1::JOB_STATE_UNSPECIFIED) {
    return quantd::InvalidArgumentError(
        absl::StrCat("job ", record.job.name(), " has no valid state"));
  }
  return quantd::OkStatus();
}

quantd::Status ParseJobBlob(absl::string_view name, absl::string_view blob, v1::Job* job) {
  if (!job->ParseFromArray(blob.data(), static_cast<int>(blob.size()))) {
    return MakeError(quantd::StatusCode::kDataLoss, "STORE_CORRUPT",
                     absl::StrCat("stored job ", name, " does not parse as quantd.v1.Job"));
  }
  return quantd::OkStatus();
}

quantd::Status ParseEventBlob(absl::string_view name, absl::string_view blob, v1::JobEvent* event) {
  if (!event->ParseFromArray(blob.data(), static_cast<int>(blob.size()))) {
    return MakeError(
        quantd::StatusCode::kDataLoss, "STORE_CORRUPT",
        absl::StrCat("stored event of ", name, " does not parse as quantd.v1.JobEvent"));
  }
  return quantd::OkStatus();
}

std::string SerializeDeterministic(const google::protobuf::Message& message) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return out;
}

quantd::Status JobNotFoundError(absl::string_view name) {
  return MakeError(quantd::StatusCode::kNotFound, kJobNotFoundReason,
                   absl::StrCat(name, " does not exist"));
}

}  // namespace quantd::server
