// quantd's errors over HTTP: the HTTP status of each gRPC code (the mapping
// google/rpc/code.proto documents, as AIP-193 uses it) and the JSON error
// body {"error": {"code", "message", "status", "details"}} built from the
// google.rpc.Status that quantd puts in the gRPC status details.
#ifndef QUANTD_SERVER_HTTP_HTTP_ERRORS_H_
#define QUANTD_SERVER_HTTP_HTTP_ERRORS_H_

#include <grpcpp/support/status.h>

#include <string>

namespace quantd::server::http {

// e.g. INVALID_ARGUMENT -> 400, UNAUTHENTICATED -> 401, CANCELLED -> 499.
int HttpStatusForCode(grpc::StatusCode code);

// The code's proto enum name, e.g. "INVALID_ARGUMENT".
const char* CodeName(grpc::StatusCode code);

// The JSON error body. `http_status` is the "code" member (normally
// HttpStatusForCode(status.error_code()); 404/405/413/415 for refusals made
// by the HTTP layer itself). Details are each google.protobuf.Any in proto3
// JSON ("@type" first); a detail whose type is unknown keeps only "@type".
std::string ErrorJson(int http_status, const grpc::Status& status);

}  // namespace quantd::server::http

#endif  // QUANTD_SERVER_HTTP_HTTP_ERRORS_H_
