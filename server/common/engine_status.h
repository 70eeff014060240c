// Converts the engine's quantd::Status (worker/common/status.h, which the
// torch-free spec check returns) into the server's absl::Status, keeping
// the ErrorInfo reason and the BadRequest field violations.
#ifndef QUANTD_SERVER_COMMON_ENGINE_STATUS_H_
#define QUANTD_SERVER_COMMON_ENGINE_STATUS_H_

#include "absl/status/status.h"
#include "worker/common/status.h"

namespace quantd::server {

absl::Status FromEngineStatus(const quantd::Status& status);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_COMMON_ENGINE_STATUS_H_
