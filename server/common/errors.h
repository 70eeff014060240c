// What the server adds to quantd::Status (worker/common/status.h, the one
// status type; docs/design.md, "Errors"): shorthands for an error with an
// ErrorInfo reason and for a bad request listing its field violations. The
// reason and the violations are members of quantd::Status; the gRPC
// boundary (server/grpc/status_conversion.h) turns them into google.rpc
// details.
#ifndef QUANTD_SERVER_COMMON_ERRORS_H_
#define QUANTD_SERVER_COMMON_ERRORS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "worker/common/status.h"

namespace quantd::server {

// An error with an ErrorInfo reason. `code` must not be kOk.
quantd::Status MakeError(quantd::StatusCode code, absl::string_view reason,
                         absl::string_view message);

// INVALID_ARGUMENT with reason INVALID_ARGUMENT and a BadRequest listing
// `violations`. The message joins the violations so that clients that only
// print the message still see every bad field.
quantd::Status InvalidRequestError(const std::vector<FieldViolation>& violations);

// Replaces the ErrorInfo reason of a non-OK status; an OK status or an empty
// reason leaves it as it is.
void SetReason(quantd::Status& status, absl::string_view reason);

// Appends field violations to a non-OK status (an OK status stays bare).
void AddViolations(quantd::Status& status, const std::vector<FieldViolation>& violations);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_COMMON_ERRORS_H_
