#include "server/grpc/status_conversion.h"

#include <string>

#include "absl/strings/match.h"
#include "google/rpc/error_details.pb.h"
#include "server/common/errors.h"

namespace quantd::server {
namespace {

constexpr absl::string_view kRpcTypePrefix = "type.googleapis.com/google.rpc.";

}  // namespace

google::rpc::Status ToRpcStatus(const absl::Status& status) {
  google::rpc::Status proto;
  proto.set_code(static_cast<int>(status.code()));
  proto.set_message(std::string(status.message()));
  if (status.ok()) return proto;
  // ErrorInfo first: clients that look at details[0] find the reason.
  google::rpc::ErrorInfo info;
  auto info_payload = status.GetPayload(kErrorInfoTypeUrl);
  if (!info_payload || !info.ParseFromString(std::string(*info_payload))) {
    info.set_reason(CodeName(status.code()));
    info.set_domain(kErrorDomain);
  }
  proto.add_details()->PackFrom(info);
  status.ForEachPayload([&](absl::string_view type_url, const absl::Cord& payload) {
    if (type_url == kErrorInfoTypeUrl || !absl::StartsWith(type_url, kRpcTypePrefix)) return;
    google::protobuf::Any* any = proto.add_details();
    any->set_type_url(std::string(type_url));
    any->set_value(std::string(payload));
  });
  return proto;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()),
                      ToRpcStatus(status).SerializeAsString());
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  google::rpc::Status proto;
  if (status.error_details().empty() || !proto.ParseFromString(status.error_details())) return out;
  for (const google::protobuf::Any& any : proto.details()) {
    if (absl::StartsWith(any.type_url(), kRpcTypePrefix)) {
      out.SetPayload(any.type_url(), absl::Cord(any.value()));
    }
  }
  return out;
}

}  // namespace quantd::server
