#include "worker/cli/quantize_args.h"

#include <unistd.h>

#include <climits>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

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
  --eval URI              evaluation text for perplexity
  --n-ctx N               perplexity window (default 256)
  --eval-windows N        score only the first N windows (default all)
  --no-eval               skip evaluation
  --max-ppl-increase F    accuracy gate: fail when ppl > float ppl * (1 + F)
  --max-kl F              accuracy gate: fail when the mean KL exceeds F
  --output DIR            artifact directory (default <data-dir>/artifacts/<id>)
  --format F              hf (default), hf-quark, gguf, onnx (repeatable)
  --overwrite             replace an existing output

local run:
  --device D              cpu (default); cuda:N needs a CUDA LibTorch build
  --threads N             intra-op threads (default: one per core)
  --data-dir DIR          scratch space and download cache (default ./quantd-data)
  --keep-scratch          keep the job's scratch directory
  -o, --output-format text|json
                          text: progress on stderr, summary on stdout;
                          json: one proto3-JSON JobEvent per line, then the Job

Exit codes: 0 ok, 1 job FAILED/CANCELLED, 2 usage error, 3 job spec refused
(the field is named, as quantd's CreateJob would refuse it).
)";

namespace {

absl::Status ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--config: cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return absl::OkStatus();
}

absl::StatusOr<quantd::v1::ExportFormat> ParseFormat(const std::string& f) {
  if (f == "hf" || f == "hf-fake-quantized") return quantd::v1::HF_FAKE_QUANTIZED;
  if (f == "hf-quark" || f == "quark") return quantd::v1::HF_QUARK;
  if (f == "gguf") return quantd::v1::GGUF;
  if (f == "onnx") return quantd::v1::ONNX_QDQ;
  return absl::InvalidArgumentError(
      absl::StrCat("--format '", f, "' is not one of hf, hf-quark, gguf, onnx"));
}

absl::StatusOr<double> GetDouble(const quantctl::ParsedArgs& a, const std::string& name) {
  double v = 0;
  if (!absl::SimpleAtod(a.Get(name), &v))
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " needs a number, got '", a.Get(name), "'"));
  return v;
}

}  // namespace

std::string ToUri(const std::string& s) {
  if (s.empty() || absl::StrContains(s, "://")) return s;
  std::string path = s;
  if (path[0] != '/') {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) path = std::string(cwd) + "/" + path;
  }
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return "file://" + path;
}

absl::StatusOr<quantctl::ParsedArgs> ParseQuantizeArgs(const std::vector<std::string>& argv) {
  static const std::set<std::string> kValueFlags = {
      "model",         "scheme",        "config",           "group-size", "exclude",
      "calib",         "calib-samples", "calib-seq-len",    "eval",       "n-ctx",
      "eval-windows",  "output",        "format",           "device",     "threads",
      "output-format", "data-dir",      "max-ppl-increase", "max-kl"};
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
  return o;
}

absl::StatusOr<quantd::v1::Job> BuildJob(const quantctl::ParsedArgs& a, const std::string& job_id) {
  quantd::v1::Job job;
  job.set_name("jobs/" + job_id);
  job.set_state(quantd::v1::QUEUED);
  auto* spec = job.mutable_spec();
  if (!a.Has("model")) return absl::InvalidArgumentError("needs --model URI");
  spec->set_model_uri(ToUri(a.Get("model")));
  auto* q = spec->mutable_quantization();
  if (a.Has("scheme") == a.Has("config"))
    return absl::InvalidArgumentError("needs exactly one of --scheme NAME or --config FILE");
  if (a.Has("scheme")) q->set_scheme(a.Get("scheme"));
  if (a.Has("config")) {
    std::string text;
    if (auto s = ReadFile(a.Get("config"), &text); !s.ok()) return s;
    q->set_quark_json(text);
  }
  if (a.Has("group-size")) {
    auto g = a.GetInt("group-size", 0);
    if (!g.ok()) return g.status();
    q->set_group_size(*g);
  }
  for (const auto& e : a.GetAll("exclude")) q->add_exclude(e);
  if (a.Get("fp8-kv-cache") == "true") q->set_fp8_kv_cache(true);
  if (a.Has("calib") || a.Has("calib-samples") || a.Has("calib-seq-len")) {
    auto* c = spec->mutable_calibration();
    c->set_dataset_uri(ToUri(a.Get("calib")));
    if (a.Has("calib-samples")) {
      auto n = a.GetInt("calib-samples", 0);
      if (!n.ok()) return n.status();
      c->set_num_samples(*n);
    }
    if (a.Has("calib-seq-len")) {
      auto n = a.GetInt("calib-seq-len", 0);
      if (!n.ok()) return n.status();
      c->set_seq_len(*n);
    }
  }
  auto* ev = spec->mutable_evaluation();
  if (a.Get("no-eval") == "true") ev->set_disabled(true);
  if (a.Has("eval")) ev->set_dataset_uri(ToUri(a.Get("eval")));
  if (a.Has("n-ctx")) {
    auto n = a.GetInt("n-ctx", 0);
    if (!n.ok()) return n.status();
    ev->set_n_ctx(*n);
  }
  if (a.Has("eval-windows")) {
    auto n = a.GetInt("eval-windows", 0);
    if (!n.ok()) return n.status();
    ev->set_max_windows(*n);
  }
  if (a.Has("max-ppl-increase")) {
    auto f = GetDouble(a, "max-ppl-increase");
    if (!f.ok()) return f.status();
    ev->set_max_perplexity_increase(*f);
  }
  if (a.Has("max-kl")) {
    auto f = GetDouble(a, "max-kl");
    if (!f.ok()) return f.status();
    ev->set_max_kl_divergence(*f);
  }
  auto* ex = spec->mutable_export_();
  for (const auto& f : a.GetAll("format")) {
    auto fmt = ParseFormat(f);
    if (!fmt.ok()) return fmt.status();
    ex->add_formats(*fmt);
  }
  if (a.Has("output")) ex->set_output_uri(ToUri(a.Get("output")));
  if (a.Has("overwrite")) ex->set_overwrite(a.Get("overwrite") == "true");
  spec->set_device(a.Get("device", "cpu"));
  return job;
}

}  // namespace quantd::cli
