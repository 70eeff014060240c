// quantd-worker: leases quantization jobs from quantd and runs them on the
// engine, one at a time. Start one per GPU (or one for the CPU):
//
//   quantd-worker --server 127.0.0.1:50051 --device cpu --data-dir ./quantd-data
//
// SIGTERM / SIGINT stop leasing; the running job finishes first. See
// docs/worker.md for every flag.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "worker/common/cpu_budget.h"
#include "worker/common/crash_handler.h"
#include "worker/common/dashed_flags.h"
#include "worker/common/device.h"
#include "worker/io/uri/hf_hub.h"
#include "worker/io/uri/s3_client.h"
#include "worker/io/uri/uri_roots.h"
#include "worker/pipeline/activation_offload.h"
#include "worker/runner/lease_loop.h"
#include "worker/runner/pipeline_executor.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "quantd address (HOST:PORT) to lease jobs from");
ABSL_FLAG(std::string, device, "cpu", "device to run on: cpu or cuda:N (cuda needs a CUDA build)");
ABSL_FLAG(std::string, activation_offload, "auto",
          "on a GPU, where calibration activations live between blocks: auto (host memory "
          "when they and a block's working set need more than three quarters of the GPU's "
          "free memory), host or device");
ABSL_FLAG(std::string, data_dir, "./quantd-data", "scratch space and download cache");
ABSL_FLAG(std::string, worker_id, "", "unique worker id (default HOST-PID)");
ABSL_FLAG(std::vector<std::string>, allowed_roots, {},
          "comma-separated roots (file:///dir or /dir, https://host/prefix, hf://ORG/; a "
          "{tenant} path segment is the job's tenant) that inputs must lie under and outputs "
          "may go below; outputs may always go below <data-dir>/artifacts/. Default: none (no "
          "input is allowed)");
ABSL_FLAG(std::string, hf_cache, "", "Hugging Face hub cache for hf:// URIs");
ABSL_FLAG(std::string, hf_endpoint, "",
          "the Hugging Face Hub for hf:// models (default $HF_ENDPOINT, else "
          "https://huggingface.co)");
ABSL_FLAG(bool, hf_offline, false,
          "never contact the Hub: hf:// models come from the cache alone (also $HF_HUB_OFFLINE=1)");
ABSL_FLAG(std::string, s3_endpoint, "",
          "the S3 endpoint for s3:// models, data and outputs (default $AWS_ENDPOINT_URL_S3, "
          "$AWS_ENDPOINT_URL, else https://s3.<$AWS_REGION>.amazonaws.com)");
ABSL_FLAG(std::string, s3_credentials_file, "",
          "an AWS shared-credentials file (a mounted secret) for s3:// (default "
          "$AWS_ACCESS_KEY_ID / $AWS_SECRET_ACCESS_KEY / $AWS_SESSION_TOKEN)");
ABSL_FLAG(std::string, hf_token_file, "",
          "a file (a mounted secret) holding the Hub token for private or gated models "
          "(default $HF_TOKEN)");
ABSL_FLAG(int, lease_wait_seconds, 10, "long-poll duration of each LeaseJob call");
ABSL_FLAG(int, max_jobs, 0, "exit after this many jobs (0: run until stopped)");
ABSL_FLAG(int, threads, 0,
          "intra-op threads for LibTorch (0: one per CPU the process may use: its affinity "
          "and cgroup CPU quota)");
ABSL_FLAG(bool, keep_scratch, false, "keep each job's scratch directory after it ends");
ABSL_FLAG(std::string, token_file, "",
          "file holding the worker's bearer token (default: $QUANTD_WORKER_TOKEN, else none)");
ABSL_FLAG(std::string, tls_ca, "", "PEM roots to verify quantd's TLS certificate (enables TLS)");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate for mTLS");
ABSL_FLAG(std::string, tls_key, "", "PEM client private key for mTLS");

