// The HTTP/JSON face's cost per call against the gRPC API it forwards to,
// measured in the same run on one quantd: GetJob and a ListJobs page of 50
// jobs, sequential calls on one keep-alive connection each way. The HTTP
// path adds the route match, proto3 JSON both ways and the in-process gRPC
// hop; the ratio says what that costs.
//
//   bazel run -c opt //server/http:http_gateway_bench -- [--iters=2000]
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <stdlib.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "quantd/v1/quantization_service.grpc.pb.h"
#include "server/app/quantd_server.h"
#include "server/common/json_log.h"
#include "worker/common/bench_util.h"

namespace {

using quantd::bench::NowSeconds;

struct Timing {
  double grpc_us = 0;
  double http_us = 0;
};

void Print(const char* what, const Timing& t) {
  std::printf("%-26s gRPC %8.1f us   HTTP/JSON %8.1f us   ratio %.2f\n", what, t.grpc_us, t.http_us,
              t.http_us / t.grpc_us);
}

int Main(int argc, char** argv) {
  int64_t iters = 2000;
  for (int i = 1; i < argc; ++i) {
    if (!quantd::bench::IntFlag(argv[i], "--iters", &iters)) {
      std::fprintf(stderr, "usage: http_gateway_bench [--iters=N]\n");
      return 2;
    }
  }
  quantd::server::SetMinLogLevel(quantd::server::LogLevel::kError);
  char dir_template[] = "/tmp/http_gateway_bench.XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return 1;
  quantd::server::QuantdServerOptions options;
  options.listen = "127.0.0.1:0";
  options.http_listen = "127.0.0.1:0";
  options.data_dir = std::string(dir) + "/data";
  options.allowed_uri_roots = {"file:///"};
  auto server = quantd::server::QuantdServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "quantd: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  auto stub = quantd::v1::QuantizationService::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  httplib::Client http("127.0.0.1", (*server)->http_port());
  http.set_keep_alive(true);

  // 50 queued jobs (no workers): a full page to list.
  std::string name;
  for (int i = 0; i < 50; ++i) {
    grpc::ClientContext ctx;
    quantd::v1::CreateJobRequest req;
    req.set_request_id(absl::StrCat("bench-", i));
    req.mutable_spec()->set_model_uri("file:///models/stories260K");
    req.mutable_spec()->mutable_quantization()->set_scheme("w_int4_per_group_sym");
    (*req.mutable_spec()->mutable_labels())["bench"] = "http";
    quantd::v1::Job job;
    if (!stub->CreateJob(&ctx, req, &job).ok()) return 1;
    name = job.name();
  }

  const auto time_grpc = [&](auto call) {
    const double start = NowSeconds();
    for (int64_t i = 0; i < iters; ++i) {
      grpc::ClientContext ctx;
      if (!call(ctx).ok()) std::abort();
    }
    return (NowSeconds() - start) / static_cast<double>(iters) * 1e6;
  };
  const auto time_http = [&](const std::string& path) {
    const double start = NowSeconds();
    for (int64_t i = 0; i < iters; ++i) {
      auto r = http.Get(path);
      if (!r || r->status != 200) std::abort();
    }
    return (NowSeconds() - start) / static_cast<double>(iters) * 1e6;
  };

  quantd::v1::GetJobRequest get;
  get.set_name(name);
  quantd::v1::ListJobsRequest list;
  list.set_page_size(50);
  (*list.mutable_labels())["bench"] = "http";
  Timing get_job, list_jobs;
  // Warm both paths once, then measure.
  time_http("/v1/" + name);
  get_job.grpc_us = time_grpc([&](grpc::ClientContext& ctx) {
    quantd::v1::Job job;
    return stub->GetJob(&ctx, get, &job);
  });
  get_job.http_us = time_http("/v1/" + name);
  list_jobs.grpc_us = time_grpc([&](grpc::ClientContext& ctx) {
    quantd::v1::ListJobsResponse page;
    return stub->ListJobs(&ctx, list, &page);
  });
  list_jobs.http_us = time_http("/v1/jobs?page_size=50&labels%5Bbench%5D=http");

  std::printf("%lld sequential calls each, one connection each way\n",
              static_cast<long long>(iters));
  Print("GetJob", get_job);
  Print("ListJobs (50 jobs, BASIC)", list_jobs);
  (*server)->Shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
