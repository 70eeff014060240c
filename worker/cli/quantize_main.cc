// quantd-quantize: runs one quantization job locally, without quantd or a
// worker, on the same engine the worker uses (worker::PipelineExecutor) and
// showing the same progress and summary as `quantctl submit --wait`:
//
//   quantd-quantize --model models/stories260K --scheme w_int4_per_channel_sym
//       --calib data.txt --eval data.txt --output out/ [--device cpu] [-o json]
//
// The flags are quantctl submit's (see QuantizeUsage); exit codes too:
// 0 ok, 1 job FAILED or CANCELLED, 2 usage error, 3 job spec refused.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/core/Device.h>
#include <google/protobuf/util/time_util.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/cli_common/render.h"
#include "worker/cli/console_context.h"
#include "worker/cli/quantize_args.h"
#include "worker/common/cpu_budget.h"
#include "worker/common/crash_handler.h"
#include "worker/common/device.h"
#include "worker/common/peak_rss.h"
#include "worker/io/uri/hf_hub.h"
#include "worker/job_spec/resolve_job.h"
#include "worker/job_spec/rpc_status.h"
#include "worker/runner/pipeline_executor.h"

namespace quantd::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitJobFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitRefused = 3;

std::atomic<bool> g_cancel{false};

void OnSignal(int) {
  // First Ctrl-C: stop at the next block boundary; a second one kills.
  g_cancel.store(true);
  signal(SIGINT, SIG_DFL);
}

// Prints a refused spec the way quantctl prints a refused CreateJob: the
// code, the message, the reason and every field violation.
int ReportRefused(const Status& s) {
  std::cerr << "error: " << StatusCodeName(s.code()) << ": " << s.message() << "\n";
  if (!s.reason().empty()) std::cerr << "  reason: " << s.reason() << "\n";
  for (const auto& v : s.violations())
    std::cerr << "  " << v.field << ": " << v.description << "\n";
  return kExitRefused;
}

std::string RandomJobId() {
  std::random_device rd;
  std::mt19937_64 gen(rd());
  return absl::StrCat("local-", absl::Hex(gen(), absl::kZeroPad16));
}

// Peak host RSS and, on a GPU, the device memory in use at the end, which
// is what LibTorch's caching allocator still holds: its high-water mark,
// since it returns nothing to the driver during a job; and the largest
// per-block allocator peaks (live tensors, held) of the job's blocks.
std::string ResourceSummary(const c10::Device& device, const quantd::v1::Metrics& metrics) {
  char buf[200];
  std::snprintf(buf, sizeof(buf), "quantd-quantize: peak host RSS %.2f GiB",
                PeakRssBytes() / 1073741824.0);
  std::string out = buf;
  if (auto m = QueryDeviceMemory(device)) {
    std::snprintf(buf, sizeof(buf), "; %s memory in use at the end %.2f of %.2f GiB",
                  DeviceName(device).c_str(), m->used_bytes / 1073741824.0,
                  m->total_bytes / 1073741824.0);
    out += buf;
  }
  int64_t live = 0, held = 0;
  for (const auto& b : metrics.blocks()) {
    live = std::max(live, b.device_peak_allocated_bytes());
    held = std::max(held, b.device_peak_reserved_bytes());
  }
  if (held > 0) {
    std::snprintf(buf, sizeof(buf), "; block peak %.2f GiB live, %.2f GiB held",
                  live / 1073741824.0, held / 1073741824.0);
    out += buf;
  }
  return out;
}

