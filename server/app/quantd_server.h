// QuantdServer: one running quantd frontend, assembled from its parts (job
// store, job logic, lease reaper, gRPC services with health and reflection,
// local worker supervisor). main.cc fills QuantdServerOptions from flags;
// tests start it in-process the same way.
#ifndef QUANTD_SERVER_APP_QUANTD_SERVER_H_
#define QUANTD_SERVER_APP_QUANTD_SERVER_H_

#include <grpcpp/server.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/common/clock.h"
#include "server/grpc/authenticator.h"
#include "server/grpc/quantization_service_impl.h"
#include "server/grpc/worker_service_impl.h"
#include "server/http/http_gateway.h"
#include "server/jobs/change_notifier.h"
#include "server/jobs/job_service.h"
#include "server/jobs/jobs_options.h"
#include "server/jobs/lease_reaper.h"
#include "server/jobs/lease_service.h"
#include "server/metrics/grpc_metrics_interceptor.h"
#include "server/metrics/quantd_metrics.h"
#include "server/store/job_store.h"
#include "server/supervisor/local_worker_supervisor.h"
#include "worker/common/status.h"

namespace quantd::server {

struct QuantdServerOptions {
  // host:port for gRPC; port 0 picks a free one (see QuantdServer::address).
  std::string listen = "127.0.0.1:50051";
  // Absolute directory for the default store, artifacts and worker scratch.
  std::string data_dir;
  // --store URI; empty means sqlite://<data_dir>/quantd.db.
  std::string store_uri;
  // Lease duration, attempts, backoff, spec checks, limits.
  JobsOptions jobs;
  // How often the reaper looks for expired leases; zero = lease / 4.
  absl::Duration reaper_interval = absl::ZeroDuration();
  // Largest request message accepted.
  int max_request_bytes = 16 << 20;
  // How long Shutdown() takes at most when every part cooperates: local
  // workers get it to finish (then SIGKILL), in-flight RPCs until the same
  // deadline. quantd's watchdog (main.cc) exits the process shortly after
  // it when a part does not stop.
  absl::Duration shutdown_grace = absl::Seconds(5);
  // Allow listening on a non-loopback address without auth_tokens_file
  // (--insecure); refused otherwise.
  bool insecure = false;

  // Prometheus /metrics address (host:port); no metrics server when empty.
  std::string metrics_listen;

  // The HTTP/JSON face (server/http, docs/http_api.md) on this host:port;
  // off when empty. Port 0 picks a free one (QuantdServer::http_port).
  // Same loopback rule as `listen`: elsewhere it needs auth_tokens_file or
  // insecure.
  std::string http_listen;
  // Comment lines on a quiet event stream this often.
  absl::Duration http_sse_heartbeat = absl::Seconds(15);
  // Served at GET /openapi.json when not empty.
  std::string http_openapi_json;

  // TLS: a server certificate and key enable TLS for every client and
  // worker; a client CA additionally requires (mTLS) and verifies client
  // certificates.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;

  // File of hashed bearer tokens (server/auth); authentication is off, and
  // every caller the anonymous admin, when empty.
  std::string auth_tokens_file;

  // Allowed URI roots (server/uri_policy, --allowed-uri-roots): inputs must
  // lie under them, outputs below a file root or <data_dir>/artifacts/. With
  // none, no input is allowed. Local workers get them as --allowed-roots.
  std::vector<std::string> allowed_uri_roots;

  // Local workers (--local-workers N); none when 0. Worker i runs on
  // local_worker_devices[i % size] (--local-worker-devices).
  int local_workers = 0;
  std::vector<std::string> local_worker_devices = {"cpu"};
  std::string worker_binary;
  // Appended to every local worker's arguments.
  std::vector<std::string> worker_extra_args;
  // "NAME=value" entries added to local workers' environment. With
  // authentication on, quantd also sets QUANTD_WORKER_TOKEN to a worker
  // credential it generates at start.
  std::vector<std::string> worker_extra_env;
  absl::Duration worker_initial_backoff = absl::Seconds(1);
};

class QuantdServer {
 public:
  // Opens the store, starts the reaper, the gRPC server and the local
  // workers. Errors name what failed (store, listen address, worker binary).
  // `clock` is not owned (nullptr: the real clock).
  static quantd::StatusOr<std::unique_ptr<QuantdServer>> Start(QuantdServerOptions options,
                                                               Clock* clock = nullptr);
  ~QuantdServer();  // Shutdown()

  // Stops accepting work: health turns NOT_SERVING, waiting LeaseJob and
  // WatchJob calls return, local workers are stopped, in-flight RPCs get
  // what is left of the shutdown grace, the reaper stops. Idempotent.
  void Shutdown();

  // What Shutdown() is doing now and the RPCs still in flight, for a
  // watchdog to log when a part does not stop, e.g. "waiting for in-flight
  // RPCs; in flight: quantd.v1.QuantizationService/CreateJob x1". Safe to
  // call from any thread while the server exists.
  std::string ShutdownProgress();

  // The bound gRPC address, e.g. "127.0.0.1:40123".
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  // The bound /metrics port (0 without --metrics-listen).
  int metrics_port() const;
  // The bound HTTP port (0 without --http-listen).
  int http_port() const;
  QuantdMetrics* metrics() { return metrics_.get(); }
  JobStore* store() { return store_.get(); }
  LocalWorkerSupervisor* supervisor() { return supervisor_.get(); }
  LeaseReaper* reaper() { return reaper_.get(); }

 private:
  QuantdServer() = default;
  quantd::Status Init(QuantdServerOptions options, Clock* clock);
  quantd::Status StartHttp();

  QuantdServerOptions options_;
  std::string address_;
  std::atomic<const char*> shutdown_phase_{"not shutting down"};
  InFlightRpcs in_flight_;
  int port_ = 0;
  bool shut_down_ = false;

  std::unique_ptr<JobStore> store_;
  ChangeNotifier notifier_;
  std::unique_ptr<QuantdMetrics> metrics_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<JobService> jobs_;
  std::unique_ptr<LeaseService> leases_;
  std::unique_ptr<LeaseReaper> reaper_;
  std::unique_ptr<QuantizationServiceImpl> quantization_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<http::HttpGateway> http_;
  std::unique_ptr<LocalWorkerSupervisor> supervisor_;
};

// The host part of a listen address ("0.0.0.0:50051" -> "0.0.0.0").
std::string ListenHost(const std::string& listen);

// Whether a listen address is reachable only from this host: 127.0.0.0/8,
// ::1 (also IPv4-mapped 127.x), "localhost", or a Unix socket ("unix:").
// Wildcards (0.0.0.0, [::], an empty host) and other names are not.
bool IsLoopbackListen(const std::string& listen);

// The address local workers dial for a server bound to `listen` on `port`:
// wildcard hosts become loopback.
std::string LocalDialAddress(const std::string& listen, int port);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_APP_QUANTD_SERVER_H_
