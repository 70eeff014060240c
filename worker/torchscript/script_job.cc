#include "worker/torchscript/script_job.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <utility>

#include "worker/common/cancellation.h"
#include "worker/common/squared_error.h"
#include "worker/pipeline/job_metrics.h"
#include "worker/pipeline/job_progress.h"
#include "worker/pipeline/resume_state.h"
#include "worker/quant/spec.h"
#include "worker/torchscript/batchnorm_fold.h"
#include "worker/torchscript/script_export.h"
#include "worker/torchscript/script_gptq.h"
#include "worker/torchscript/script_model.h"
#include "worker/torchscript/script_onnx_export.h"
#include "worker/torchscript/script_qat.h"
#include "worker/torchscript/script_quantizer.h"
#include "worker/torchscript/script_quark_export.h"
#include "worker/torchscript/script_sensitivity.h"
#include "worker/torchscript/script_smoothquant.h"
#include "worker/torchscript/tensor_dataset.h"
#include "worker/torchscript/tensor_evaluation.h"

namespace quantd::torchscript {
namespace {

namespace fs = std::filesystem;
using pipeline::LogLevel;
using pipeline::Stage;
using SteadyClock = std::chrono::steady_clock;

bool HasStaticActivations(const ScriptModel& model, const pipeline::LayerPlanner& planner) {
  for (const ScriptLayer& l : model.Layers()) {
    const pipeline::LayerPlan p = planner(l.name, l.type);
    if ((p.input && !p.input->is_dynamic) || (p.output && !p.output->is_dynamic)) return true;
  }
  return false;
}

std::string Format(const std::optional<quant::QuantSpec>& spec) {
  return spec ? quant::DescribeSpec(*spec) : "float";
}

class ScriptJob {
 public:
  ScriptJob(const pipeline::JobOptions& opt, pipeline::JobObserver& obs)
      : opt_(opt), obs_(obs), progress_(obs, Stages(opt)) {}

  pipeline::JobOutcome Run() {
    pipeline::JobOutcome out;
    try {
      out.status = RunStages();
    } catch (const std::exception& e) {
      out.status = InternalError("LibTorch error: " + FirstLine(e));
    }
    out.cancelled = out.status.code() == StatusCode::kCancelled;
    out.report = std::move(report_);
    return out;
  }

 private:
  static std::vector<Stage> Stages(const pipeline::JobOptions& opt) {
    std::vector<Stage> s = {Stage::kLoad, Stage::kCalibrate};
    // smoothquant runs in kCalibrate, before the observers.
    const bool fitting =
        std::any_of(opt.quant_config.algorithms.begin(), opt.quant_config.algorithms.end(),
                    [](const auto& a) { return a.kind() != config::AlgorithmKind::kSmoothQuant; });
    if (fitting) s.push_back(Stage::kAlgorithms);
    if (opt.qat) s.push_back(Stage::kTrain);
    s.push_back(Stage::kQuantize);
    if (opt.evaluation.enabled) s.push_back(Stage::kEvaluate);
    s.push_back(Stage::kExport);
    return s;
  }

  template <typename F>
  Status Timed(Stage stage, F&& f) {
    const auto start = SteadyClock::now();
    progress_.Report(stage, 0);
    Status s = f();
    report_.stage_timings.push_back(
        {stage, std::chrono::duration<double>(SteadyClock::now() - start).count()});
    if (s.ok()) progress_.Report(stage, 1);
    return s;
  }

  void Log(LogLevel level, const std::string& msg) { obs_.OnLog(level, msg); }

