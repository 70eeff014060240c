#include "server/http/http_errors.h"

#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>

#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace quantd::server::http {

int HttpStatusForCode(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return 200;
    case grpc::StatusCode::CANCELLED:
      return 499;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
      return 400;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return 504;
    case grpc::StatusCode::NOT_FOUND:
      return 404;
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::ABORTED:
      return 409;
    case grpc::StatusCode::PERMISSION_DENIED:
      return 403;
    case grpc::StatusCode::UNAUTHENTICATED:
      return 401;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return 429;
    case grpc::StatusCode::UNIMPLEMENTED:
      return 501;
    case grpc::StatusCode::UNAVAILABLE:
      return 503;
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::DATA_LOSS:
    default:
      return 500;
  }
}

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

std::string ErrorJson(int http_status, const grpc::Status& status) {
  // Keeps the detail types in this binary's descriptor pool, which the JSON
  // printer resolves "@type" against.
  static const bool linked = [] {
    google::rpc::ErrorInfo::default_instance();
    google::rpc::BadRequest::default_instance();
    google::rpc::RetryInfo::default_instance();
    google::rpc::ResourceInfo::default_instance();
    google::rpc::PreconditionFailure::default_instance();
    google::rpc::QuotaFailure::default_instance();
    google::rpc::DebugInfo::default_instance();
    google::rpc::Help::default_instance();
    google::rpc::LocalizedMessage::default_instance();
    google::rpc::RequestInfo::default_instance();
    return true;
  }();
  (void)linked;
  nlohmann::ordered_json details = nlohmann::ordered_json::array();
  google::rpc::Status rpc;
  if (!status.error_details().empty() && rpc.ParseFromString(status.error_details())) {
    for (const google::protobuf::Any& any : rpc.details()) {
      std::string text;
      if (google::protobuf::util::MessageToJsonString(any, &text).ok()) {
        details.push_back(nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false));
      } else {
        details.push_back({{"@type", any.type_url()}});
      }
    }
  }
  nlohmann::ordered_json error = {{"code", http_status},
                                  {"message", status.error_message()},
                                  {"status", CodeName(status.error_code())},
                                  {"details", details}};
  return nlohmann::ordered_json{{"error", error}}.dump(
      -1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace quantd::server::http
