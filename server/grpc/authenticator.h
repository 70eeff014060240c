// Who is calling a gRPC method: turns the call's metadata (a bearer token)
// and transport (the TLS peer) into a Caller for the job logic. One
// Authenticator serves both services; the job logic checks what the
// caller's role may do.
#ifndef QUANTD_SERVER_GRPC_AUTHENTICATOR_H_
#define QUANTD_SERVER_GRPC_AUTHENTICATOR_H_

#include <grpcpp/server_context.h>

#include "server/jobs/caller.h"
#include "worker/common/status.h"

namespace quantd::server {

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  // UNAUTHENTICATED when the call carries no valid credential.
  virtual quantd::StatusOr<Caller> Authenticate(const grpc::ServerContext& context) = 0;
};

// Authentication off: every call is Caller::Anonymous().
class AnonymousAuthenticator : public Authenticator {
 public:
  quantd::StatusOr<Caller> Authenticate(const grpc::ServerContext&) override {
    return Caller::Anonymous();
  }
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_GRPC_AUTHENTICATOR_H_