  Status RunStages() {
    QD_RETURN_IF_ERROR(CheckSettings());
    QD_RETURN_IF_ERROR(CheckFormats());
    QD_RETURN_IF_ERROR(Timed(Stage::kLoad, [&] { return Load(); }));
    QD_RETURN_IF_ERROR(Timed(Stage::kCalibrate, [&] { return Calibrate(); }));
    if (gptq_) QD_RETURN_IF_ERROR(Timed(Stage::kAlgorithms, [&] { return Gptq(); }));
    if (opt_.qat) QD_RETURN_IF_ERROR(Timed(Stage::kTrain, [&] { return Train(); }));
    QD_RETURN_IF_ERROR(Timed(Stage::kQuantize, [&] { return ReportLayers(); }));
    if (opt_.evaluation.enabled) {
      QD_RETURN_IF_ERROR(Timed(Stage::kEvaluate, [&] { return Evaluate(); }));
    }
    const Status gate = pipeline::AccuracyGate(opt_.evaluation, report_);
    QD_RETURN_IF_ERROR(Timed(Stage::kExport, [&] { return Export(); }));
    if (!gate.ok()) {
      for (auto& a : report_.artifacts) a.accepted = false;
      return gate;
    }
    return OkStatus();
  }

  // Settings that act on decoder language models only are refused rather
  // than ignored, each naming its field.
  Status CheckSettings() {
    std::vector<FieldViolation> bad;
    for (const config::AlgorithmConfig& a : opt_.quant_config.algorithms) {
      if (a.kind() == config::AlgorithmKind::kGptq) {
        gptq_ = std::get<config::GptqOptions>(a.options);
        continue;
      }
      if (a.kind() == config::AlgorithmKind::kSmoothQuant) {
        smoothquant_ = std::get<config::SmoothQuantOptions>(a.options);
        if (!smoothquant_->smooth_linear_prev_ops) {
          bad.push_back({"spec.quantization.algorithms",
                         "smooth_quant with smooth_linear_prev_ops false: a TorchScript model "
                         "folds the scales only into the layer before, so nothing would be "
                         "smoothed"});
        }
        continue;
      }
      bad.push_back({"spec.quantization.algorithms",
                     std::string(config::AlgorithmKindName(a.kind())) +
                         " runs on decoder blocks; a TorchScript model takes gptq and "
                         "smooth_quant"});
    }
    if (gptq_ && opt_.qat) {
      bad.push_back({"spec.qat", "trains the weights GPTQ would fit: choose one of gptq and qat"});
    }
    if (opt_.kv_cache) {
      bad.push_back({"spec.quantization.fp8_kv_cache",
                     "a TorchScript model has no KV cache (nor kv_cache_quant_config)"});
    }
    if (opt_.export_options.gguf_recipe) {
      bad.push_back({"spec.export.gguf_type", "llama.cpp recipes quantize language models"});
    }
    if (bad.empty()) return OkStatus();
    Status s(StatusCode::kInvalidArgument, bad.front().field + ": " + bad.front().description,
             "INVALID_JOB_SPEC");
    for (const auto& v : bad) s.AddViolation(v.field, v.description);
    return s;
  }

  // A TorchScript model exports as TorchScript, ONNX (script_onnx_export.h)
  // or the reference's tensors (script_quark_export.h); the other Hugging
  // Face and GGUF exporters take the decoder LLMs.
  Status CheckFormats() {
    const auto& ex = opt_.export_options;
    if (!ex.formats_given) {
      formats_ = {exporter::ExportFormat::kTorchScript};
      return OkStatus();
    }
    std::vector<FieldViolation> bad;
    std::string first;
    for (size_t i = 0; i < ex.formats.size(); ++i) {
      if (ex.formats[i] == exporter::ExportFormat::kTorchScript ||
          ex.formats[i] == exporter::ExportFormat::kOnnxQdq ||
          ex.formats[i] == exporter::ExportFormat::kHfQuark) {
        continue;
      }
      const std::string field = "spec.export.formats[" + std::to_string(i) + "]";
      const std::string why = std::string(exporter::ExportFormatName(ex.formats[i])) +
                              " is a language-model format; a TorchScript model exports "
                              "torchscript, onnx_qdq or hf_quark";
      bad.push_back({field, why});
      if (first.empty()) first = field + ": " + why;
    }
    if (!first.empty()) {
      Status s(StatusCode::kInvalidArgument, first, "INVALID_JOB_SPEC");
      for (auto& v : bad) s.AddViolation(v.field, v.description);
      return s;
    }
    formats_ = ex.formats;
    return OkStatus();
  }

