#include "client/cli_common/job_spec_flags.h"

#include <limits.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "worker/io/uri/uri_parser.h"

namespace quantd::cli_common {
namespace {

// JobSpecFlagsUsage's text at indent 0.
constexpr char kJobSpecFlagsUsage[] = R"(
--model URI             model directory or .gguf file (file:// or a plain
                        path), hf://ORG/NAME[@REV] from the Hugging Face Hub,
                        or an http(s):// .gguf file
--scheme NAME           quantization preset, e.g. w_int4_per_group_sym
--config FILE           quantization config: the reference toolkit's JSON
                        (a config.json or its quantization_config object)
--group-size N          group size for per_group schemes (default 128)
--exclude GLOB          leave matching layers in float (repeatable)
--fp8-kv-cache          FP8 e4m3 KV cache (needs calibration data)
--batchnorm-folding M   TorchScript models: on or off (default: on with static
                        activation quantization)
--algorithm A           run algorithm A with its default options: gptq, awq,
                        smoothquant, autosmoothquant, rotation (repeatable;
                        needs --calib; with --gguf-type: gptq)
--calib URI             calibration data: a .txt, .jsonl, .parquet or token-id
                        file, or hf://datasets/ORG/NAME[@REV]?split=S&field=F
                        (chat messages are rendered with the model's chat
                        template; docs/datasets.md)
--calib-field F         the JSON Lines field or Parquet column to read
                        (default text; e.g. messages for chat data)
--calib-samples N       calibration samples (default 128)
--calib-seq-len N       calibration sample length in tokens (default 512)
--calib-sampling M      random-windows (default: windows at seeded random
                        offsets) or concat (consecutive chunks from the start)
--calib-seed N          seed of the random windows (default 0)
--calib-dtype T         float32 (default) or bfloat16: the dtype of the
                        calibration passes' matrix products
--min-expert-tokens N   mixture-of-experts models: experts routed fewer
                        calibration tokens are reported and rounded to
                        nearest instead of fitted by GPTQ (default 8)
--float-starved-experts leave such experts in float instead
--eval URI              evaluation text for perplexity (the forms of --calib)
--eval-field F          as --calib-field, for --eval
--n-ctx N               perplexity window (default 256)
--eval-windows N        score only the first N windows (default all)
--no-eval               skip evaluation
--max-ppl-increase F    accuracy gate: fail when ppl > float ppl * (1 + F)
--max-kl F              accuracy gate: fail when the mean KL exceeds F
--max-accuracy-drop F   accuracy gate (classifiers): fail when top-1 accuracy falls
                        by more than F (0.01 = one point)
--qat-steps N           quantization-aware training: N optimizer steps after
                        calibration (TorchScript models; docs/qat.md)
--qat-data URI          training tensor dataset (default: the --calib data)
--qat-lr F              Adam learning rate at step 1, cosine decay (default 1e-4)
--qat-batch-size N      samples per step (default 32)
--qat-loss L            cross-entropy, mse or distillation (default: from the
                        dataset: label, target, neither)
--qat-parameters P      weights (default) or weights-and-biases
--qat-learn-scales      train integer weight scales too (LSQ)
--qat-seed N            seed of the order samples are drawn in (default 0)
--sensitivity LIST      measure each quantized linear's sensitivity to these
                        presets (comma-separated, e.g. w_uint4_per_group_asym,
                        w_int8_per_channel_sym; needs --calib;
                        docs/sensitivity.md)
--auto-precision        choose a format per layer among --candidates, the
                        cheapest meeting --max-ppl-increase / --max-kl
                        (instead of --scheme/--config; docs/auto_precision.md)
--candidates LIST       --auto-precision's formats: 2 to 8 presets or float
                        (comma-separated, e.g. w_uint4_per_group_asym,
                        w_int8_per_channel_sym,float)
--max-rounds N          rounds --auto-precision measures, 1 to 10 (default 4)
--cost-per-weight LIST  --auto-precision's cost table: one weight's cost in each
                        candidate, NAME=COST comma-separated (e.g.
                        w_uint4_per_group_asym=0.25,w_int8_per_channel_sym=0.4,
                        float=1): the search minimizes the summed cost, not bytes
--output URI            artifact directory (default <data-dir>/artifacts/<id>)
--format F              hf (default), hf-quark, gguf, onnx, compressed-tensors;
                        torchscript (the default for a TorchScript .pt model)
                        (repeatable)
--gguf-float-type T     gguf: type of the tensors left in float: f32
                        (default, exact), f16 or bf16 (half the size)
--gguf-type T           quantize as llama-quantize's recipe T (Q4_K_M,
                        Q5_K_M, Q6_K, Q8_0, ...) instead of --scheme/--config;
                        needs --format gguf
--target T              any (default) or vllm: refuse a format, scheme or
                        model shape that vLLM cannot serve
--overwrite             replace an existing output
)";

