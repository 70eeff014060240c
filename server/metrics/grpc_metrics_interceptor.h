// A gRPC server interceptor that counts every finished call and records its
// latency in QuantdMetrics, labelled by method and status code.
#ifndef QUANTD_SERVER_METRICS_GRPC_METRICS_INTERCEPTOR_H_
#define QUANTD_SERVER_METRICS_GRPC_METRICS_INTERCEPTOR_H_

#include <grpcpp/support/server_interceptor.h>

#include "server/metrics/quantd_metrics.h"

namespace quantd::server {

class GrpcMetricsInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `metrics` is not owned and must outlive the server.
  explicit GrpcMetricsInterceptorFactory(QuantdMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  QuantdMetrics* metrics_;
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_METRICS_GRPC_METRICS_INTERCEPTOR_H_
