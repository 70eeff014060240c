#include "server/grpc/status_conversion.h"

#include <string>

#include "google/rpc/status.pb.h"
#include "worker/common/status.h"
#include "worker/job_spec/rpc_status.h"

namespace quantd::server {

grpc::Status ToGrpcStatus(const quantd::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), status.message(),
                      ToRpcStatus(status, ErrorInfoPolicy::kAlways).SerializeAsString());
}

quantd::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return quantd::OkStatus();
  google::rpc::Status proto;
  if (status.error_details().empty() || !proto.ParseFromString(status.error_details())) {
    return quantd::Status(static_cast<quantd::StatusCode>(status.error_code()),
                          status.error_message());
  }
  // The code and message of the grpc::Status win over the copy in details.
  proto.set_code(status.error_code());
  proto.set_message(status.error_message());
  return FromRpcStatus(proto);
}

}  // namespace quantd::server