  Status Load() {
    auto model = ScriptModel::Load(opt_.model_dir);
    if (!model.ok()) return Status(model.status()).Prepend("spec.model_uri: ");
    model_ = std::make_unique<ScriptModel>(*std::move(model));
    const std::vector<ScriptLayer> layers = model_->Layers();
    Log(LogLevel::kInfo, "TorchScript model: " + std::to_string(layers.size()) +
                             " quantizable layers, forward takes " +
                             std::to_string(model_->num_inputs()) + " tensor(s)");
    folded_ =
        opt_.tensor_model.fold_batchnorm.value_or(HasStaticActivations(*model_, opt_.planner));
    if (folded_) {
      QD_ASSIGN_OR_RETURN(FoldReport folded, FoldBatchNorms(*model_));
      if (!folded.folded.empty()) {
        Log(LogLevel::kInfo, "folded " + std::to_string(folded.folded.size()) +
                                 " batch norm(s) into their convolutions");
      }
      for (const std::string& s : folded.skipped) {
        Log(LogLevel::kWarning, "batch norm not folded: " + s);
      }
    }
    if (obs_.CancelRequested()) return CancelledStatus("loading the model");
    QD_ASSIGN_OR_RETURN(quantizer_, ScriptQuantizer::Create(*model_, opt_.planner));
    Log(LogLevel::kInfo, "quantizing " + std::to_string(quantizer_->quantized_layers()) + " of " +
                             std::to_string(quantizer_->layers().size()) + " layers (" +
                             opt_.quantization_description + ")");
    return CheckExportable();
  }

  // Before calibrating: the torchscript export must be able to carry the
  // activation quantizers. A job that named no format is still evaluated
  // without it.
  Status CheckExportable() {
    QD_RETURN_IF_ERROR(CheckOnnxExportable());
    QD_RETURN_IF_ERROR(CheckQuarkExportable());
    Status held = CheckScriptExport(*quantizer_);
    if (held.ok()) return OkStatus();
    if (!opt_.export_options.formats_given) {
      Log(LogLevel::kWarning, "no export: " + held.message());
      formats_.clear();
      return OkStatus();
    }
    for (size_t i = 0; i < formats_.size(); ++i) {
      if (formats_[i] == exporter::ExportFormat::kTorchScript) return FormatRefused(i, held);
    }
    return OkStatus();
  }

  // `held` (why the format cannot be written) on spec.export.formats[i].
  static Status FormatRefused(size_t i, const Status& held) {
    const std::string field = "spec.export.formats[" + std::to_string(i) + "]";
    Status s(held.code(), field + ": " + held.message(), "EXPORT_FORMAT_UNSUPPORTED");
    for (const auto& v : held.violations()) s.AddViolation(v.field, v.description);
    return s;
  }

  Status CheckQuarkExportable() {
    for (size_t i = 0; i < formats_.size(); ++i) {
      if (formats_[i] != exporter::ExportFormat::kHfQuark) continue;
      Status held = CheckScriptQuarkExport(*quantizer_);
      return held.ok() ? held : FormatRefused(i, held);
    }
    return OkStatus();
  }

  // Before calibrating: the onnx export must express the activation
  // quantizers and every operator forward runs on a batch of the data.
  Status CheckOnnxExportable() {
    for (size_t i = 0; i < formats_.size(); ++i) {
      if (formats_[i] != exporter::ExportFormat::kOnnxQdq) continue;
      Status held = CheckScriptOnnxQuantizers(*quantizer_);
      if (held.ok()) {
        QD_ASSIGN_OR_RETURN(std::vector<at::Tensor> example, ExampleInputs());
        held = CheckScriptOnnxGraph(*quantizer_, example);
      }
      return held.ok() ? held : FormatRefused(i, held);
    }
    return OkStatus();
  }