quantd::StatusOr<double> GetDouble(const ParsedArgs& a, const std::string& name) {
  double v = 0;
  if (!absl::SimpleAtod(a.Get(name), &v))
    return quantd::InvalidArgumentError(
        absl::StrCat("--", name, " needs a number, got '", a.Get(name), "'"));
  return v;
}

// Sets `set(value)` from an integer flag when it is given.
template <typename Setter>
quantd::Status IntFlag(const ParsedArgs& a, const std::string& name, Setter set) {
  if (!a.Has(name)) return quantd::OkStatus();
  auto n = a.GetInt(name, 0);
  if (!n.ok()) return n.status();
  set(*n);
  return quantd::OkStatus();
}

template <typename Setter>
quantd::Status DoubleFlag(const ParsedArgs& a, const std::string& name, Setter set) {
  if (!a.Has(name)) return quantd::OkStatus();
  auto f = GetDouble(a, name);
  if (!f.ok()) return f.status();
  set(*f);
  return quantd::OkStatus();
}

// spec.qat from the --qat-* flags; --qat-steps is required with any of them.
quantd::Status FillQat(const ParsedArgs& a, quantd::v1::JobSpec* spec) {
  const bool any = a.Has("qat-steps") || a.Has("qat-data") || a.Has("qat-lr") ||
                   a.Has("qat-batch-size") || a.Has("qat-loss") || a.Has("qat-parameters") ||
                   a.Has("qat-seed") || a.Get("qat-learn-scales") == "true";
  if (!any) return quantd::OkStatus();
  if (!a.Has("qat-steps"))
    return quantd::InvalidArgumentError("the --qat-* flags need --qat-steps N");
  auto* q = spec->mutable_qat();
  if (auto s = IntFlag(a, "qat-steps", [&](int n) { q->set_steps(n); }); !s.ok()) return s;
  if (auto s = IntFlag(a, "qat-batch-size", [&](int n) { q->set_batch_size(n); }); !s.ok())
    return s;
  if (auto s = DoubleFlag(a, "qat-lr", [&](double f) { q->set_learning_rate(f); }); !s.ok())
    return s;
  if (a.Has("qat-data")) q->set_dataset_uri(ToUri(a.Get("qat-data")));
  if (a.Has("qat-loss")) {
    const std::string l = a.Get("qat-loss");
    if (l == "cross-entropy") {
      q->set_loss(quantd::v1::QAT_LOSS_CROSS_ENTROPY);
    } else if (l == "mse") {
      q->set_loss(quantd::v1::QAT_LOSS_MSE);
    } else if (l == "distillation") {
      q->set_loss(quantd::v1::QAT_LOSS_DISTILLATION);
    } else {
      return quantd::InvalidArgumentError(
          absl::StrCat("--qat-loss '", l, "' is not one of cross-entropy, mse, distillation"));
    }
  }
  if (a.Has("qat-parameters")) {
    const std::string p = a.Get("qat-parameters");
    if (p == "weights") {
      q->set_parameters(quantd::v1::QAT_WEIGHTS);
    } else if (p == "weights-and-biases") {
      q->set_parameters(quantd::v1::QAT_WEIGHTS_AND_BIASES);
    } else {
      return quantd::InvalidArgumentError(
          absl::StrCat("--qat-parameters '", p, "' is not one of weights, weights-and-biases"));
    }
  }
  if (a.Get("qat-learn-scales") == "true") q->set_learn_scales(true);
  if (a.Has("qat-seed")) {
    uint64_t seed = 0;
    if (!absl::SimpleAtoi(a.Get("qat-seed"), &seed))
      return quantd::InvalidArgumentError(
          absl::StrCat("--qat-seed needs a non-negative integer, got '", a.Get("qat-seed"), "'"));
    q->set_seed(seed);
  }
  return quantd::OkStatus();
}

