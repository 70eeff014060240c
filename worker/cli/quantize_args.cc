#include "worker/cli/quantize_args.h"

#include "absl/strings/str_cat.h"
#include "client/quantctl/job_spec_flags.h"

namespace quantd::cli {

const char kQuantizeUsage[] =
    R"(quantd-quantize: run one quantization job locally, without a server.

usage: quantd-quantize --model URI (--scheme NAME | --config FILE) [flags]

job (the same flags as `quantctl submit`):
  --model URI             model directory (file:// or a plain path, hf://)
  --scheme NAME           quantization preset, e.g. w_int4_per_group_sym
  --config FILE           the reference toolkit's JSON (a config.json or its
                          quantization_config object)
  --group-size N          group size for per_group schemes (default 128)
  --exclude GLOB          leave matching layers in float (repeatable)
  --fp8-kv-cache          FP8 e4m3 KV cache (needs calibration data)
  --calib URI             calibration text (.txt or .jsonl)
  --calib-samples N       calibration samples (default 128)
  --calib-seq-len N       calibration sample length in tokens (default 512)
  --calib-sampling M      random-windows (default: windows at seeded random
                          offsets) or concat (consecutive chunks from the start)
  --calib-seed N          seed of the random windows (default 0)
  --eval URI              evaluation text for perplexity
  --n-ctx N               perplexity window (default 256)
  --eval-windows N        score only the first N windows (default all)
  --no-eval               skip evaluation
  --max-ppl-increase F    accuracy gate: fail when ppl > float ppl * (1 + F)
  --max-kl F              accuracy gate: fail when the mean KL exceeds F
  --output DIR            artifact directory (default <data-dir>/artifacts/<id>)
  --format F              hf (default), hf-quark, gguf, onnx (repeatable)
  --gguf-float-type T     gguf: type of the tensors left in float: f32
                          (default, exact), f16 or bf16 (half the size)
  --overwrite             replace an existing output

local run:
  --device D              cpu (default); cuda:N needs a CUDA LibTorch build
  --threads N             intra-op threads (default: one per core)
  --activation-offload M  on a GPU, where calibration activations live between
                          blocks: auto (default: host memory when they need more
                          than half the GPU's free memory), host, device
  --data-dir DIR          scratch space and download cache (default ./quantd-data)
  --keep-scratch          keep the job's scratch directory
  -o, --output-format text|json
                          text: progress on stderr, summary on stdout;
                          json: one proto3-JSON JobEvent per line, then the Job

Exit codes: 0 ok, 1 job FAILED/CANCELLED, 2 usage error, 3 job spec refused
(the field is named, as quantd's CreateJob would refuse it).
)";

absl::StatusOr<quantctl::ParsedArgs> ParseQuantizeArgs(const std::vector<std::string>& argv) {
  static const std::set<std::string> kValueFlags = {
      "model",         "scheme",        "config",           "group-size", "exclude",
      "calib",         "calib-samples", "calib-seq-len",    "calib-sampling", "calib-seed",
      "eval",          "n-ctx",
      "eval-windows",  "output",        "format",           "device",     "threads",
      "output-format", "data-dir",      "max-ppl-increase", "max-kl", "activation-offload",
      "gguf-float-type"};
  static const std::set<std::string> kBoolFlags = {"overwrite", "no-eval", "fp8-kv-cache",
                                                   "keep-scratch", "help"};
  auto parsed = quantctl::ParseArgs(argv, kValueFlags, kBoolFlags);
  if (!parsed.ok()) return parsed.status();
  // quantd-quantize has no commands: a bare word is a mistake, not a command.
  if (!parsed->command.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", parsed->command, "' (flags only)"));
  return parsed;
}

absl::StatusOr<LocalRunOptions> BuildRunOptions(const quantctl::ParsedArgs& a) {
  LocalRunOptions o;
  o.device = a.Get("device", "cpu");
  auto threads = a.GetInt("threads", 0);
  if (!threads.ok()) return threads.status();
  if (*threads < 0) return absl::InvalidArgumentError("--threads must be >= 0");
  o.threads = *threads;
  const std::string format = a.Get("output-format", "text");
  if (format != "text" && format != "json")
    return absl::InvalidArgumentError("-o/--output-format must be text or json");
  o.json = format == "json";
  o.data_dir = a.Get("data-dir", o.data_dir);
  o.keep_scratch = a.Get("keep-scratch") == "true";
  auto offload = pipeline::ParseActivationOffload(a.Get("activation-offload", "auto"));
  if (!offload.ok())
    return absl::InvalidArgumentError("--activation-offload: " + offload.status().message());
  o.activation_offload = *offload;
  return o;
}

absl::StatusOr<quantd::v1::Job> BuildJob(const quantctl::ParsedArgs& a, const std::string& job_id) {
  quantd::v1::Job job;
  job.set_name("jobs/" + job_id);
  job.set_state(quantd::v1::QUEUED);
  if (absl::Status s = quantctl::FillJobSpec(a, job.mutable_spec()); !s.ok()) return s;
  job.mutable_spec()->set_device(a.Get("device", "cpu"));
  return job;
}

}  // namespace quantd::cli
