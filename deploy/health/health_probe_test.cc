#include "deploy/health/health_probe.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <memory>

#include "gtest/gtest.h"

namespace quantd::deploy {
namespace {

// A gRPC server with grpc++'s default health service, as quantd runs it.
class HealthServer {
 public:
  HealthServer() {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    server_ = builder.BuildAndStart();
  }
  ~HealthServer() { server_->Shutdown(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  grpc::HealthCheckServiceInterface* health() { return server_->GetHealthCheckService(); }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST(HealthProbeTest, ServingServerIsHealthy) {
  HealthServer server;
  ASSERT_NE(server.health(), nullptr);
  server.health()->SetServingStatus("quantd.v1.QuantizationService", true);
  HealthProbeOptions options;
  options.address = server.address();
  HealthProbeResult result = ProbeHealth(options);
  EXPECT_EQ(result.outcome, HealthProbeOutcome::kServing) << result.detail;
  EXPECT_EQ(result.detail, "SERVING");
  EXPECT_EQ(ExitCodeFor(result.outcome), 0);

  options.service = "quantd.v1.QuantizationService";
  EXPECT_EQ(ProbeHealth(options).outcome, HealthProbeOutcome::kServing);
}

TEST(HealthProbeTest, NotServingAfterShutdownBegins) {
  HealthServer server;
  server.health()->SetServingStatus("quantd.v1.QuantizationService", true);
  // What quantd does on SIGTERM: every service turns NOT_SERVING.
  server.health()->SetServingStatus(false);
  HealthProbeOptions options;
  options.address = server.address();
  options.service = "quantd.v1.QuantizationService";
  HealthProbeResult result = ProbeHealth(options);
  EXPECT_EQ(result.outcome, HealthProbeOutcome::kNotServing);
  EXPECT_EQ(result.detail, "NOT_SERVING");
  EXPECT_EQ(ExitCodeFor(result.outcome), 1);
}

TEST(HealthProbeTest, UnknownServiceAndDeadServerAreFailures) {
  HealthServer server;
  HealthProbeOptions options;
  options.address = server.address();
  options.service = "no.such.Service";
  HealthProbeResult unknown = ProbeHealth(options);
  EXPECT_EQ(unknown.outcome, HealthProbeOutcome::kRpcFailed);
  EXPECT_NE(unknown.detail.find("code 5"), std::string::npos) << unknown.detail;  // NOT_FOUND
  EXPECT_EQ(ExitCodeFor(unknown.outcome), 1);

  // Port 1 on loopback: nothing listens there.
  options.address = "127.0.0.1:1";
  options.service = "";
  options.timeout = std::chrono::milliseconds(500);
  HealthProbeResult dead = ProbeHealth(options);
  EXPECT_EQ(dead.outcome, HealthProbeOutcome::kRpcFailed);
  EXPECT_EQ(ExitCodeFor(dead.outcome), 1);
}

TEST(HealthProbeTest, UnreadableTlsFilesAreBadOptions) {
  HealthProbeOptions options;
  options.tls_ca = "/nonexistent/ca.pem";
  HealthProbeResult result = ProbeHealth(options);
  EXPECT_EQ(result.outcome, HealthProbeOutcome::kBadOptions);
  EXPECT_EQ(ExitCodeFor(result.outcome), 1);
}

}  // namespace
}  // namespace quantd::deploy
