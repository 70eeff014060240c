// quantd: the quantization service's frontend. Stores jobs (SQLite or
// PostgreSQL), serves QuantizationService and WorkerService over gRPC, and
// optionally runs local workers. See docs/server.md for every flag.
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/app/quantd_server.h"
#include "server/common/json_log.h"
#include "server/common/repeated_flags.h"
#include "server/openapi/openapi.h"
#include "server/supervisor/worker_devices.h"
#include "worker/common/dashed_flags.h"
#include "worker/common/status.h"
#include "worker/job_spec/resolve_job.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "gRPC address (host:port); port 0 picks a free port");
ABSL_FLAG(std::string, store, "",
          "job store URI: sqlite:///path/to/quantd.db (default sqlite://<data-dir>/quantd.db)");
ABSL_FLAG(std::string, data_dir, "./quantd-data",
          "directory for the default store, artifacts (<data-dir>/artifacts/<id>) and scratch");
ABSL_FLAG(int, local_workers, 0,
          "worker processes to spawn and supervise on this host (0 with --local-worker-devices "
          "other than cpu: one per device)");
ABSL_FLAG(std::string, local_worker_devices, "cpu",
          "devices of the local workers: cpu, gpus (one worker per visible NVIDIA GPU), or a "
          "list such as cuda:0,cuda:1 (workers take them round robin)");
ABSL_FLAG(std::string, worker_binary, "",
          "worker executable for --local-workers (default: $QUANTD_WORKER_BINARY, else "
          "quantd-worker next to quantd, else ../worker/quantd-worker as laid out by Bazel)");
// --worker-arg and --local-worker-env are repeatable: main() takes every
// occurrence out of argv (server/common/repeated_flags.h) before Abseil
// parses the rest. They are declared here for --help.
ABSL_FLAG(std::string, worker_arg, "",
          "one extra argument for every local worker; repeat the flag for more (a comma stays "
          "inside the argument)");
ABSL_FLAG(absl::Duration, lease_duration, absl::Seconds(60),
          "how long a worker's lease lasts without a heartbeat");
ABSL_FLAG(int, max_attempts, 3, "leases per job before LEASE_EXPIRED_MAX_ATTEMPTS (default)");
ABSL_FLAG(absl::Duration, requeue_backoff, absl::Seconds(1),
          "delay before an expired job can be leased again; doubles per attempt");
ABSL_FLAG(absl::Duration, max_requeue_backoff, absl::Minutes(1), "cap of --requeue-backoff");
ABSL_FLAG(int, max_request_bytes, 16 << 20, "largest gRPC request accepted");
ABSL_FLAG(absl::Duration, spec_check_budget, absl::Seconds(2),
          "time a CreateJob's engine check of the spec may take before the spec is refused as "
          "too costly to validate (0: no limit)");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(5),
          "on SIGTERM/SIGINT, how long local workers and in-flight RPCs get before quantd exits; "
          "a part that does not stop is abandoned shortly after (a second signal exits at once)");
ABSL_FLAG(std::string, port_file, "",
          "once serving, write the bound gRPC host:port (line 1), /metrics port (line 2) and HTTP "
          "port (line 3; 0 when off) here");
ABSL_FLAG(std::string, metrics_listen, "",
          "serve Prometheus /metrics on this host:port (off when empty)");
ABSL_FLAG(std::string, http_listen, "",
          "serve the HTTP/JSON face (docs/http_api.md) on this host:port; port 0 picks a free "
          "port (off when empty). Plain HTTP: off loopback it needs --auth-tokens or --insecure");
ABSL_FLAG(absl::Duration, http_sse_heartbeat, absl::Seconds(15),
          "how often a quiet HTTP event stream (WatchJob) gets a comment line");
ABSL_FLAG(std::string, tls_cert, "", "PEM server certificate (chain); with --tls-key enables TLS");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle; when set, clients and workers must present a certificate it signed "
          "(mTLS)");
ABSL_FLAG(std::string, auth_tokens, "",
          "file of hashed bearer tokens (<sha256 hex> <tenant> <submitter|admin|worker> per line); "
          "authentication is off when empty");
ABSL_FLAG(bool, insecure, false,
          "allow --listen on a non-loopback address without --auth-tokens (refused otherwise: "
          "anyone reaching the port could act as any tenant and as a worker)");
ABSL_FLAG(std::vector<std::string>, allowed_uri_roots, {},
          "comma-separated roots (file:///dir or /dir, https://host/prefix, hf://ORG/; a {tenant} "
          "path segment is the job's tenant) that job inputs must lie under and outputs may go "
          "below; outputs may always go below <data-dir>/artifacts/. Default: none (no job may "
          "read an input). Local workers get the same roots");
