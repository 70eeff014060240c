// Errors inside quantd's server are absl::Status values that carry what the
// RPC boundary turns into google.rpc.Status details: an ErrorInfo reason
// (UPPER_SNAKE, domain "quantd") and BadRequest field violations. They ride
// as absl::Status payloads keyed by the detail's type URL, so any layer can
// add or read them and server/grpc converts them in one place.
#ifndef QUANTD_SERVER_COMMON_ERRORS_H_
#define QUANTD_SERVER_COMMON_ERRORS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace quantd::server {

inline constexpr char kErrorDomain[] = "quantd";
inline constexpr char kErrorInfoTypeUrl[] = "type.googleapis.com/google.rpc.ErrorInfo";
inline constexpr char kBadRequestTypeUrl[] = "type.googleapis.com/google.rpc.BadRequest";

struct FieldViolation {
  std::string field;  // dotted path, e.g. "spec.model_uri"
  std::string description;

  bool operator==(const FieldViolation& o) const {
    return field == o.field && description == o.description;
  }
};

// An error with an ErrorInfo reason. `code` must not be kOk.
absl::Status MakeError(absl::StatusCode code, absl::string_view reason, absl::string_view message);

// INVALID_ARGUMENT with reason INVALID_ARGUMENT and a BadRequest listing
// `violations`. The message joins the violations so that clients that only
// print the message still see every bad field.
absl::Status InvalidRequestError(const std::vector<FieldViolation>& violations);

// Replaces the ErrorInfo reason of a non-OK status.
void SetReason(absl::Status& status, absl::string_view reason);

// Appends field violations to a non-OK status.
void AddViolations(absl::Status& status, const std::vector<FieldViolation>& violations);

// The ErrorInfo reason, or "" when the status carries none.
std::string GetReason(const absl::Status& status);

// The BadRequest field violations, empty when there are none.
std::vector<FieldViolation> GetViolations(const absl::Status& status);

// UPPER_SNAKE name of a canonical code, e.g. "FAILED_PRECONDITION".
std::string CodeName(absl::StatusCode code);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_COMMON_ERRORS_H_
