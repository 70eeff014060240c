#include "worker/job_spec/rpc_status.h"

#include "google/rpc/error_details.pb.h"

namespace quantd {

google::rpc::Status ToRpcStatus(const Status& status, ErrorInfoPolicy policy) {
  google::rpc::Status out;
  out.set_code(static_cast<int>(status.code()));
  out.set_message(status.message());
  if (status.ok()) return out;
  if (!status.reason().empty() || policy == ErrorInfoPolicy::kAlways) {
    google::rpc::ErrorInfo info;
    info.set_reason(status.reason().empty() ? StatusCodeName(status.code()) : status.reason());
    info.set_domain(kErrorDomain);
    out.add_details()->PackFrom(info);
  }
  if (!status.violations().empty()) {
    google::rpc::BadRequest bad;
    for (const auto& v : status.violations()) {
      auto* fv = bad.add_field_violations();
      fv->set_field(v.field);
      fv->set_description(v.description);
    }
    out.add_details()->PackFrom(bad);
  }
  return out;
}

Status FromRpcStatus(const google::rpc::Status& in) {
  Status out(static_cast<StatusCode>(in.code()), in.message());
  for (const auto& any : in.details()) {
    google::rpc::ErrorInfo info;
    google::rpc::BadRequest bad;
    if (any.UnpackTo(&info)) {
      out.WithReason(info.reason());
    } else if (any.UnpackTo(&bad)) {
      for (const auto& fv : bad.field_violations()) out.AddViolation(fv.field(), fv.description());
    }
  }
  return out;
}

}  // namespace quantd