ABSL_FLAG(int, max_queued_per_tenant, 1000,
          "QUEUED jobs per tenant before RESOURCE_EXHAUSTED (0: no limit)");
ABSL_FLAG(int, max_concurrent_watches, 1000,
          "WatchJob streams this frontend serves at once before RESOURCE_EXHAUSTED (0: no limit)");
ABSL_FLAG(int, max_watches_per_tenant, 100,
          "WatchJob streams one tenant may hold on this frontend before RESOURCE_EXHAUSTED "
          "(0: no limit)");
ABSL_FLAG(std::string, local_worker_env, "",
          "one NAME=value entry added to local workers' environment; repeat the flag for more (a "
          "comma stays inside the value)");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error");

namespace quantd::server {
namespace {

std::string SelfDirectory() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, n);
  return path.substr(0, path.rfind('/'));
}

std::string ResolveWorkerBinary(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("QUANTD_WORKER_BINARY"); env != nullptr && *env != '\0') {
    return env;
  }
  const std::string dir = SelfDirectory();
  for (const std::string& candidate : {dir + "/quantd-worker", dir + "/../worker/quantd-worker"}) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return dir + "/quantd-worker";
}

std::string Absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  std::string rel = path;
  while (rel.rfind("./", 0) == 0) rel = rel.substr(2);
  return rel.empty() || rel == "." ? std::string(cwd) : absl::StrCat(cwd, "/", rel);
}

LogLevel ParseLogLevel(const std::string& name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "warning") return LogLevel::kWarning;
  if (name == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

// How long after --shutdown-grace the watchdog waits before it abandons a
// shutdown that did not finish.
constexpr absl::Duration kWatchdogMargin = absl::Seconds(2);

// Ends the process when a shutdown does not finish: at grace + margin, or
// at once on a second SIGTERM/SIGINT, logging what was still running.
// Disarm() (the shutdown finished) turns it into a no-op.
class ShutdownWatchdog {
 public:
  ShutdownWatchdog(QuantdServer* server, sigset_t signals, absl::Duration grace)
      : state_(std::make_shared<State>()) {
    state_->server = server;
    // Detached: it may stay blocked in sigtimedwait until the process
    // exits, so it owns its state rather than pointing into this object.
    std::thread([state = state_, signals, grace] { Watch(*state, signals, grace); }).detach();
  }

  // Must run before the server is destroyed.
  void Disarm() {
    absl::MutexLock lock(&state_->mu);
    state_->disarmed = true;
  }

 private:
  struct State {
    absl::Mutex mu;
    bool disarmed ABSL_GUARDED_BY(mu) = false;
    QuantdServer* server = nullptr;
  };

  static void Watch(State& state, sigset_t signals, absl::Duration grace) {
    const absl::Time deadline = absl::Now() + grace + kWatchdogMargin;
    while (true) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) break;
      timespec timeout = absl::ToTimespec(left);
      const int signal_number = sigtimedwait(&signals, nullptr, &timeout);
      if (signal_number > 0) {
        Abandon(state, "second signal during shutdown; exiting now",
                {{"signal", strsignal(signal_number)}});
        return;
      }
      if (errno != EINTR) break;  // EAGAIN: the deadline passed
    }
    Abandon(state, "shutdown did not finish within --shutdown-grace; exiting now",
            {{"grace", absl::FormatDuration(grace)},
             {"margin", absl::FormatDuration(kWatchdogMargin)}});
  }

  static void Abandon(State& state, const char* message, nlohmann::json fields) {
    absl::MutexLock lock(&state.mu);
    if (state.disarmed) return;
    fields["did_not_stop"] = state.server->ShutdownProgress();
    Log(LogLevel::kError, message, fields);
    _exit(1);
  }

  std::shared_ptr<State> state_;
};

