#include "server/common/engine_status.h"

#include <vector>

#include "server/common/errors.h"

namespace quantd::server {

absl::Status FromEngineStatus(const quantd::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // Both enums use the canonical gRPC code values.
  absl::Status out(static_cast<absl::StatusCode>(static_cast<int>(status.code())),
                   status.message());
  SetReason(out, status.reason());
  std::vector<FieldViolation> violations;
  for (const auto& v : status.violations()) violations.push_back({v.field, v.description});
  AddViolations(out, violations);
  return out;
}

}  // namespace quantd::server