  // Two samples of the calibration data, else of the evaluation data: the
  // onnx export walks forward on them.
  StatusOr<std::vector<at::Tensor>> ExampleInputs() {
    if (!example_.empty()) return example_;
    const TensorDataset* data = nullptr;
    std::optional<TensorDataset> eval;
    if (!opt_.calibration.dataset_path.empty()) {
      QD_ASSIGN_OR_RETURN(data, CalibrationData("the onnx export"));
    } else if (!opt_.evaluation.dataset_path.empty()) {
      QD_ASSIGN_OR_RETURN(eval,
                          LoadData("spec.evaluation.dataset_uri", opt_.evaluation.dataset_path));
      data = &*eval;
    } else {
      return Status(StatusCode::kFailedPrecondition,
                    "onnx: the export runs forward on a batch of the job's data: give a "
                    "calibration or evaluation dataset",
                    "CALIBRATION_REQUIRED");
    }
    example_ = data->Batch(0, std::min<int64_t>(2, data->size()));
    return example_;
  }

  StatusOr<TensorDataset> LoadData(const std::string& field, const std::string& path) {
    auto data = LoadTensorDataset(path, model_->num_inputs());
    if (!data.ok()) return Status(data.status()).Prepend(field + ": ");
    return data;
  }

  // Runs fn(begin, end) over [0, n) in batches, reporting progress.
  template <typename F>
  Status Batches(Stage stage, int64_t n, const std::string& what, F&& fn) {
    const int64_t batch = std::max(1, opt_.tensor_model.batch_size);
    for (int64_t begin = 0; begin < n; begin += batch) {
      if (obs_.CancelRequested()) return CancelledStatus(what);
      const int64_t end = std::min(n, begin + batch);
      QD_RETURN_IF_ERROR(fn(begin, end));
      progress_.Report(stage, static_cast<double>(end) / n, 0, 0,
                       what + ": " + std::to_string(end) + " of " + std::to_string(n) + " samples");
    }
    return OkStatus();
  }

  // The calibration dataset, loaded once; `why` says what needs it.
  StatusOr<const TensorDataset*> CalibrationData(const std::string& why) {
    if (calibration_) return &*calibration_;
    const auto& cal = opt_.calibration;
    if (cal.dataset_path.empty()) {
      return Status(StatusCode::kFailedPrecondition,
                    "spec.calibration.dataset_uri: " + why + " needs a calibration tensor dataset",
                    "CALIBRATION_REQUIRED")
          .AddViolation("spec.calibration.dataset_uri", "required for " + why);
    }
    QD_ASSIGN_OR_RETURN(TensorDataset data,
                        LoadData("spec.calibration.dataset_uri", cal.dataset_path));
    calibration_ = std::move(data);
    return &*calibration_;
  }

  int64_t CalibrationSamples(const TensorDataset& data) const {
    return std::min<int64_t>(
        data.size(), std::max(1, opt_.tensor_model.calibration_samples.value_or(INT32_MAX)));
  }

  Status SmoothQuant() {
    QD_ASSIGN_OR_RETURN(const TensorDataset* data, CalibrationData("smoothquant"));
    ScriptSmoothQuantOptions o;
    o.smoothquant = *smoothquant_;
    o.samples = CalibrationSamples(*data);
    o.batch_size = opt_.tensor_model.batch_size;
    progress_.Report(Stage::kCalibrate, 0, 0, 0, "smoothquant");
    auto r = RunScriptSmoothQuant(*quantizer_, *data, o);
    if (!r.ok()) return Status(r.status()).Prepend("spec.quantization.algorithms: ");
    for (const std::string& line : r->smoothed) Log(LogLevel::kInfo, "smoothquant: " + line);
    for (const std::string& line : r->skipped) {
      Log(LogLevel::kWarning, "smoothquant left unscaled: " + line);
    }
    return OkStatus();
  }

  Status Gptq() {
    QD_ASSIGN_OR_RETURN(const TensorDataset* data, CalibrationData("gptq"));
    ScriptGptqOptions o;
    o.gptq = *gptq_;
    o.samples = CalibrationSamples(*data);
    o.batch_size = opt_.tensor_model.batch_size;
    o.progress = [this](int done, int total, const std::string& name) {
      progress_.Report(
          Stage::kAlgorithms, static_cast<double>(done) / total, 0, 0,
          "gptq " + name + " (" + std::to_string(done) + " of " + std::to_string(total) + ")");
    };
    QD_ASSIGN_OR_RETURN(ScriptGptqReport r, RunScriptGptq(*quantizer_, *data, o));
    Log(LogLevel::kInfo, "gptq fitted " + std::to_string(r.fitted.size()) + " layer(s) on " +
                             std::to_string(o.samples) + " samples");
    for (const std::string& line : r.rounded) {
      Log(LogLevel::kWarning, "gptq left to round-to-nearest: " + line);
    }
    return OkStatus();
  }

