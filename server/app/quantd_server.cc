#include "server/app/quantd_server.h"

#include <arpa/inet.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "server/auth/token_authenticator.h"
#include "server/common/errors.h"
#include "server/common/json_log.h"
#include "server/metrics/grpc_metrics_interceptor.h"
#include "server/store/open_job_store.h"
#include "server/uri_policy/uri_policy.h"
#include "worker/common/status.h"
#include "worker/io/uri/uri_roots.h"

namespace quantd::server {
namespace {

constexpr const char* kServiceNames[] = {"quantd.v1.QuantizationService",
                                         "quantd.v1.WorkerService"};

quantd::Status MakeDirs(const std::string& path) {
  std::string partial;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      partial = path.substr(0, i);
      if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
        return MakeError(quantd::StatusCode::kFailedPrecondition, "DATA_DIR_UNUSABLE",
                         absl::StrCat("cannot create ", partial, ": ", strerror(errno)));
      }
    }
  }
  return quantd::OkStatus();
}

quantd::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    return MakeError(quantd::StatusCode::kFailedPrecondition, "TLS_FILE_UNREADABLE",
                     absl::StrCat("cannot read the ", what, " ", path));
  }
  return text.str();
}

quantd::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeCredentials(
    const QuantdServerOptions& options) {
  if (options.tls_cert_file.empty() && options.tls_key_file.empty()) {
    if (!options.tls_client_ca_file.empty()) {
      return MakeError(quantd::StatusCode::kInvalidArgument, "TLS_INCOMPLETE",
                       "--tls-client-ca needs --tls-cert and --tls-key");
    }
    return grpc::InsecureServerCredentials();
  }
  if (options.tls_cert_file.empty() || options.tls_key_file.empty()) {
    return MakeError(quantd::StatusCode::kInvalidArgument, "TLS_INCOMPLETE",
                     "TLS needs both --tls-cert and --tls-key");
  }
  QD_ASSIGN_OR_RETURN(auto cert, ReadPem(options.tls_cert_file, "TLS certificate"));
  QD_ASSIGN_OR_RETURN(auto key, ReadPem(options.tls_key_file, "TLS key"));
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({key, cert});
  if (!options.tls_client_ca_file.empty()) {
    QD_ASSIGN_OR_RETURN(auto ca, ReadPem(options.tls_client_ca_file, "client CA"));
    ssl.pem_root_certs = ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

std::string RandomToken() {
  unsigned char bytes[32];
  RAND_bytes(bytes, sizeof(bytes));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
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

bool IsLoopbackListen(const std::string& listen) {
  if (absl::StartsWith(listen, "unix:") || absl::StartsWith(listen, "unix-abstract:")) return true;
  std::string host = ListenHost(listen);
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

std::string LocalDialAddress(const std::string& listen, int port) {
  std::string host = ListenHost(listen);
  if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::") host = "127.0.0.1";
  return absl::StrCat(host, ":", port);
}

quantd::StatusOr<std::unique_ptr<QuantdServer>> QuantdServer::Start(QuantdServerOptions options,
                                                                    Clock* clock) {
  std::unique_ptr<QuantdServer> server(new QuantdServer());
  quantd::Status started =
      server->Init(std::move(options), clock != nullptr ? clock : Clock::Real());
  if (!started.ok()) {
    server->Shutdown();
    return started;
  }
  return server;
}

quantd::Status QuantdServer::Init(QuantdServerOptions options, Clock* clock) {
  options_ = std::move(options);
  if (options_.data_dir.empty() || options_.data_dir[0] != '/') {
    return MakeError(quantd::StatusCode::kInvalidArgument, "DATA_DIR_UNUSABLE",
                     absl::StrCat("the data directory must be an absolute path, got \"",
                                  options_.data_dir, "\""));
  }
  if (!IsLoopbackListen(options_.listen) && options_.auth_tokens_file.empty() &&
      !options_.insecure) {
    return MakeError(
        quantd::StatusCode::kFailedPrecondition, "INSECURE_LISTEN",
        absl::StrCat("refusing to listen on ", options_.listen,
                     " without --auth-tokens: anyone who can reach that address could submit, "
                     "read and cancel every job and act as a worker. Give --auth-tokens FILE, "
                     "listen on a loopback address (127.0.0.1, [::1], localhost), or pass "
                     "--insecure to accept this (e.g. behind a proxy that authenticates)"));
  }
  QD_RETURN_IF_ERROR(MakeDirs(options_.data_dir + "/artifacts"));
  options_.jobs.data_dir = options_.data_dir;
  if (options_.store_uri.empty()) {
    options_.store_uri = absl::StrCat("sqlite://", options_.data_dir, "/quantd.db");
  }

  // The URI policy always applies: with no roots, jobs read nothing and
  // write only below <data-dir>/artifacts/.
  QD_ASSIGN_OR_RETURN(UriPolicy policy,
                      UriPolicy::Create(options_.allowed_uri_roots, options_.data_dir));
  options_.jobs.uri_policy = [policy = policy](const v1::JobSpec& spec, const std::string& tenant) {
    return policy.CheckSpec(spec, tenant);
  };
  const io::UriRoots& roots = policy.uri_roots();
  auto join = [](const std::vector<std::string>& items) {
    return items.empty() ? std::string("none") : absl::StrJoin(items, ",");
  };
  Log(roots.InputRoots().empty() ? LogLevel::kWarning : LogLevel::kInfo, "uri policy",
      {{"input_roots", join(roots.InputRoots())},
       {"output_roots", join(roots.OutputRoots())},
       {"tenant_roots", join(roots.TenantRoots())},
       {"artifacts", roots.artifacts_dir() + "/"},
       {"note", roots.InputRoots().empty()
                    ? "no --allowed-uri-roots: every job naming a model or dataset is refused"
                    : "inputs under input_roots; outputs below output_roots"}});
  QD_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                      MakeCredentials(options_));
  std::string worker_token;
  if (!options_.auth_tokens_file.empty()) {
    QD_ASSIGN_OR_RETURN(auto tokens, TokenAuthenticator::FromFile(options_.auth_tokens_file));
    if (options_.local_workers > 0) {
      // Local workers get a credential that lives as long as this process.
      worker_token = RandomToken();
      (tokens)->AddToken(worker_token, Caller{"", Role::kWorker});
    }
    auth_ = std::move(tokens);
  } else {
    auth_ = std::make_unique<AnonymousAuthenticator>();
  }

  QD_ASSIGN_OR_RETURN(std::unique_ptr<JobStore> store, OpenJobStore(options_.store_uri));
  store_ = std::move(store);
  metrics_ = std::make_unique<QuantdMetrics>(store_.get(), clock, options_.jobs.lease_duration);
  if (!options_.metrics_listen.empty()) {
    QD_RETURN_IF_ERROR(metrics_->Serve(options_.metrics_listen));
  }
  jobs_ =
      std::make_unique<JobService>(store_.get(), clock, &notifier_, metrics_.get(), options_.jobs);
  leases_ = std::make_unique<LeaseService>(store_.get(), clock, &notifier_, metrics_.get(),
                                           options_.jobs);
  absl::Duration interval = options_.reaper_interval;
  if (interval <= absl::ZeroDuration()) interval = options_.jobs.lease_duration / 4;
  reaper_ = std::make_unique<LeaseReaper>(leases_.get(), clock, interval);
  reaper_->Start();

  quantization_service_ = std::make_unique<QuantizationServiceImpl>(jobs_.get(), auth_.get());
  worker_service_ = std::make_unique<WorkerServiceImpl>(leases_.get(), auth_.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen, credentials, &port_);
  builder.SetMaxReceiveMessageSize(options_.max_request_bytes);
  builder.RegisterService(quantization_service_.get());
  builder.RegisterService(worker_service_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(
      std::make_unique<GrpcMetricsInterceptorFactory>(metrics_.get(), &in_flight_));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  grpc_server_ = builder.BuildAndStart();
  if (grpc_server_ == nullptr || port_ == 0) {
    return MakeError(
        quantd::StatusCode::kUnavailable, "LISTEN_FAILED",
        absl::StrCat("cannot listen on ", options_.listen, " (in use, or not a local address?)"));
  }
  address_ = absl::StrCat(ListenHost(options_.listen), ":", port_);
  grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService();
  health->SetServingStatus(true);
  for (const char* name : kServiceNames) health->SetServingStatus(name, true);
  QD_RETURN_IF_ERROR(StartHttp());

  if (options_.local_workers > 0) {
    LocalWorkerOptions workers;
    workers.binary = options_.worker_binary;
    workers.count = options_.local_workers;
    workers.initial_backoff = options_.worker_initial_backoff;
    // Workers finish their job within the shutdown grace, or are killed.
    workers.stop_grace = options_.shutdown_grace;
    workers.extra_env = options_.worker_extra_env;
    if (!worker_token.empty()) workers.extra_env.push_back("QUANTD_WORKER_TOKEN=" + worker_token);
    const std::string dial = LocalDialAddress(options_.listen, port_);
    const std::string host = Hostname();
    workers.args = [this, dial, host](int i) {
      const std::vector<std::string>& devices = options_.local_worker_devices;
      const std::string device = devices.empty() ? "cpu" : devices[i % devices.size()];
      std::vector<std::string> args = {"--server",    dial,
                                       "--device",    device,
                                       "--data-dir",  options_.data_dir,
                                       "--worker-id", absl::StrCat(host, "-local-", i)};
      // The worker enforces the same roots itself, with the same data dir.
      if (!options_.allowed_uri_roots.empty()) {
        args.push_back("--allowed-roots");
        args.push_back(absl::StrJoin(options_.allowed_uri_roots, ","));
      }
      args.insert(args.end(), options_.worker_extra_args.begin(), options_.worker_extra_args.end());
      return args;
    };
    supervisor_ = std::make_unique<LocalWorkerSupervisor>(std::move(workers));
    QD_RETURN_IF_ERROR(supervisor_->Start());
  }
  Log(LogLevel::kInfo, "quantd serving",
      {{"address", address_},
       {"store", store_->Backend()},
       {"tls", options_.tls_cert_file.empty()        ? "off"
               : options_.tls_client_ca_file.empty() ? "tls"
                                                     : "mtls"},
       {"auth", options_.auth_tokens_file.empty() ? "off" : "bearer tokens"},
       {"insecure", !options_.auth_tokens_file.empty()  ? "no"
                    : IsLoopbackListen(options_.listen) ? "loopback only"
                                                        : "yes (--insecure)"},
       {"metrics_port", metrics_port()},
       {"data_dir", options_.data_dir},
       {"lease_duration", absl::FormatDuration(options_.jobs.lease_duration)},
       {"local_workers", options_.local_workers}});
  return quantd::OkStatus();
}

quantd::Status QuantdServer::StartHttp() {
  if (options_.http_listen.empty()) return quantd::OkStatus();
  if (!IsLoopbackListen(options_.http_listen) && options_.auth_tokens_file.empty() &&
      !options_.insecure) {
    return MakeError(quantd::StatusCode::kFailedPrecondition, "INSECURE_LISTEN",
                     absl::StrCat("refusing to serve HTTP on ", options_.http_listen,
                                  " without --auth-tokens (see --listen); give --auth-tokens, a "
                                  "loopback address, or --insecure"));
  }
  // Through the server's own in-process channel, every HTTP request passes
  // the same interceptors, authentication and limits as a gRPC one.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(options_.max_request_bytes);
  http::HttpGatewayOptions http;
  http.listen = options_.http_listen;
  http.max_body_bytes = static_cast<size_t>(options_.max_request_bytes);
  http.heartbeat = options_.http_sse_heartbeat;
  http.openapi_json = options_.http_openapi_json;
  QD_ASSIGN_OR_RETURN(http_,
                      http::HttpGateway::Start(
                          grpc_server_->InProcessChannel(args),
                          google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
                              v1::QuantizationService::service_full_name()),
                          std::move(http)));
  Log(LogLevel::kInfo, "quantd serving HTTP",
      {{"address", absl::StrCat(ListenHost(options_.http_listen), ":", http_->port())},
       {"openapi", options_.http_openapi_json.empty() ? "off" : "/openapi.json"}});
  return quantd::OkStatus();
}

void QuantdServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // One deadline for everything: local workers and in-flight RPCs share
  // the grace rather than taking one each.
  const auto deadline =
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.shutdown_grace));
  shutdown_phase_ = "turning health NOT_SERVING";
  if (grpc_server_ != nullptr) {
    grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService();
    health->SetServingStatus(false);
    for (const char* name : kServiceNames) health->SetServingStatus(name, false);
  }
  // Wake long polls and watch streams so they return within the grace.
  notifier_.Shutdown();
  // Before the gRPC server: the HTTP face's calls go through it.
  shutdown_phase_ = "stopping the HTTP face";
  if (http_ != nullptr) http_->Stop();
  shutdown_phase_ = "stopping local workers";
  if (supervisor_ != nullptr) supervisor_->Stop();
  shutdown_phase_ = "waiting for in-flight RPCs";
  if (grpc_server_ != nullptr) {
    grpc_server_->Shutdown(deadline);
    grpc_server_->Wait();
  }
  shutdown_phase_ = "stopping the lease reaper";
  if (reaper_ != nullptr) reaper_->Stop();
  shutdown_phase_ = "stopped";
  if (!address_.empty()) Log(LogLevel::kInfo, "quantd stopped", {{"address", address_}});
}

std::string QuantdServer::ShutdownProgress() {
  std::string progress = shutdown_phase_.load();
  if (std::string rpcs = in_flight_.Describe(); !rpcs.empty()) {
    absl::StrAppend(&progress, "; in flight: ", rpcs);
  }
  return progress;
}

QuantdServer::~QuantdServer() { Shutdown(); }

int QuantdServer::http_port() const { return http_ != nullptr ? http_->port() : 0; }

int QuantdServer::metrics_port() const { return metrics_ != nullptr ? metrics_->port() : 0; }

}  // namespace quantd::server