namespace {

std::atomic<quantd::worker::LeaseLoop*> g_loop{nullptr};

void OnSignal(int) {
  if (auto* loop = g_loop.load()) loop->Stop();
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

// Insecure unless --tls-ca is given; mTLS when a client cert and key are too.
std::shared_ptr<grpc::ChannelCredentials> MakeCredentials() {
  if (absl::GetFlag(FLAGS_tls_ca).empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  if (!ReadFile(absl::GetFlag(FLAGS_tls_ca), &ssl.pem_root_certs)) return nullptr;
  if (!absl::GetFlag(FLAGS_tls_cert).empty() &&
      (!ReadFile(absl::GetFlag(FLAGS_tls_cert), &ssl.pem_cert_chain) ||
       !ReadFile(absl::GetFlag(FLAGS_tls_key), &ssl.pem_private_key)))
    return nullptr;
  return grpc::SslCredentials(ssl);
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (const unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string JoinOrNone(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ",") + s;
  return out.empty() ? "none" : out;
}

// What jobs may read and write, said once at startup.
void LogUriPolicy(const quantd::io::UriRoots& roots) {
  std::cerr << "{\"component\":\"worker\",\"msg\":\"uri policy\",\"input_roots\":"
            << JsonString(JoinOrNone(roots.InputRoots()))
            << ",\"output_roots\":" << JsonString(JoinOrNone(roots.OutputRoots()))
            << ",\"tenant_roots\":" << JsonString(JoinOrNone(roots.TenantRoots()))
            << ",\"artifacts\":" << JsonString(roots.artifacts_dir() + "/")
            << ",\"inputs_allowed\":" << (roots.InputRoots().empty() ? "false" : "true") << "}"
            << std::endl;
}

std::string DefaultWorkerId() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + "-" + std::to_string(getpid());
}

}  // namespace

int main(int argc, char** argv) {
  quantd::InstallCrashHandler("quantd-worker");
  absl::SetProgramUsageMessage(
      "Leases quantization jobs from quantd and runs them.\n"
      "usage: quantd-worker --server HOST:PORT [--device cpu] [--data-dir DIR]");
  quantd::DashedFlagArgv args(argc, argv);
  absl::ParseCommandLine(args.argc(), args.argv());

  // The device is chosen before LibTorch runs any kernel.
  auto parsed_device = quantd::ParseEngineDevice(absl::GetFlag(FLAGS_device), "--device");
  if (!parsed_device.ok()) {
    std::cerr << "quantd-worker: " << parsed_device.status().message() << "\n";
    return 2;
  }
  const std::string device = quantd::DeviceName(*parsed_device);
  // Debian's LibTorch starts with one OpenMP thread whatever the core count,
  // so the default is set explicitly: the CPUs a pod's limit and cpuset give
  // it, not the node's cores (common/cpu_budget.h).
  int threads = absl::GetFlag(FLAGS_threads);
  std::string threads_why = "--threads";
  if (threads <= 0) {
    const quantd::CpuBudget budget = quantd::AvailableCpus();
    threads = budget.cpus;
    threads_why = budget.reason;
  }
  at::set_num_threads(threads);

  std::error_code ec;
  const std::string data_dir =
      std::filesystem::absolute(absl::GetFlag(FLAGS_data_dir), ec).lexically_normal().string();
  std::filesystem::create_directories(data_dir, ec);
  if (ec) {
    std::cerr << "quantd-worker: cannot create --data-dir " << data_dir << ": " << ec.message()
              << "\n";
    return 2;
  }

  quantd::worker::PipelineExecutorOptions exec_opt;
  exec_opt.data_dir = data_dir;
  std::filesystem::create_directories(data_dir + "/artifacts", ec);
  auto roots = quantd::io::UriRoots::Create(absl::GetFlag(FLAGS_allowed_roots),
                                            data_dir + "/artifacts", "--allowed-roots");
  if (!roots.ok()) {
    std::cerr << "quantd-worker: --allowed-roots: " << roots.status().message() << "\n";
    return 2;
  }
  exec_opt.roots = std::make_shared<const quantd::io::UriRoots>(*std::move(roots));
  LogUriPolicy(*exec_opt.roots);
  exec_opt.hf_cache_dir = absl::GetFlag(FLAGS_hf_cache);
  auto hub = quantd::io::HubAccessFromEnvironment(absl::GetFlag(FLAGS_hf_endpoint),
                                                  absl::GetFlag(FLAGS_hf_offline),
                                                  absl::GetFlag(FLAGS_hf_token_file));
  if (!hub.ok()) {
    std::cerr << "quantd-worker: " << hub.status().message() << "\n";
    return 2;
  }
  exec_opt.hf_endpoint = hub->endpoint;
  exec_opt.hf_token = hub->token;
  auto s3 = quantd::io::S3OptionsFromEnvironment(absl::GetFlag(FLAGS_s3_endpoint),
                                                 absl::GetFlag(FLAGS_s3_credentials_file));
  if (!s3.ok()) {
    std::cerr << "quantd-worker: " << s3.status().message() << "\n";
    return 2;
  }
  exec_opt.s3 = *s3;
  exec_opt.keep_scratch = absl::GetFlag(FLAGS_keep_scratch);
  exec_opt.device = device;
  auto offload = quantd::pipeline::ParseActivationOffload(absl::GetFlag(FLAGS_activation_offload));
  if (!offload.ok()) {
    std::cerr << "quantd-worker: --activation-offload: " << offload.status().message() << "\n";
    return 2;
  }
  exec_opt.activation_offload = *offload;
  quantd::worker::PipelineExecutor executor(exec_opt);

  quantd::worker::LeaseLoopOptions loop_opt;
  loop_opt.worker_id =
      absl::GetFlag(FLAGS_worker_id).empty() ? DefaultWorkerId() : absl::GetFlag(FLAGS_worker_id);
  loop_opt.device = device;
  if (!parsed_device->is_cpu()) {
    const c10::Device gpu = *parsed_device;
    loop_opt.describe_memory = [gpu](quantd::v1::WorkerInfo* info) {
      if (auto m = quantd::QueryDeviceMemory(gpu)) {
        info->set_gpu_memory_total_bytes(m->total_bytes);
        info->set_gpu_memory_used_bytes(m->used_bytes);
      }
    };
  }
  loop_opt.lease_wait = std::chrono::seconds(absl::GetFlag(FLAGS_lease_wait_seconds));
  loop_opt.max_jobs = absl::GetFlag(FLAGS_max_jobs);

  std::string token;
  if (!absl::GetFlag(FLAGS_token_file).empty()) {
    if (!ReadFile(absl::GetFlag(FLAGS_token_file), &token)) {
      std::cerr << "quantd-worker: cannot read --token-file " << absl::GetFlag(FLAGS_token_file)
                << "\n";
      return 2;
    }
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' '))
      token.pop_back();
  } else if (const char* env = std::getenv("QUANTD_WORKER_TOKEN"); env != nullptr) {
    token = env;
  }
  if (!token.empty()) loop_opt.metadata.push_back({"authorization", "Bearer " + token});
  auto creds = MakeCredentials();
  if (creds == nullptr) {
    std::cerr << "quantd-worker: cannot read the TLS files (--tls-ca, --tls-cert, --tls-key)\n";
    return 2;
  }
  auto channel = grpc::CreateChannel(absl::GetFlag(FLAGS_server), creds);
  quantd::worker::LeaseLoop loop(channel, &executor, loop_opt);
  g_loop.store(&loop);
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  std::cerr << "{\"component\":\"worker\",\"worker\":\"" << loop_opt.worker_id
            << "\",\"msg\":\"leasing from " << absl::GetFlag(FLAGS_server) << " on " << device
            << "\",\"intra_op_threads\":" << threads << ",\"threads_from\":\"" << threads_why
            << "\"}" << std::endl;
  const int jobs = loop.Run();
  g_loop.store(nullptr);
  std::cerr << "{\"component\":\"worker\",\"worker\":\"" << loop_opt.worker_id
            << "\",\"msg\":\"stopped after " << jobs << " job(s)\"}" << std::endl;
  return 0;
}
