// A gRPC server interceptor that counts every finished call and records its
// latency in QuantdMetrics, labelled by method and status code, and keeps
// the calls in flight (what a shutdown that does not finish waits for).
#ifndef QUANTD_SERVER_METRICS_GRPC_METRICS_INTERCEPTOR_H_
#define QUANTD_SERVER_METRICS_GRPC_METRICS_INTERCEPTOR_H_

#include <grpcpp/support/server_interceptor.h>

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics/quantd_metrics.h"

namespace quantd::server {

// The calls a server is handling now, by method. Thread-safe.
class InFlightRpcs {
 public:
  void Started(const std::string& method);
  void Finished(const std::string& method);
  // "quantd.v1.QuantizationService/CreateJob x2, ..." in method order;
  // empty when none.
  std::string Describe();

 private:
  absl::Mutex mu_;
  std::map<std::string, int> counts_ ABSL_GUARDED_BY(mu_);
};

class GrpcMetricsInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // Neither is owned; both must outlive the server. `in_flight` may be null.
  explicit GrpcMetricsInterceptorFactory(QuantdMetrics* metrics, InFlightRpcs* in_flight = nullptr)
      : metrics_(metrics), in_flight_(in_flight) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  QuantdMetrics* metrics_;
  InFlightRpcs* in_flight_;
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_METRICS_GRPC_METRICS_INTERCEPTOR_H_