// --cost-per-weight NAME=COST[,NAME=COST...]: each cost a positive, finite
// number, each name once. Whether the names are the candidates (and the
// costs within the engine's bound) is the engine's check.
quantd::Status ParseCostTable(const std::string& text,
                              google::protobuf::Map<std::string, double>* table) {
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(entry, absl::MaxSplits('=', 1));
    const std::string name(absl::StripAsciiWhitespace(kv.first));
    if (name.empty() || !absl::StrContains(entry, '='))
      return quantd::InvalidArgumentError(
          absl::StrCat("--cost-per-weight '", entry, "' is not NAME=COST"));
    double cost = 0;
    if (!absl::SimpleAtod(kv.second, &cost) || !std::isfinite(cost) || cost <= 0)
      return quantd::InvalidArgumentError(absl::StrCat(
          "--cost-per-weight needs a positive number for ", name, ", got '", kv.second, "'"));
    if (!table->insert({name, cost}).second)
      return quantd::InvalidArgumentError(absl::StrCat("--cost-per-weight names ", name, " twice"));
  }
  return quantd::OkStatus();
}

}  // namespace

const std::set<std::string>& JobSpecValueFlags() {
  static const auto* flags = new std::set<std::string>{"model",
                                                       "scheme",
                                                       "config",
                                                       "group-size",
                                                       "exclude",
                                                       "algorithm",
                                                       "calib",
                                                       "calib-field",
                                                       "calib-samples",
                                                       "calib-seq-len",
                                                       "calib-sampling",
                                                       "calib-seed",
                                                       "calib-dtype",
                                                       "eval",
                                                       "eval-field",
                                                       "n-ctx",
                                                       "eval-windows",
                                                       "max-ppl-increase",
                                                       "max-kl",
                                                       "max-accuracy-drop",
                                                       "batchnorm-folding",
                                                       "qat-steps",
                                                       "qat-data",
                                                       "qat-lr",
                                                       "qat-batch-size",
                                                       "qat-loss",
                                                       "qat-parameters",
                                                       "qat-seed",
                                                       "sensitivity",
                                                       "candidates",
                                                       "max-rounds",
                                                       "cost-per-weight",
                                                       "format",
                                                       "output",
                                                       "gguf-float-type",
                                                       "gguf-type",
                                                       "target",
                                                       "min-expert-tokens"};
  return *flags;
}

const std::set<std::string>& JobSpecBoolFlags() {
  static const auto* flags = new std::set<std::string>{"overwrite",        "no-eval",
                                                       "fp8-kv-cache",     "float-starved-experts",
                                                       "qat-learn-scales", "auto-precision"};
  return *flags;
}

std::string JobSpecFlagsUsage(int indent) {
  const std::string pad(indent, ' ');
  std::string out;
  for (absl::string_view line : absl::StrSplit(kJobSpecFlagsUsage, '\n', absl::SkipEmpty()))
    absl::StrAppend(&out, pad, line, "\n");
  return out;
}

quantd::StatusOr<std::string> ReadFileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return quantd::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