int Main(int argc, char** argv) {
  InstallCrashHandler("quantd-quantize");
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = ParseQuantizeArgs(args);
  if (!parsed.ok()) {
    std::cerr << "quantd-quantize: " << parsed.status().message() << "\n\n" << QuantizeUsage();
    return kExitUsage;
  }
  if (parsed->Has("help")) {
    std::cout << QuantizeUsage();
    return kExitOk;
  }
  auto run = BuildRunOptions(*parsed);
  if (!run.ok()) {
    std::cerr << "quantd-quantize: " << run.status().message() << "\n";
    return kExitUsage;
  }
  auto built = BuildJob(*parsed, RandomJobId());
  if (!built.ok()) {
    std::cerr << "quantd-quantize: " << built.status().message() << "\n\n" << QuantizeUsage();
    return kExitUsage;
  }
  quantd::v1::Job job = *std::move(built);

  // The device must be usable before LibTorch runs any kernel.
  auto device = ParseEngineDevice(run->device);
  if (!device.ok()) return ReportRefused(device.status());
  // Debian's LibTorch starts with one OpenMP thread whatever the core count;
  // the default is the CPUs this process may use (common/cpu_budget.h).
  int threads = run->threads;
  if (threads <= 0) threads = AvailableCpus().cpus;
  at::set_num_threads(threads);

  // What quantd does at CreateJob: a bad spec is refused before it runs,
  // and what is suspicious (a glob matching no layer, a config key that
  // takes no effect) becomes a warning once the job starts. Resolved once:
  // the executor runs this value.
  StatusOr<job_spec::ResolvedJob> resolved = job_spec::ResolveJob(job.spec());
  if (!resolved.ok()) return ReportRefused(resolved.status());

  std::error_code ec;
  worker::PipelineExecutorOptions exec_opt;
  exec_opt.data_dir = std::filesystem::absolute(run->data_dir, ec).lexically_normal().string();
  exec_opt.keep_scratch = run->keep_scratch;
  exec_opt.device = DeviceName(*device);
  exec_opt.activation_offload = run->activation_offload;
  // hf:// models: the Hub as $HF_ENDPOINT / $HF_TOKEN / $HF_HUB_OFFLINE say.
  auto hub = io::HubAccessFromEnvironment("", false, "");
  if (!hub.ok()) {
    std::cerr << "quantd-quantize: " << hub.status().message() << "\n";
    return 2;
  }
  exec_opt.hf_endpoint = hub->endpoint;
  exec_opt.hf_token = hub->token;
  // s3:// as the AWS variables say ($AWS_ENDPOINT_URL_S3, $AWS_REGION, ...).
  auto s3 = io::S3OptionsFromEnvironment("", "");
  if (!s3.ok()) {
    std::cerr << "quantd-quantize: " << s3.status().message() << "\n";
    return 2;
  }
  exec_opt.s3 = *s3;
  worker::PipelineExecutor executor(exec_opt);

  ConsoleOptions console;
  console.job_name = job.name();
  console.json = run->json;
  // The bar is redrawn in place only on a terminal that gets stdout too:
  // piped stdout would land in the middle of the bar.
  console.tty = !run->json && cli_common::StdoutAndStderrAreTerminals();
  ConsoleJobContext ctx(console, std::cout, std::cerr, &g_cancel);
  signal(SIGINT, OnSignal);

  using google::protobuf::util::TimeUtil;
  *job.mutable_create_time() = TimeUtil::GetCurrentTime();
  *job.mutable_start_time() = job.create_time();
  job.set_attempt(1);
  job.set_worker("local");
  ctx.ReportState(quantd::v1::RUNNING);
  for (const std::string& w : resolved->warnings) {
    quantd::v1::JobEvent event;
    event.mutable_log()->set_severity(quantd::v1::WARNING);
    event.mutable_log()->set_message(w);
    ctx.Report(std::move(event));
  }
  worker::ExecutionOutcome outcome;
  try {
    outcome = executor.Execute(job, *resolved, ctx);
  } catch (const std::exception& e) {
    // The engine returns Status; this only guards the process boundary.
    outcome.status = Status(StatusCode::kInternal, std::string("engine error: ") + e.what());
  }
  signal(SIGINT, SIG_DFL);
  const quantd::v1::JobState final_state = outcome.cancelled     ? quantd::v1::CANCELLED
                                           : outcome.status.ok() ? quantd::v1::SUCCEEDED
                                                                 : quantd::v1::FAILED;
  ctx.ReportState(final_state);
  ctx.Finish();

  job.set_state(final_state);
  *job.mutable_result() = outcome.result;
  *job.mutable_progress() = ctx.last_progress();
  if (!outcome.status.ok()) *job.mutable_error() = ToRpcStatus(outcome.status);
  *job.mutable_end_time() = TimeUtil::GetCurrentTime();
  *job.mutable_update_time() = job.end_time();
  if (run->json) {
    std::cout << cli_common::ToJson(job, false) << std::endl;
  } else {
    std::cout << cli_common::RenderJob(job);
  }
  std::cerr << ResourceSummary(*device, outcome.result.metrics()) << std::endl;
  return final_state == quantd::v1::SUCCEEDED ? kExitOk : kExitJobFailed;
}

}  // namespace
}  // namespace quantd::cli

int main(int argc, char** argv) { return quantd::cli::Main(argc, argv); }
