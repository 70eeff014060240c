// The one place where quantd's absl::Status becomes a grpc::Status (and
// back, for clients and tests). The gRPC status carries a serialized
// google.rpc.Status in its binary details (grpc-status-details-bin): always
// an ErrorInfo (reason UPPER_SNAKE, domain "quantd"; the code's name when
// the error named no reason) and, for bad requests, a BadRequest with the
// field violations.
#ifndef QUANTD_SERVER_GRPC_STATUS_CONVERSION_H_
#define QUANTD_SERVER_GRPC_STATUS_CONVERSION_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "google/rpc/status.pb.h"

namespace quantd::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

// The google.rpc.Status a non-OK absl::Status becomes (also used for a
// job's stored error).
google::rpc::Status ToRpcStatus(const absl::Status& status);

// Parses a grpc::Status produced by ToGrpcStatus (or any server that sends
// google.rpc.Status details) back into an absl::Status whose reason and
// violations can be read with server/common/errors.h.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_GRPC_STATUS_CONVERSION_H_