quantd::StatusOr<quantd::v1::ExportFormat> ParseExportFormatFlag(const std::string& f) {
  if (f == "hf" || f == "hf-fake-quantized") return quantd::v1::HF_FAKE_QUANTIZED;
  if (f == "hf-quark" || f == "quark") return quantd::v1::HF_QUARK;
  if (f == "gguf") return quantd::v1::GGUF;
  if (f == "onnx") return quantd::v1::ONNX_QDQ;
  if (f == "compressed-tensors") return quantd::v1::COMPRESSED_TENSORS;
  if (f == "torchscript") return quantd::v1::TORCHSCRIPT;
  return quantd::InvalidArgumentError(
      absl::StrCat("--format '", f,
                   "' is not one of hf, hf-quark, gguf, onnx, compressed-tensors, torchscript"));
}

quantd::StatusOr<quantd::v1::GgufFloatType> ParseGgufFloatTypeFlag(const std::string& t) {
  if (t == "f32") return quantd::v1::GGUF_F32;
  if (t == "f16") return quantd::v1::GGUF_F16;
  if (t == "bf16") return quantd::v1::GGUF_BF16;
  return quantd::InvalidArgumentError(
      absl::StrCat("--gguf-float-type '", t, "' is not one of f32, f16, bf16"));
}

quantd::StatusOr<quantd::v1::ServingTarget> ParseTargetFlag(const std::string& t) {
  if (t == "any") return quantd::v1::SERVING_TARGET_ANY;
  if (t == "vllm") return quantd::v1::SERVING_TARGET_VLLM;
  return quantd::InvalidArgumentError(absl::StrCat("--target '", t, "' is not one of any, vllm"));
}

quantd::StatusOr<quantd::v1::ComputeDtype> ParseCalibDtypeFlag(const std::string& name) {
  if (name == "float32") return quantd::v1::COMPUTE_FLOAT32;
  if (name == "bfloat16") return quantd::v1::COMPUTE_BFLOAT16;
  return quantd::InvalidArgumentError(
      absl::StrCat("--calib-dtype '", name, "' is not one of float32, bfloat16"));
}

quantd::StatusOr<quantd::v1::SamplingMode> ParseCalibSamplingFlag(const std::string& name) {
  if (name == "concat") return quantd::v1::CONCAT;
  if (name == "random-windows" || name == "random_windows") return quantd::v1::RANDOM_WINDOWS;
  return quantd::InvalidArgumentError(
      absl::StrCat("--calib-sampling '", name, "' is not one of concat, random-windows"));
}

std::string ToUri(const std::string& s) {
  if (s.empty() || absl::StrContains(s, "://")) return s;
  std::string path = s;
  if (path[0] != '/') {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) path = std::string(cwd) + "/" + path;
  }
  path = std::filesystem::path(path).lexically_normal().string();
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return quantd::io::PathToFileUri(path);
}

namespace {

// --algorithm NAME: the algorithm with its default options.
quantd::Status AddAlgorithmFlag(const std::string& name, quantd::v1::QuantizationSettings* q) {
  quantd::v1::AlgorithmConfig a;
  if (name == "gptq") {
    a.mutable_gptq();
  } else if (name == "awq") {
    a.mutable_awq();
  } else if (name == "smoothquant") {
    a.mutable_smooth_quant();
  } else if (name == "autosmoothquant") {
    a.mutable_auto_smooth_quant();
  } else if (name == "rotation") {
    a.mutable_rotation();
  } else {
    return quantd::InvalidArgumentError(
        absl::StrCat("--algorithm '", name,
                     "' is not one of gptq, awq, smoothquant, autosmoothquant, rotation"));
  }
  *q->add_algorithms() = std::move(a);
  return quantd::OkStatus();
}

}  // namespace