  // Quantization-aware training on spec.qat's dataset (the calibration
  // dataset when it names none).
  Status Train() {
    const pipeline::QatOptions& qat = *opt_.qat;
    const TensorDataset* data = nullptr;
    std::optional<TensorDataset> own;
    if (!qat.dataset_path.empty()) {
      QD_ASSIGN_OR_RETURN(TensorDataset d, LoadData("spec.qat.dataset_uri", qat.dataset_path));
      own = std::move(d);
      data = &*own;
    } else {
      QD_ASSIGN_OR_RETURN(data, CalibrationData("quantization-aware training"));
    }
    ScriptQatOptions o;
    o.qat = qat;
    o.checkpoint_dir = opt_.scratch_dir;
    o.fingerprint = pipeline::ResumeFingerprint(opt_);  // spec.qat included
    o.log = [this](LogLevel level, const std::string& msg) { Log(level, msg); };
    o.on_step = [this](const pipeline::TrainingStepInfo& s) {
      char msg[128];
      std::snprintf(msg, sizeof(msg), "step %d of %d: loss %.5g, learning rate %.3g", s.step,
                    s.steps, s.loss, s.learning_rate);
      progress_.Report(Stage::kTrain, static_cast<double>(s.step) / s.steps, 0, 0, msg, s);
    };
    QD_ASSIGN_OR_RETURN(pipeline::JobReport::Training t, RunScriptQat(*quantizer_, *data, o));
    char line[256];
    std::snprintf(line, sizeof(line),
                  "trained %d steps (%s loss %.5g at the first step, %.5g over the last tenth)",
                  t.steps, t.loss.c_str(), t.first_loss, t.final_loss);
    Log(LogLevel::kInfo, line);
    report_.training = std::move(t);
    return OkStatus();
  }

  // spec.sensitivity, on the float model (before SmoothQuant rescales it).
  Status MeasureSensitivity() {
    QD_ASSIGN_OR_RETURN(const TensorDataset* data, CalibrationData("the per-layer sensitivity"));
    ScriptSensitivityOptions o;
    o.model_path = opt_.model_dir;
    o.fold_batchnorm = folded_;
    for (const QuantizedLayer& l : quantizer_->layers())
      if (l.plan.quantized()) o.layers.push_back(l.layer.name);
    o.samples = CalibrationSamples(*data);
    o.batch_size = opt_.tensor_model.batch_size;
    o.progress = [this](int64_t done, int64_t total) {
      progress_.Report(Stage::kCalibrate, static_cast<double>(done) / total, 0, 0,
                       "sensitivity: " + std::to_string(done) + " of " + std::to_string(total) +
                           " layer-candidate pairs");
    };
    QD_ASSIGN_OR_RETURN(sensitivity_, MeasureScriptSensitivity(opt_.sensitivity, *data, o));
    Log(LogLevel::kInfo, "measured the sensitivity of " + std::to_string(o.layers.size()) +
                             " layer(s) to " + std::to_string(opt_.sensitivity.size()) +
                             " candidate(s) on " + std::to_string(o.samples) + " samples");
    return OkStatus();
  }

  Status Calibrate() {
    if (!opt_.sensitivity.empty()) QD_RETURN_IF_ERROR(MeasureSensitivity());
    if (smoothquant_) QD_RETURN_IF_ERROR(SmoothQuant());
    if (!quantizer_->NeedsCalibration()) return OkStatus();
    QD_ASSIGN_OR_RETURN(const TensorDataset* calibration,
                        CalibrationData("static activation quantization"));
    const TensorDataset& data = *calibration;
    const int64_t n = CalibrationSamples(data);
    QD_RETURN_IF_ERROR(Batches(Stage::kCalibrate, n, "calibration", [&](int64_t b, int64_t e) {
      return quantizer_->Forward(ScriptQuantizer::Mode::kObserve, data.Batch(b, e)).status();
    }));
    Log(LogLevel::kInfo, "calibrated on " + std::to_string(n) + " samples");
    return quantizer_->FinishCalibration();
  }

