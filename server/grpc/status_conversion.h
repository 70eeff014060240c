// The gRPC boundary of quantd's server: a quantd::Status becomes a
// grpc::Status (and back, for clients and tests). The gRPC status carries a
// serialized google.rpc.Status in its binary details
// (grpc-status-details-bin), encoded by the one encoder in
// worker/job_spec/rpc_status.h: always an ErrorInfo (reason UPPER_SNAKE, domain
// "quantd"; the code's name when the error named no reason) and, for bad
// requests, a BadRequest with the field violations.
#ifndef QUANTD_SERVER_GRPC_STATUS_CONVERSION_H_
#define QUANTD_SERVER_GRPC_STATUS_CONVERSION_H_

#include <grpcpp/support/status.h>

#include "worker/common/status.h"

namespace quantd::server {

grpc::Status ToGrpcStatus(const quantd::Status& status);

// Parses a grpc::Status produced by ToGrpcStatus (or any server that sends
// google.rpc.Status details) back into a quantd::Status with its reason and
// violations.
quantd::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_GRPC_STATUS_CONVERSION_H_