quantd::Status FillJobSpec(const ParsedArgs& a, quantd::v1::JobSpec* spec) {
  if (!a.Has("model")) return quantd::InvalidArgumentError("needs --model URI");
  spec->set_model_uri(ToUri(a.Get("model")));

  // --auto-precision chooses each layer's format among --candidates: there
  // is no one scheme, config or recipe to give.
  const bool auto_precision = a.Get("auto-precision") == "true";
  for (const char* flag : {"candidates", "max-rounds", "cost-per-weight"}) {
    if (a.Has(flag) && !auto_precision)
      return quantd::InvalidArgumentError(absl::StrCat("--", flag, " needs --auto-precision"));
  }
  if (auto_precision) {
    for (const char* flag : {"scheme", "config", "gguf-type"}) {
      if (a.Has(flag))
        return quantd::InvalidArgumentError(
            absl::StrCat("--auto-precision takes no --", flag,
                         ": --candidates are the formats it chooses among"));
    }
  }

  // A llama.cpp recipe (--gguf-type) is the quantization on its own; the
  // engine refuses it together with quantization settings, naming both.
  if (a.Has("scheme") && a.Has("config"))
    return quantd::InvalidArgumentError("needs exactly one of --scheme NAME or --config FILE");
  if (!a.Has("scheme") && !a.Has("config") && !a.Has("gguf-type") && !auto_precision)
    return quantd::InvalidArgumentError(
        "needs one of --scheme NAME, --config FILE or --gguf-type RECIPE");
  if (a.Has("scheme") || a.Has("config") || a.Has("group-size") || a.Has("exclude") ||
      a.Has("algorithm") || a.Get("fp8-kv-cache") == "true" || a.Has("batchnorm-folding")) {
    auto* q = spec->mutable_quantization();
    if (a.Has("scheme")) q->set_scheme(a.Get("scheme"));
    if (a.Has("config")) {
      auto text = ReadFileText(a.Get("config"));
      if (!text.ok())
        return quantd::NotFoundError(absl::StrCat("--config: ", text.status().message()));
      q->set_quark_json(*std::move(text));
    }
    if (auto s = IntFlag(a, "group-size", [&](int n) { q->set_group_size(n); }); !s.ok()) return s;
    for (const auto& e : a.GetAll("exclude")) q->add_exclude(e);
    for (const auto& name : a.GetAll("algorithm")) {
      auto s = AddAlgorithmFlag(name, q);
      if (!s.ok()) return s;
    }
    if (a.Get("fp8-kv-cache") == "true") q->set_fp8_kv_cache(true);
    if (a.Has("batchnorm-folding")) {
      const std::string m = a.Get("batchnorm-folding");
      if (m != "on" && m != "off")
        return quantd::InvalidArgumentError(
            absl::StrCat("--batchnorm-folding '", m, "' is not one of on, off"));
      q->set_fold_batchnorm(m == "on");
    }
  }

  if (a.Has("calib") || a.Has("calib-field") || a.Has("calib-samples") || a.Has("calib-seq-len") ||
      a.Has("calib-sampling") || a.Has("calib-seed") || a.Has("calib-dtype") ||
      a.Has("min-expert-tokens") || a.Get("float-starved-experts") == "true") {
    auto* c = spec->mutable_calibration();
    c->set_dataset_uri(ToUri(a.Get("calib")));
    if (a.Has("calib-field")) c->set_text_field(a.Get("calib-field"));
    if (auto s = IntFlag(a, "calib-samples", [&](int n) { c->set_num_samples(n); }); !s.ok())
      return s;
    if (auto s = IntFlag(a, "calib-seq-len", [&](int n) { c->set_seq_len(n); }); !s.ok()) return s;
    if (auto s = IntFlag(a, "min-expert-tokens", [&](int n) { c->set_min_expert_tokens(n); });
        !s.ok())
      return s;
    if (a.Get("float-starved-experts") == "true") c->set_keep_starved_experts_float(true);
    if (a.Has("calib-sampling")) {
      auto mode = ParseCalibSamplingFlag(a.Get("calib-sampling"));
      if (!mode.ok()) return mode.status();
      c->set_sampling(*mode);
    }
    if (a.Has("calib-dtype")) {
      auto dtype = ParseCalibDtypeFlag(a.Get("calib-dtype"));
      if (!dtype.ok()) return dtype.status();
      c->set_compute_dtype(*dtype);
    }
    if (a.Has("calib-seed")) {
      uint64_t seed = 0;
      if (!absl::SimpleAtoi(a.Get("calib-seed"), &seed))
        return quantd::InvalidArgumentError(absl::StrCat(
            "--calib-seed needs a non-negative integer, got '", a.Get("calib-seed"), "'"));
      // A seed draws random windows; concatenated chunks have none to draw.
      if (c->sampling() == quantd::v1::CONCAT)
        return quantd::InvalidArgumentError(
            "--calib-seed applies to --calib-sampling random-windows, not concat");
      c->set_seed(seed);
    }
  }

  auto* ev = spec->mutable_evaluation();
  if (a.Get("no-eval") == "true") ev->set_disabled(true);
  if (a.Has("eval")) ev->set_dataset_uri(ToUri(a.Get("eval")));
  if (a.Has("eval-field")) ev->set_text_field(a.Get("eval-field"));
  if (auto s = IntFlag(a, "n-ctx", [&](int n) { ev->set_n_ctx(n); }); !s.ok()) return s;
  if (auto s = IntFlag(a, "eval-windows", [&](int n) { ev->set_max_windows(n); }); !s.ok())
    return s;
  if (auto s = DoubleFlag(a, "max-ppl-increase",
                          [&](double f) { ev->set_max_perplexity_increase(f); });
      !s.ok())
    return s;
  if (auto s = DoubleFlag(a, "max-kl", [&](double f) { ev->set_max_kl_divergence(f); }); !s.ok())
    return s;
  if (auto s = DoubleFlag(a, "max-accuracy-drop", [&](double f) { ev->set_max_accuracy_drop(f); });
      !s.ok())
    return s;

  if (auto s = FillQat(a, spec); !s.ok()) return s;
  if (a.Has("sensitivity")) {
    auto* sensitivity = spec->mutable_sensitivity();
    for (absl::string_view name : absl::StrSplit(a.Get("sensitivity"), ',', absl::SkipEmpty()))
      sensitivity->add_candidates(std::string(name));
  }
  if (auto_precision) {
    // Whether the candidates and rounds are acceptable (and that a budget
    // is given) is the engine's check.
    auto* search = spec->mutable_auto_precision();
    for (absl::string_view name : absl::StrSplit(a.Get("candidates"), ',', absl::SkipEmpty()))
      search->add_candidates(std::string(name));
    if (auto s = IntFlag(a, "max-rounds", [&](int n) { search->set_max_rounds(n); }); !s.ok())
      return s;
    if (a.Has("cost-per-weight")) {
      if (auto s = ParseCostTable(a.Get("cost-per-weight"), search->mutable_cost_per_weight());
          !s.ok())
        return s;
    }
  }

  auto* ex = spec->mutable_export_();
  for (const auto& f : a.GetAll("format")) {
    auto fmt = ParseExportFormatFlag(f);
    if (!fmt.ok()) return fmt.status();
    ex->add_formats(*fmt);
  }
  if (a.Has("output")) ex->set_output_uri(ToUri(a.Get("output")));
  if (a.Has("gguf-float-type")) {
    auto t = ParseGgufFloatTypeFlag(a.Get("gguf-float-type"));
    if (!t.ok()) return t.status();
    ex->set_gguf_float_type(*t);
  }
  if (a.Has("gguf-type")) ex->set_gguf_type(a.Get("gguf-type"));
  if (a.Has("target")) {
    auto t = ParseTargetFlag(a.Get("target"));
    if (!t.ok()) return t.status();
    ex->set_target(*t);
  }
  if (a.Get("overwrite") == "true") ex->set_overwrite(true);

  for (const auto& kv : a.GetAll("label")) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    if (p.first.empty() || !absl::StrContains(kv, "="))
      return quantd::InvalidArgumentError(absl::StrCat("--label '", kv, "' is not KEY=VALUE"));
    (*spec->mutable_labels())[p.first] = p.second;
  }
  return IntFlag(a, "max-attempts", [&](int n) { spec->set_max_attempts(n); });
}

}  // namespace quantd::cli_common