  Status ReportLayers() {
    pipeline::BlockReport block;
    block.block = 1;
    block.block_count = 1;
    for (const QuantizedLayer& l : quantizer_->layers()) {
      pipeline::LayerReport r;
      r.name = l.layer.name;
      r.excluded = !l.plan.quantized();
      r.weight_format = Format(l.plan.weight);
      r.input_format = Format(l.input.spec());
      r.output_format = Format(l.output.spec());
      if (auto s = sensitivity_.find(r.name); s != sensitivity_.end())
        r.sensitivity_relative_mse = s->second;
      if (l.plan.weight) {
        QD_ASSIGN_OR_RETURN(at::Tensor wq, l.weight.Effective(at::kFloat, at::kCPU));
        const SquaredError se = SumSquaredError(wq, l.float_weight.to(at::kFloat));
        r.weight_sqnr_db = se.error > 0 ? 10 * std::log10(se.reference / se.error) : 200;
      }
      if (l.input.is_static() && l.input.qparams().scale.defined()) {
        r.input_min = l.input.qparams().scale.min().item<double>();
        r.input_max = l.input.qparams().scale.max().item<double>();
      }
      block.layers.push_back(std::move(r));
      report_.float_model_bytes += l.float_weight.numel() * 4;
      report_.quantized_model_bytes +=
          l.plan.weight ? (l.float_weight.numel() * quant::BitWidth(l.plan.weight->dtype) + 7) / 8
                        : l.float_weight.numel() * 4;
    }
    obs_.OnBlock(block);
    report_.blocks.push_back(std::move(block));
    return OkStatus();
  }

  Status Evaluate() {
    const auto& ev = opt_.evaluation;
    if (ev.dataset_path.empty()) {
      Log(LogLevel::kWarning,
          "no evaluation dataset (spec.evaluation.dataset_uri): accuracy is not measured");
      return OkStatus();
    }
    QD_ASSIGN_OR_RETURN(TensorDataset data,
                        LoadData("spec.evaluation.dataset_uri", ev.dataset_path));
    EvaluationAccumulator acc;
    auto slice = [](const at::Tensor& t, int64_t b, int64_t e) {
      return t.defined() ? t.slice(0, b, e) : at::Tensor();
    };
    QD_RETURN_IF_ERROR(
        Batches(Stage::kEvaluate, data.size(), "evaluation", [&](int64_t b, int64_t e) -> Status {
          const auto inputs = data.Batch(b, e);
          QD_ASSIGN_OR_RETURN(at::Tensor f,
                              quantizer_->Forward(ScriptQuantizer::Mode::kFloat, inputs));
          QD_ASSIGN_OR_RETURN(at::Tensor q,
                              quantizer_->Forward(ScriptQuantizer::Mode::kQuantized, inputs));
          return acc.Add(f, q, slice(data.label, b, e), slice(data.target, b, e),
                         slice(data.bucket, b, e));
        }));
    report_.tensor_evaluation = acc.Finish();
    report_.top1_agreement = acc.top1_agreement();
    const pipeline::TensorEvaluation& t = *report_.tensor_evaluation;
    char line[256];
    if (t.float_top1_accuracy) {
      std::snprintf(line, sizeof(line),
                    "top-1 accuracy %.2f%% float, %.2f%% quantized (%lld samples)",
                    100 * *t.float_top1_accuracy, 100 * *t.quantized_top1_accuracy,
                    static_cast<long long>(t.samples));
      Log(LogLevel::kInfo, line);
    }
    std::snprintf(line, sizeof(line), "output SQNR %.2f dB, relative MSE %.3g", t.output_sqnr_db,
                  t.output_relative_mse);
    Log(LogLevel::kInfo, line);
    return OkStatus();
  }

