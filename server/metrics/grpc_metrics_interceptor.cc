#include "server/metrics/grpc_metrics_interceptor.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/errors.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

// Lives as long as its call: created when the call arrives, destroyed when
// it is done, so its lifetime is the call's time in flight.
class GrpcMetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  GrpcMetricsInterceptor(QuantdMetrics* metrics, InFlightRpcs* in_flight, const char* method)
      : metrics_(metrics),
        in_flight_(in_flight),
        method_(method == nullptr ? ""
                : *method == '/'  ? method + 1
                                  : method),
        start_(absl::Now()) {
    if (in_flight_ != nullptr) in_flight_->Started(method_);
  }
  ~GrpcMetricsInterceptor() override {
    if (in_flight_ != nullptr) in_flight_->Finished(method_);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      grpc::Status status = methods->GetSendStatus();
      metrics_->RpcHandled(method_, StatusCodeName(static_cast<quantd::StatusCode>(status.error_code())),
                           absl::ToDoubleSeconds(absl::Now() - start_));
    }
    methods->Proceed();
  }

 private:
  QuantdMetrics* metrics_;
  InFlightRpcs* in_flight_;
  std::string method_;
  absl::Time start_;
};

}  // namespace

void InFlightRpcs::Started(const std::string& method) {
  absl::MutexLock lock(&mu_);
  ++counts_[method];
}

void InFlightRpcs::Finished(const std::string& method) {
  absl::MutexLock lock(&mu_);
  auto it = counts_.find(method);
  if (it == counts_.end()) return;
  if (--it->second <= 0) counts_.erase(it);
}

std::string InFlightRpcs::Describe() {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& [method, count] : counts_) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", method, " x", count);
  }
  return out;
}

grpc::experimental::Interceptor* GrpcMetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new GrpcMetricsInterceptor(metrics_, in_flight_, info->method());
}

}  // namespace quantd::server
