// quantd-health-probe: exits 0 when quantd's grpc.health.v1 answers SERVING.
//
//   quantd-health-probe --addr 127.0.0.1:50051 [--service NAME] [--tls-ca ca.pem]
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "deploy/health/health_probe.h"
#include "worker/common/dashed_flags.h"

ABSL_FLAG(std::string, addr, "127.0.0.1:50051", "quantd gRPC address (HOST:PORT)");
ABSL_FLAG(std::string, service, "", "service to check (\"\" is the whole server)");
ABSL_FLAG(int, timeout_ms, 3000, "deadline of the Check call in milliseconds");
ABSL_FLAG(std::string, tls_ca, "", "PEM roots to verify quantd's certificate (enables TLS)");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate for mTLS");
ABSL_FLAG(std::string, tls_key, "", "PEM client private key for mTLS");
ABSL_FLAG(std::string, tls_server_name, "", "name to verify in quantd's certificate");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Checks quantd's grpc.health.v1; exit 0 when SERVING, 1 otherwise.\n"
      "usage: quantd-health-probe --addr HOST:PORT [--service NAME]");
  quantd::DashedFlagArgv args(argc, argv);
  absl::ParseCommandLine(args.argc(), args.argv());
  quantd::deploy::HealthProbeOptions options;
  options.address = absl::GetFlag(FLAGS_addr);
  options.service = absl::GetFlag(FLAGS_service);
  options.timeout = std::chrono::milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  options.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  options.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key = absl::GetFlag(FLAGS_tls_key);
  options.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  const quantd::deploy::HealthProbeResult result = quantd::deploy::ProbeHealth(options);
  std::cout << options.address << " " << (options.service.empty() ? "\"\"" : options.service)
            << ": " << result.detail << std::endl;
  if (result.outcome == quantd::deploy::HealthProbeOutcome::kBadOptions) return 2;
  return quantd::deploy::ExitCodeFor(result.outcome);
}
