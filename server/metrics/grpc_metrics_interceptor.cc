#include "server/metrics/grpc_metrics_interceptor.h"

#include "absl/time/clock.h"
#include "server/common/errors.h"

namespace quantd::server {
namespace {

class GrpcMetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  GrpcMetricsInterceptor(QuantdMetrics* metrics, const char* method)
      : metrics_(metrics),
        method_(method != nullptr && *method == '/' ? method + 1 : method),
        start_(absl::Now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      grpc::Status status = methods->GetSendStatus();
      metrics_->RpcHandled(method_, CodeName(static_cast<absl::StatusCode>(status.error_code())),
                           absl::ToDoubleSeconds(absl::Now() - start_));
    }
    methods->Proceed();
  }

 private:
  QuantdMetrics* metrics_;
  std::string method_;
  absl::Time start_;
};

}  // namespace

grpc::experimental::Interceptor* GrpcMetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new GrpcMetricsInterceptor(metrics_, info->method());
}

}  // namespace quantd::server
