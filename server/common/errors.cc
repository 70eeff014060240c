#include "server/common/errors.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"

namespace quantd::server {

absl::Status MakeError(absl::StatusCode code, absl::string_view reason, absl::string_view message) {
  absl::Status status(code, std::string(message));
  SetReason(status, reason);
  return status;
}

absl::Status InvalidRequestError(const std::vector<FieldViolation>& violations) {
  // The count before the list: a description may itself end in a list.
  std::string message = "invalid request";
  if (violations.size() > 1) absl::StrAppend(&message, " (", violations.size(), " violations)");
  for (size_t i = 0; i < violations.size(); ++i) {
    absl::StrAppend(&message, i == 0 ? ": " : "; ", violations[i].field, ": ",
                    violations[i].description);
  }
  absl::Status status = MakeError(absl::StatusCode::kInvalidArgument, "INVALID_ARGUMENT", message);
  AddViolations(status, violations);
  return status;
}

void SetReason(absl::Status& status, absl::string_view reason) {
  if (status.ok() || reason.empty()) return;
  google::rpc::ErrorInfo info;
  info.set_reason(std::string(reason));
  info.set_domain(kErrorDomain);
  status.SetPayload(kErrorInfoTypeUrl, absl::Cord(info.SerializeAsString()));
}

void AddViolations(absl::Status& status, const std::vector<FieldViolation>& violations) {
  if (status.ok() || violations.empty()) return;
  google::rpc::BadRequest bad_request;
  if (auto existing = status.GetPayload(kBadRequestTypeUrl)) {
    bad_request.ParseFromString(std::string(*existing));
  }
  for (const FieldViolation& v : violations) {
    auto* fv = bad_request.add_field_violations();
    fv->set_field(v.field);
    fv->set_description(v.description);
  }
  status.SetPayload(kBadRequestTypeUrl, absl::Cord(bad_request.SerializeAsString()));
}

std::string GetReason(const absl::Status& status) {
  auto payload = status.GetPayload(kErrorInfoTypeUrl);
  if (!payload) return "";
  google::rpc::ErrorInfo info;
  if (!info.ParseFromString(std::string(*payload))) return "";
  return info.reason();
}

std::vector<FieldViolation> GetViolations(const absl::Status& status) {
  std::vector<FieldViolation> out;
  auto payload = status.GetPayload(kBadRequestTypeUrl);
  if (!payload) return out;
  google::rpc::BadRequest bad_request;
  if (!bad_request.ParseFromString(std::string(*payload))) return out;
  for (const auto& fv : bad_request.field_violations()) {
    out.push_back({fv.field(), fv.description()});
  }
  return out;
}

std::string CodeName(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return "OK";
    case absl::StatusCode::kCancelled:
      return "CANCELLED";
    case absl::StatusCode::kUnknown:
      return "UNKNOWN";
    case absl::StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case absl::StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case absl::StatusCode::kNotFound:
      return "NOT_FOUND";
    case absl::StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case absl::StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case absl::StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case absl::StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case absl::StatusCode::kAborted:
      return "ABORTED";
    case absl::StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case absl::StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case absl::StatusCode::kInternal:
      return "INTERNAL";
    case absl::StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case absl::StatusCode::kDataLoss:
      return "DATA_LOSS";
    case absl::StatusCode::kUnauthenticated:
      return "UNAUTHENTICATED";
    default:
      break;
  }
  return "UNKNOWN";
}

}  // namespace quantd::server
