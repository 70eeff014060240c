#include "deploy/health/health_probe.h"

#include <grpcpp/grpcpp.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "grpc/health/v1/health.grpc.pb.h"

namespace quantd::deploy {
namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

}  // namespace

HealthProbeResult ProbeHealth(const HealthProbeOptions& options) {
  HealthProbeResult result;
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  grpc::ChannelArguments args;
  if (!options.tls_ca.empty()) {
    grpc::SslCredentialsOptions ssl;
    if (!ReadFile(options.tls_ca, &ssl.pem_root_certs) ||
        (!options.tls_cert.empty() && (!ReadFile(options.tls_cert, &ssl.pem_cert_chain) ||
                                       !ReadFile(options.tls_key, &ssl.pem_private_key)))) {
      result.outcome = HealthProbeOutcome::kBadOptions;
      result.detail = "cannot read the TLS files";
      return result;
    }
    creds = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(options.tls_server_name);
    }
  }
  auto channel = grpc::CreateCustomChannel(options.address, creds, args);
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + options.timeout);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(options.service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) {
    result.outcome = HealthProbeOutcome::kRpcFailed;
    result.detail =
        "rpc failed (code " + std::to_string(status.error_code()) + "): " + status.error_message();
    return result;
  }
  result.detail = grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  result.outcome = response.status() == grpc::health::v1::HealthCheckResponse::SERVING
                       ? HealthProbeOutcome::kServing
                       : HealthProbeOutcome::kNotServing;
  return result;
}

int ExitCodeFor(HealthProbeOutcome outcome) {
  return outcome == HealthProbeOutcome::kServing ? 0 : 1;
}

}  // namespace quantd::deploy
