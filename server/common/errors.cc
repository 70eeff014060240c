#include "server/common/errors.h"

#include "absl/strings/str_cat.h"
#include "worker/common/status.h"

namespace quantd::server {

quantd::Status MakeError(quantd::StatusCode code, absl::string_view reason,
                         absl::string_view message) {
  return quantd::Status(code, std::string(message), std::string(reason));
}

quantd::Status InvalidRequestError(const std::vector<FieldViolation>& violations) {
  // The count before the list: a description may itself end in a list.
  std::string message = "invalid request";
  if (violations.size() > 1) absl::StrAppend(&message, " (", violations.size(), " violations)");
  for (size_t i = 0; i < violations.size(); ++i) {
    absl::StrAppend(&message, i == 0 ? ": " : "; ", violations[i].field, ": ",
                    violations[i].description);
  }
  quantd::Status status =
      MakeError(quantd::StatusCode::kInvalidArgument, "INVALID_ARGUMENT", message);
  AddViolations(status, violations);
  return status;
}

void SetReason(quantd::Status& status, absl::string_view reason) {
  if (status.ok() || reason.empty()) return;
  status.WithReason(std::string(reason));
}

void AddViolations(quantd::Status& status, const std::vector<FieldViolation>& violations) {
  if (status.ok()) return;
  for (const FieldViolation& v : violations) status.AddViolation(v.field, v.description);
}

}  // namespace quantd::server
