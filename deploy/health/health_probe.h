// A grpc.health.v1 client for containers: Docker's HEALTHCHECK and
// Kubernetes exec probes run it where the kubelet's native gRPC probe cannot
// go (quantd serving TLS; the native probe speaks only plaintext).
#ifndef QUANTD_DEPLOY_HEALTH_HEALTH_PROBE_H_
#define QUANTD_DEPLOY_HEALTH_HEALTH_PROBE_H_

#include <chrono>
#include <string>

namespace quantd::deploy {

struct HealthProbeOptions {
  std::string address = "127.0.0.1:50051";  // HOST:PORT of quantd.
  std::string service;                      // "" is the whole server.
  std::chrono::milliseconds timeout{3000};
  // PEM files; an empty tls_ca means plaintext.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // Overrides the name checked against the server certificate (quantd's
  // certificate names its Service, while the probe dials 127.0.0.1).
  std::string tls_server_name;
};

enum class HealthProbeOutcome {
  kServing,     // the server answered SERVING.
  kNotServing,  // it answered NOT_SERVING, UNKNOWN or SERVICE_UNKNOWN.
  kRpcFailed,   // no answer: unreachable, timed out, unknown service.
  kBadOptions,  // the TLS files could not be read.
};

struct HealthProbeResult {
  HealthProbeOutcome outcome = HealthProbeOutcome::kRpcFailed;
  std::string detail;  // the status name or the RPC error, for the log line.
};

// One Health.Check call; never throws.
HealthProbeResult ProbeHealth(const HealthProbeOptions& options);

// The process exit code Docker and Kubernetes expect: 0 healthy, 1 not.
int ExitCodeFor(HealthProbeOutcome outcome);

}  // namespace quantd::deploy

#endif  // QUANTD_DEPLOY_HEALTH_HEALTH_PROBE_H_
