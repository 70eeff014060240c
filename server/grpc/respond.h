// The shape every unary quantd RPC has: authenticate, call the job logic,
// convert the answer. Shared by both service implementations.
#ifndef QUANTD_SERVER_GRPC_RESPOND_H_
#define QUANTD_SERVER_GRPC_RESPOND_H_

#include <grpcpp/server_context.h>

#include <utility>

#include "server/grpc/authenticator.h"
#include "server/grpc/status_conversion.h"
#include "worker/common/status.h"

namespace quantd::server {

// `call(const Caller&)` returns quantd::StatusOr<Response>.
template <typename Response, typename Call>
grpc::Status Respond(Authenticator* auth, grpc::ServerContext* context, Response* response,
                     Call call) {
  quantd::StatusOr<Caller> caller = auth->Authenticate(*context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  auto result = call(*caller);
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = std::move(*result);
  return grpc::Status::OK;
}

}  // namespace quantd::server

#endif  // QUANTD_SERVER_GRPC_RESPOND_H_