  Status Export() {
    // torchscript last: it rewrites the module's hooks.
    std::vector<size_t> order;
    for (size_t i = 0; i < formats_.size(); ++i) {
      if (formats_[i] != exporter::ExportFormat::kTorchScript) order.push_back(i);
    }
    for (size_t i = 0; i < formats_.size(); ++i) {
      if (formats_[i] == exporter::ExportFormat::kTorchScript) order.push_back(i);
    }
    for (size_t i : order) {
      if (obs_.CancelRequested()) return CancelledStatus("exporting");
      std::string dir = opt_.export_options.output_dir;
      if (formats_.size() > 1) {
        dir = (fs::path(dir) / exporter::ExportFormatName(formats_[i])).string();
      }
      if (formats_[i] == exporter::ExportFormat::kOnnxQdq) {
        QD_RETURN_IF_ERROR(ExportOnnx(i, dir));
        continue;
      }
      ScriptExportOptions eo;
      eo.output_dir = dir;
      eo.overwrite = opt_.export_options.overwrite;
      eo.output_owner = {opt_.export_options.output_root, opt_.job_name,
                         opt_.export_options.tenant};
      eo.quant_config = &opt_.quant_config;
      auto artifact = formats_[i] == exporter::ExportFormat::kHfQuark
                          ? ExportScriptQuark(*quantizer_, eo)
                          : ExportScriptModel(*quantizer_, eo);
      if (!artifact.ok()) {
        const std::string field = "spec.export.formats[" + std::to_string(i) + "]";
        return Status(artifact.status()).Prepend(field + ": ");
      }
      Log(LogLevel::kInfo, std::string("wrote ") + exporter::ExportFormatName(formats_[i]) +
                               " to " + artifact->path);
      report_.artifacts.push_back(*std::move(artifact));
    }
    return OkStatus();
  }

  Status ExportOnnx(size_t i, const std::string& dir) {
    const std::string field = "spec.export.formats[" + std::to_string(i) + "]";
    ScriptOnnxExportOptions eo;
    eo.output_dir = dir;
    eo.overwrite = opt_.export_options.overwrite;
    eo.output_owner = {opt_.export_options.output_root, opt_.job_name, opt_.export_options.tenant};
    eo.quant_config = &opt_.quant_config;
    auto example = ExampleInputs();
    if (!example.ok()) return Status(example.status()).Prepend(field + ": ");
    eo.example_inputs = *example;
    auto r = ExportScriptOnnx(*quantizer_, eo);
    if (!r.ok()) return Status(r.status()).Prepend(field + ": ");
    for (const std::string& w : r->float_weights) {
      Log(LogLevel::kWarning, "onnx: weight written as fake-quantized float: " + w);
    }
    Log(LogLevel::kInfo,
        "wrote onnx (opset " + std::to_string(r->opset) + ") to " + r->artifact.path);
    report_.artifacts.push_back(std::move(r->artifact));
    return OkStatus();
  }

  const pipeline::JobOptions& opt_;
  pipeline::JobObserver& obs_;
  pipeline::JobProgress progress_;
  pipeline::JobReport report_;
  std::vector<exporter::ExportFormat> formats_;
  std::unique_ptr<ScriptModel> model_;
  std::unique_ptr<ScriptQuantizer> quantizer_;
  std::optional<TensorDataset> calibration_;
  std::optional<config::GptqOptions> gptq_;
  std::optional<config::SmoothQuantOptions> smoothquant_;
  bool folded_ = false;  // the batch norms were folded into their convolutions
  // spec.sensitivity: layer -> relative MSE per candidate.
  std::map<std::string, std::vector<double>> sensitivity_;
  std::vector<at::Tensor> example_;  // ExampleInputs
};

}  // namespace

bool IsScriptModelPath(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ScriptModel::LooksLikeScript(path);
}

pipeline::JobOutcome RunScriptJob(const pipeline::JobOptions& options,
                                  pipeline::JobObserver& observer) {
  CancellationScope scope([&observer] { return observer.CancelRequested(); });
  ScriptJob job(options, observer);
  return job.Run();
}

}  // namespace quantd::torchscript
