#include "worker/cli/quantize_args.h"

#include "absl/strings/str_cat.h"
#include "client/cli_common/job_spec_flags.h"

namespace quantd::cli {
namespace {

constexpr char kUsageHead[] =
    R"(quantd-quantize: run one quantization job locally, without a server.

usage: quantd-quantize --model URI (--scheme NAME | --config FILE |
                                    --auto-precision --candidates LIST) [flags]

job (the same flags as `quantctl submit`):
)";

// After the job flags.
constexpr char kUsageTail[] = R"(
local run:
  --device D              cpu (default); cuda:N needs a CUDA LibTorch build
  --threads N             intra-op threads (default: one per CPU this process
                          may use: its affinity and cgroup CPU quota)
  --activation-offload M  on a GPU, where calibration activations live between
                          blocks: auto (default: host memory when they and a
                          block's working set need more than 3/4 of the GPU's
                          free memory), host, device
  --data-dir DIR          scratch space and download cache (default ./quantd-data)
  --keep-scratch          keep the job's scratch directory
  -o, --output-format text|json
                          text: progress on stderr, summary on stdout;
                          json: one proto3-JSON JobEvent per line, then the Job

Exit codes: 0 ok, 1 job FAILED/CANCELLED, 2 usage error, 3 job spec refused
(the field is named, as quantd's CreateJob would refuse it).
)";

}  // namespace

std::string QuantizeUsage() {
  return absl::StrCat(kUsageHead, cli_common::JobSpecFlagsUsage(2), kUsageTail);
}

const std::set<std::string>& QuantizeValueFlags() {
  static const auto* flags = [] {
    auto* f = new std::set<std::string>{"device", "threads", "output-format", "data-dir",
                                        "activation-offload"};
    const auto& job = cli_common::JobSpecValueFlags();
    f->insert(job.begin(), job.end());
    return f;
  }();
  return *flags;
}

const std::set<std::string>& QuantizeBoolFlags() {
  static const auto* flags = [] {
    auto* f = new std::set<std::string>{"keep-scratch", "help"};
    const auto& job = cli_common::JobSpecBoolFlags();
    f->insert(job.begin(), job.end());
    return f;
  }();
  return *flags;
}

quantd::StatusOr<cli_common::ParsedArgs> ParseQuantizeArgs(const std::vector<std::string>& argv) {
  auto parsed = cli_common::ParseArgs(argv, QuantizeValueFlags(), QuantizeBoolFlags());
  if (!parsed.ok()) return parsed.status();
  // quantd-quantize has no commands: a bare word is a mistake, not a command.
  if (!parsed->command.empty())
    return quantd::InvalidArgumentError(
        absl::StrCat("unexpected argument '", parsed->command, "' (flags only)"));
  return parsed;
}

quantd::StatusOr<LocalRunOptions> BuildRunOptions(const cli_common::ParsedArgs& a) {
  LocalRunOptions o;
  o.device = a.Get("device", "cpu");
  auto threads = a.GetInt("threads", 0);
  if (!threads.ok()) return threads.status();
  if (*threads < 0) return quantd::InvalidArgumentError("--threads must be >= 0");
  o.threads = *threads;
  const std::string format = a.Get("output-format", "text");
  if (format != "text" && format != "json")
    return quantd::InvalidArgumentError("-o/--output-format must be text or json");
  o.json = format == "json";
  o.data_dir = a.Get("data-dir", o.data_dir);
  o.keep_scratch = a.Get("keep-scratch") == "true";
  auto offload = pipeline::ParseActivationOffload(a.Get("activation-offload", "auto"));
  if (!offload.ok())
    return quantd::InvalidArgumentError("--activation-offload: " + offload.status().message());
  o.activation_offload = *offload;
  return o;
}

quantd::StatusOr<quantd::v1::Job> BuildJob(const cli_common::ParsedArgs& a,
                                         const std::string& job_id) {
  quantd::v1::Job job;
  job.set_name("jobs/" + job_id);
  job.set_state(quantd::v1::QUEUED);
  if (quantd::Status s = cli_common::FillJobSpec(a, job.mutable_spec()); !s.ok()) return s;
  job.mutable_spec()->set_device(a.Get("device", "cpu"));
  return job;
}

}  // namespace quantd::cli
