#include "server/app/quantd_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/common/errors.h"
#include "server/common/json_log.h"
#include "server/store/open_job_store.h"

namespace quantd::server {
namespace {

constexpr const char* kServiceNames[] = {"quantd.v1.QuantizationService",
                                         "quantd.v1.WorkerService"};

absl::Status MakeDirs(const std::string& path) {
  std::string partial;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      partial = path.substr(0, i);
      if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
        return MakeError(absl::StatusCode::kFailedPrecondition, "DATA_DIR_UNUSABLE",
                         absl::StrCat("cannot create ", partial, ": ", strerror(errno)));
      }
    }
  }
  return absl::OkStatus();
}

std::string Hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

std::string ListenHost(const std::string& listen) {
  size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? listen : listen.substr(0, colon);
  return host;
}

std::string LocalDialAddress(const std::string& listen, int port) {
  std::string host = ListenHost(listen);
  if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::") host = "127.0.0.1";
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<std::unique_ptr<QuantdServer>> QuantdServer::Start(QuantdServerOptions options,
                                                                  Clock* clock) {
  std::unique_ptr<QuantdServer> server(new QuantdServer());
  absl::Status started = server->Init(std::move(options), clock != nullptr ? clock : Clock::Real());
  if (!started.ok()) {
    server->Shutdown();
    return started;
  }
  return server;
}

absl::Status QuantdServer::Init(QuantdServerOptions options, Clock* clock) {
  options_ = std::move(options);
  if (options_.data_dir.empty() || options_.data_dir[0] != '/') {
    return MakeError(absl::StatusCode::kInvalidArgument, "DATA_DIR_UNUSABLE",
                     absl::StrCat("the data directory must be an absolute path, got \"",
                                  options_.data_dir, "\""));
  }
  absl::Status s = MakeDirs(options_.data_dir + "/artifacts");
  if (!s.ok()) return s;
  options_.jobs.data_dir = options_.data_dir;
  if (options_.store_uri.empty()) {
    options_.store_uri = absl::StrCat("sqlite://", options_.data_dir, "/quantd.db");
  }

  absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore(options_.store_uri);
  if (!store.ok()) return store.status();
  store_ = std::move(*store);
  auth_ = std::make_unique<AnonymousAuthenticator>();
  jobs_ = std::make_unique<JobService>(store_.get(), clock, &notifier_, nullptr, options_.jobs);
  leases_ = std::make_unique<LeaseService>(store_.get(), clock, &notifier_, nullptr, options_.jobs);
  absl::Duration interval = options_.reaper_interval;
  if (interval <= absl::ZeroDuration()) interval = options_.jobs.lease_duration / 4;
  reaper_ = std::make_unique<LeaseReaper>(leases_.get(), clock, interval);
  reaper_->Start();

  quantization_service_ = std::make_unique<QuantizationServiceImpl>(jobs_.get(), auth_.get());
  worker_service_ = std::make_unique<WorkerServiceImpl>(leases_.get(), auth_.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen, grpc::InsecureServerCredentials(), &port_);
  builder.SetMaxReceiveMessageSize(options_.max_request_bytes);
  builder.RegisterService(quantization_service_.get());
  builder.RegisterService(worker_service_.get());
  grpc_server_ = builder.BuildAndStart();
  if (grpc_server_ == nullptr || port_ == 0) {
    return MakeError(
        absl::StatusCode::kUnavailable, "LISTEN_FAILED",
        absl::StrCat("cannot listen on ", options_.listen, " (in use, or not a local address?)"));
  }
  address_ = absl::StrCat(ListenHost(options_.listen), ":", port_);
  grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService();
  health->SetServingStatus(true);
  for (const char* name : kServiceNames) health->SetServingStatus(name, true);

  if (options_.local_workers > 0) {
    LocalWorkerOptions workers;
    workers.binary = options_.worker_binary;
    workers.count = options_.local_workers;
    workers.initial_backoff = options_.worker_initial_backoff;
    const std::string dial = LocalDialAddress(options_.listen, port_);
    const std::string host = Hostname();
    workers.args = [this, dial, host](int i) {
      std::vector<std::string> args = {"--server",    dial,
                                       "--device",    "cpu",
                                       "--data-dir",  options_.data_dir,
                                       "--worker-id", absl::StrCat(host, "-local-", i)};
      args.insert(args.end(), options_.worker_extra_args.begin(), options_.worker_extra_args.end());
      return args;
    };
    supervisor_ = std::make_unique<LocalWorkerSupervisor>(std::move(workers));
    s = supervisor_->Start();
    if (!s.ok()) return s;
  }
  Log(LogLevel::kInfo, "quantd serving",
      {{"address", address_},
       {"store", store_->Backend()},
       {"data_dir", options_.data_dir},
       {"lease_duration", absl::FormatDuration(options_.jobs.lease_duration)},
       {"local_workers", options_.local_workers}});
  return absl::OkStatus();
}

void QuantdServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (grpc_server_ != nullptr) {
    grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService();
    health->SetServingStatus(false);
    for (const char* name : kServiceNames) health->SetServingStatus(name, false);
  }
  // Wake long polls and watch streams so they return within the grace.
  notifier_.Shutdown();
  if (supervisor_ != nullptr) supervisor_->Stop();
  if (grpc_server_ != nullptr) {
    grpc_server_->Shutdown(
        std::chrono::system_clock::now() +
        std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.shutdown_grace)));
    grpc_server_->Wait();
  }
  if (reaper_ != nullptr) reaper_->Stop();
  if (!address_.empty()) Log(LogLevel::kInfo, "quantd stopped", {{"address", address_}});
}

QuantdServer::~QuantdServer() { Shutdown(); }

}  // namespace quantd::server