int Run(const std::vector<std::string>& worker_args, const std::vector<std::string>& worker_env) {
  SetMinLogLevel(ParseLogLevel(absl::GetFlag(FLAGS_log_level)));
  // Signals are taken synchronously by this thread (sigwait below); block
  // them before any other thread exists so none of those catches them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  QuantdServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.data_dir = Absolute(absl::GetFlag(FLAGS_data_dir));
  options.store_uri = absl::GetFlag(FLAGS_store);
  {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    auto plan = quantd::server::PlanLocalWorkers(
        absl::GetFlag(FLAGS_local_worker_devices), absl::GetFlag(FLAGS_local_workers),
        quantd::server::VisibleGpuDevices(visible ? std::optional<std::string>(visible)
                                                  : std::nullopt));
    if (!plan.ok()) {
      Log(LogLevel::kError, std::string(plan.status().message()));
      return 2;
    }
    options.local_workers = plan->count;
    options.local_worker_devices = plan->devices;
  }
  options.worker_binary = ResolveWorkerBinary(absl::GetFlag(FLAGS_worker_binary));
  options.worker_extra_args = worker_args;
  options.max_request_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  options.shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.http_listen = absl::GetFlag(FLAGS_http_listen);
  options.http_sse_heartbeat = absl::GetFlag(FLAGS_http_sse_heartbeat);
  if (options.http_sse_heartbeat < absl::Milliseconds(100)) {
    Log(LogLevel::kError, "--http-sse-heartbeat must be at least 100ms");
    return 2;
  }
  if (!options.http_listen.empty()) {
    // Generated from the compiled descriptors; a rule it cannot map is a
    // bug in the protos, which //server/openapi:openapi_test catches first.
    try {
      options.http_openapi_json = quantd::openapi::QuantizationServiceDocument();
    } catch (const std::invalid_argument& e) {
      Log(LogLevel::kError, std::string("the OpenAPI document: ") + e.what());
      return 1;
    }
  }
  options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  options.auth_tokens_file = absl::GetFlag(FLAGS_auth_tokens);
  options.insecure = absl::GetFlag(FLAGS_insecure);
  options.allowed_uri_roots = absl::GetFlag(FLAGS_allowed_uri_roots);
  options.worker_extra_env = worker_env;
  JobsOptions& jobs = options.jobs;
  jobs.lease_duration = absl::GetFlag(FLAGS_lease_duration);
  jobs.default_max_attempts = absl::GetFlag(FLAGS_max_attempts);
  jobs.requeue_backoff = absl::GetFlag(FLAGS_requeue_backoff);
  jobs.max_requeue_backoff = absl::GetFlag(FLAGS_max_requeue_backoff);
  jobs.max_queued_per_tenant = absl::GetFlag(FLAGS_max_queued_per_tenant);
  jobs.max_concurrent_watches = absl::GetFlag(FLAGS_max_concurrent_watches);
  jobs.max_watches_per_tenant = absl::GetFlag(FLAGS_max_watches_per_tenant);
  const auto spec_check_budget =
      std::chrono::milliseconds(absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_spec_check_budget)));
  jobs.spec_check = [spec_check_budget](const v1::JobSpec& spec,
                                        std::vector<std::string>* warnings) {
    return quantd::job_spec::CheckJobSpec(spec, warnings, spec_check_budget);
  };
  if (jobs.lease_duration < absl::Milliseconds(100) || jobs.default_max_attempts < 1) {
    Log(LogLevel::kError, "--lease-duration must be at least 100ms and --max-attempts at least 1");
    return 2;
  }

  quantd::StatusOr<std::unique_ptr<QuantdServer>> server = QuantdServer::Start(options);
  if (!server.ok()) {
    Log(LogLevel::kError, "quantd could not start", {{"error", server.status().ToString()}});
    return 1;
  }
  if (const std::string port_file = absl::GetFlag(FLAGS_port_file); !port_file.empty()) {
    // Line 1: the gRPC address; line 2: the /metrics port; line 3: the
    // HTTP port (0 when off).
    std::ofstream(port_file + ".tmp") << (*server)->address() << "\n"
                                      << (*server)->metrics_port() << "\n"
                                      << (*server)->http_port() << "\n";
    std::rename((port_file + ".tmp").c_str(), port_file.c_str());
  }
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  Log(LogLevel::kInfo, "shutting down",
      {{"signal", strsignal(signal_number)},
       {"grace", absl::FormatDuration(options.shutdown_grace)}});
  // The signals stay blocked: the watchdog takes a second one itself.
  ShutdownWatchdog watchdog(server->get(), stop_signals, options.shutdown_grace);
  (*server)->Shutdown();
  watchdog.Disarm();
  return 0;
}

}  // namespace
}  // namespace quantd::server

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "quantd --listen HOST:PORT --store URI --data-dir DIR [--local-workers N]");
  std::vector<std::string> raw(argv, argv + argc);
  auto worker_args = quantd::server::TakeRepeatedFlag(raw, "worker-arg");
  auto worker_env = quantd::server::TakeRepeatedFlag(raw, "local-worker-env");
  for (const auto* taken : {&worker_args, &worker_env}) {
    if (!taken->ok()) {
      std::fprintf(stderr, "quantd: %s\n", std::string(taken->status().message()).c_str());
      return 2;
    }
  }
  std::vector<char*> rest;
  for (std::string& arg : raw) rest.push_back(arg.data());
  quantd::DashedFlagArgv args(static_cast<int>(rest.size()), rest.data());
  absl::ParseCommandLine(args.argc(), args.argv());
  return quantd::server::Run(*worker_args, *worker_env);
}
