#include "worker/pipeline/quantization_job.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include "worker/common/cancellation.h"
#include "worker/common/torch_compat.h"
#include "worker/eval/blockwise_model.h"
#include "worker/eval/eval_windows.h"
#include "worker/eval/perplexity.h"
#include "worker/export/export_support.h"
#include "worker/export/exporter.h"
#include "worker/export/gguf/gguf_chat_metadata.h"
#include "worker/export/gguf/gguf_recipe_weights.h"
#include "worker/export/hf/hf_files.h"
#include "worker/export/quantized_checkpoint.h"
#include "worker/io/dataset/calibration.h"
#include "worker/io/dataset/chat_rows.h"
#include "worker/io/dataset/dataset.h"
#include "worker/io/tensor_map_source.h"
#include "worker/io/tokenizer/load_tokenizer.h"
#include "worker/io/tokenizer/special_tokens.h"
#include "worker/models/layer_shapes.h"
#include "worker/models/registry.h"
#include "worker/pipeline/activation_quantizers.h"
#include "worker/pipeline/block_persistence.h"
#include "worker/pipeline/block_prefetcher.h"
#include "worker/pipeline/block_step.h"
#include "worker/pipeline/checkpoint_pacer.h"
#include "worker/pipeline/freeze.h"
#include "worker/pipeline/job_metrics.h"
#include "worker/pipeline/job_progress.h"
#include "worker/pipeline/pipeline_quantized_model.h"
#include "worker/pipeline/resume_state.h"
#include "worker/pipeline/scratch_store.h"
#include "worker/pipeline/stored_quantization.h"
#include "worker/pipeline/weight_quantizer.h"
#include "worker/quant/qparams.h"

namespace quantd::pipeline {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

class QuantizationJob {
 public:
  QuantizationJob(const JobOptions& opt, JobObserver& obs)
      : opt_(opt), obs_(obs), progress_(obs, PlannedStages(opt)) {
    kv_.min_kv_scale = opt.min_kv_scale;
  }

  JobOutcome Run() {
    JobOutcome out;
    out.status = RunStages();
    out.cancelled = out.status.code() == StatusCode::kCancelled;
    out.report = std::move(report_);
    return out;
  }

 private:
  // The block loop runs algorithms, calibration and rounding block by block;
  // it is shown as the most significant of those it does.
  static Stage LoopStage(const JobOptions& opt) {
    return opt.block_algorithms.empty() ? Stage::kQuantize : Stage::kAlgorithms;
  }

  static std::vector<Stage> PlannedStages(const JobOptions& opt) {
    std::vector<Stage> s = {Stage::kLoad, LoopStage(opt)};
    if (opt.evaluation.enabled) s.push_back(Stage::kEvaluate);
    if (!opt.export_options.formats.empty()) s.push_back(Stage::kExport);
    return s;
  }

  Status RunStages() {
    try {
      QD_RETURN_IF_ERROR(Timed(Stage::kLoad, [&] { return Load(); }));
      QD_RETURN_IF_ERROR(Timed(LoopStage(opt_), [&] { return Quantize(); }));
      if (opt_.evaluation.enabled)
        QD_RETURN_IF_ERROR(Timed(Stage::kEvaluate, [&] { return Evaluate(); }));
      // A rejected model is still exported (marked not accepted) so the user
      // can inspect it; the job then fails with the gate's reason.
      const Status gate = AccuracyGate(opt_.evaluation, report_);
      if (!opt_.export_options.formats.empty())
        QD_RETURN_IF_ERROR(Timed(Stage::kExport, [&] { return Export(); }));
      if (!gate.ok()) {
        for (auto& a : report_.artifacts) a.accepted = false;
        return gate;
      }
      return OkStatus();
    } catch (const c10::Error& e) {
      return InternalError(std::string("LibTorch error: ") + e.what_without_backtrace());
    } catch (const std::exception& e) {
      return InternalError(std::string("unexpected error: ") + e.what());
    }
  }

  template <typename F>
  Status Timed(Stage stage, F&& f) {
    const auto start = SteadyClock::now();
    progress_.Report(stage, 0);
    Status s = f();
    report_.stage_timings.push_back({stage, SecondsSince(start)});
    if (s.ok()) progress_.Report(stage, 1);
    return s;
  }

  void Log(LogLevel level, const std::string& msg) { obs_.OnLog(level, msg); }

  // ---- load ----

  Status Load() {
    if (opt_.scratch_dir.empty()) return InternalError("JobOptions.scratch_dir is required");
    QD_RETURN_IF_ERROR(OpenModel());
    // A format the architecture cannot take fails the job now, not after
    // quantizing (CreateJob refuses it already when it can read the config).
    const auto& formats = opt_.export_options.formats;
    for (size_t i = 0; i < formats.size(); ++i) {
      Status held = exporter::CheckArchitectureSupport(formats[i], model_->config());
      if (!held.ok()) {
        const std::string field = "spec.export.formats[" + std::to_string(i) + "]";
        return Status(held.code(), field + ": " + held.message(), held.reason())
            .AddViolation(field, held.message());
      }
    }
    if (obs_.CancelRequested()) return CancelledStatus("opening the model");
    QD_ASSIGN_OR_RETURN(tokenizer_, io::LoadTokenizerFromDir(opt_.model_dir));
    if (obs_.CancelRequested()) return CancelledStatus("loading the tokenizer");
    QD_ASSIGN_OR_RETURN(scratch_, ScratchStore::Create(opt_.scratch_dir));
    std::shared_ptr<const io::TensorSource> unquantized = model_->shared_weights();
    if (gguf_recipe_) unquantized = gguf_recipe_;
    quantized_weights_ = std::make_shared<io::OverlaySource>(
        std::shared_ptr<const io::TensorSource>(scratch_.get(), [](const io::TensorSource*) {}),
        std::move(unquantized));
    QD_RETURN_IF_ERROR(PlanLayers());
    if (stored_model_) QD_RETURN_IF_ERROR(KeepStoredParameters());
    const std::string& source = opt_.model_source.empty() ? opt_.model_dir : opt_.model_source;
    Log(LogLevel::kInfo, "model " + source + ": " + std::to_string(model_->num_blocks()) +
                             " blocks, quantization " + opt_.quantization_description);
    for (const auto& name : model_->weights().Names())
      report_.float_model_bytes += static_cast<int64_t>(model_->weights().Find(name)->nbytes);
    if (opt_.evaluation.enabled) QD_RETURN_IF_ERROR(LoadEvaluation());
    QD_RETURN_IF_ERROR(LoadMetricSamples());
    return OkStatus();
  }

  // A float checkpoint, or a quantized one (quantized_checkpoint.h) whose
  // dequantized weights the model reads.
  Status OpenModel() {
    QD_ASSIGN_OR_RETURN(models::ModelConfig config, models::LoadModelConfig(opt_.model_dir));
    QD_ASSIGN_OR_RETURN(stored_model_, exporter::OpenQuantizedCheckpoint(opt_.model_dir));
    std::shared_ptr<const io::TensorSource> weights;
    if (stored_model_) {
      weights = std::shared_ptr<const io::TensorSource>(&stored_model_->original(),
                                                        [](const io::TensorSource*) {});
    } else {
      QD_ASSIGN_OR_RETURN(weights, models::OpenModelWeights(opt_.model_dir));
    }
    if (opt_.export_options.gguf_recipe) QD_RETURN_IF_ERROR(PlanGgufRecipe(weights));
    QD_ASSIGN_OR_RETURN(model_,
                        models::LoadCausalLM(config, std::move(weights), opt_.model_options));
    return OkStatus();
  }

  // A job with a llama.cpp recipe: the quantized model reads its weights as
  // the recipe quantizes them (the blocks round to them, the head and the
  // embedding are read through it), so evaluation and every export see what
  // llama.cpp will load; the float model stays the reference.
  Status PlanGgufRecipe(std::shared_ptr<const io::TensorSource> weights) {
    QD_ASSIGN_OR_RETURN(
        std::string config_json,
        exporter::ReadTextFile((fs::path(opt_.model_dir) / "config.json").string()));
    const gguf::GgufFileType type = *opt_.export_options.gguf_recipe;
    // With calibration data the block loop gathers an importance matrix
    // (BlockStep::ObserveImportance), which moves some types in llama.cpp.
    const bool with_importance = !opt_.calibration.dataset_path.empty();
    QD_ASSIGN_OR_RETURN(
        gguf_recipe_, gguf::GgufRecipeWeights::Create(weights, config_json, type, with_importance));
    std::string types;
    for (const std::string& line : gguf_recipe_->DescribeTypes())
      types += (types.empty() ? "" : ", ") + line;
    Log(LogLevel::kInfo, std::string("llama.cpp recipe ") +
                             std::string(gguf::GgufFileTypeName(type)) + ": " + types);
    // The fallbacks are said with the GGUF artifact (ExportResult::notes).
    for (const std::string& name : weights->Names()) {
      const gguf::RecipeTensorPlan* p = gguf_recipe_->PlanOf(name);
      const io::TensorInfo* info = weights->Find(name);
      if (p == nullptr || info == nullptr) continue;
      int64_t numel = 1;
      for (int64_t d : info->shape) numel *= d;
      QD_ASSIGN_OR_RETURN(uint64_t bytes, gguf::GgmlRowBytes(p->type, numel));
      bytes_delta_ += static_cast<int64_t>(bytes) - static_cast<int64_t>(info->nbytes);
    }
    return OkStatus();
  }

  // Which of a quantized checkpoint's parameters the job keeps
  // (stored_quantization.h); said in the log.
  Status KeepStoredParameters() {
    StoredMatchOptions o;
    o.weights_change = opt_.model_transform != nullptr || !opt_.block_algorithms.empty();
    for (exporter::ExportFormat f : opt_.export_options.formats)
      if (f != exporter::ExportFormat::kCompressedTensors &&
          f != exporter::ExportFormat::kHfFakeQuantized)
        o.contiguous_groups_only = true;
    QD_ASSIGN_OR_RETURN(stored_, MatchStoredQuantization(*stored_model_, plans_, o));
    int weights = 0, scales = 0;
    for (const auto& [name, p] : stored_.layers) {
      weights += p.weight ? 1 : 0;
      scales += (p.input ? 1 : 0) + (p.output ? 1 : 0);
    }
    Log(LogLevel::kInfo,
        "the model is a quantized checkpoint: the job starts from its dequantized "
        "weights and keeps the stored parameters of " +
            std::to_string(weights) + " weights and " + std::to_string(scales) +
            " static activation scales");
    if (!stored_.requantized.empty())
      Log(LogLevel::kWarning, std::to_string(stored_.requantized.size()) +
                                  " stored weights are quantized afresh from their dequantized "
                                  "values, e.g. " +
                                  stored_.requantized.front());
    if (!stored_.left_float.empty())
      Log(LogLevel::kWarning, std::to_string(stored_.left_float.size()) +
                                  " stored quantized weights are left in float (their "
                                  "dequantized values): the job does not quantize them, e.g. " +
                                  stored_.left_float.front());
    return OkStatus();
  }

  // Resolves every layer's plan up front, so a layer the config cannot apply
  // to fails the job before any work is done, with every such layer named.
  Status PlanLayers() {
    Status bad(StatusCode::kInvalidArgument, "", "LAYER_CONFIG_MISMATCH");
    std::string first;
    int quantized = 0;
    for (const auto& layer : models::ListLinearLayers(model_->config())) {
      // Matching every module name against every pattern is the planning
      // work that grows with the config: checked layer by layer.
      if (obs_.CancelRequested()) return CancelledStatus("planning layer " + layer.name);
      LayerPlan plan = opt_.planner(layer.name, layer.type);
      if (opt_.kv_cache && layer.block >= 0 && IsKvProjection(layer.name))
        plan.output = opt_.kv_cache;
      plans_[layer.name] = plan;
      if (!plan.quantized()) continue;
      if (layer.block < 0 && layer.name != model_->layout().lm_head.name)
        return UnimplementedError("quantizing " + layer.name + " is not supported; exclude it");
      if (layer.name == model_->layout().lm_head.name && model_->config().tie_word_embeddings)
        return FailedPreconditionError(layer.name +
                                       " shares its weight with the token embedding "
                                       "(tie_word_embeddings); exclude lm_head");
      ++quantized;
      if (!plan.weight) continue;
      auto shape = quant::KernelShapeFor({layer.out_features, layer.in_features}, *plan.weight);
      if (!shape.ok()) {
        std::string msg = "layer " + layer.name + " [" + std::to_string(layer.out_features) + ", " +
                          std::to_string(layer.in_features) + "]: " + shape.status().message();
        if (first.empty()) first = msg;
        bad.AddViolation("layer " + layer.name, msg);
      }
    }
    if (!bad.violations().empty()) {
      std::string msg = first;
      if (bad.violations().size() > 1)
        msg += " (and " + std::to_string(bad.violations().size() - 1) + " more layers)";
      msg += "; exclude those layers or choose a group size that divides their input width";
      Status s(StatusCode::kInvalidArgument, msg, "LAYER_CONFIG_MISMATCH");
      for (const auto& v : bad.violations()) s.AddViolation(v.field, v.description);
      return s;
    }
    QD_RETURN_IF_ERROR(PlanEmbedding(&quantized));
    if (quantized == 0 && !gguf_recipe_)
      Log(LogLevel::kWarning, "the configuration quantizes no layer");
    if (NeedsActivationCalibration(plans_) && opt_.calibration.dataset_path.empty())
      return Status(StatusCode::kInvalidArgument,
                    "static activation quantization needs calibration data; set "
                    "spec.calibration.dataset_uri",
                    "CALIBRATION_REQUIRED")
          .AddViolation("spec.calibration.dataset_uri", "required by static activation specs");
    return OkStatus();
  }

  // The token embedding (QuantEmbedding): quantized when a layer or type
  // config names it, weight only.
  Status PlanEmbedding(int* quantized) {
    const models::EmbeddingInfo& info = model_->layout().token_embedding;
    if (info.name.empty()) return OkStatus();
    if (obs_.CancelRequested()) return CancelledStatus("planning layer " + info.name);
    embedding_plan_ = opt_.planner(info.name, "Embedding");
    LayerPlan& plan = embedding_plan_;
    // A name glob that also matches linears may carry activation specs; the
    // embedding takes its weight spec only (CreateJob refuses them in
    // layer_type_quant_config.Embedding itself).
    if (plan.input || plan.output || plan.bias) {
      plan.input.reset();
      plan.output.reset();
      plan.bias.reset();
      if (plan.weight) {
        Log(LogLevel::kWarning, info.name +
                                    ": an embedding's input is token ids and it has no "
                                    "bias; only its weight spec applies");
      }
    }
    if (!plan.weight) return OkStatus();
    auto shape = quant::KernelShapeFor({info.num_embeddings, info.embedding_dim}, *plan.weight);
    if (!shape.ok()) {
      const std::string msg = "layer " + info.name + " [" + std::to_string(info.num_embeddings) +
                              ", " + std::to_string(info.embedding_dim) +
                              "]: " + shape.status().message();
      return Status(StatusCode::kInvalidArgument, msg, "LAYER_CONFIG_MISMATCH")
          .AddViolation("layer " + info.name, msg);
    }
    for (exporter::ExportFormat f : opt_.export_options.formats) {
      if (f == exporter::ExportFormat::kHfQuark ||
          f == exporter::ExportFormat::kCompressedTensors) {
        const std::string name = exporter::ExportFormatName(f);
        return Status(StatusCode::kInvalidArgument,
                      name + " cannot carry a quantized embedding (" + info.name +
                          "): vLLM's loader quantizes Linear layers; export hf, gguf or "
                          "onnx, or leave the embedding in float",
                      "EXPORT_FORMAT_UNSUPPORTED")
            .AddViolation("spec.export.formats", name + " with a quantized embedding");
      }
    }
    ++*quantized;
    return OkStatus();
  }

  // Fake-quantizes the token embedding's weight into the scratch store
  // (after any rotation of it), so calibration, evaluation and export all
  // see the quantized table. A head tied to the embedding keeps the float
  // weight, as in the reference (its QuantEmbedding quantizes in its own
  // forward): the head gets its own lm_head.weight and the model is
  // exported untied.
  Status QuantizeEmbedding() {
    if (!embedding_plan_.weight) return OkStatus();
    QD_ASSIGN_OR_RETURN(auto stage, model_->LoadEmbedding(*quantized_weights_));
    if (model_->config().tie_word_embeddings && !opt_.model_transform) {
      QD_ASSIGN_OR_RETURN(auto head, model_->LoadHead());
      std::vector<std::pair<std::string, at::Tensor>> tensors;
      for (auto& [name, t] : head->NamedTensors()) tensors.emplace_back(name, t->clone());
      QD_RETURN_IF_ERROR(scratch_->Put("head", tensors));
    }
    models::Embedding& token = stage->token_embedding();
    quant::QParams qp;
    QD_ASSIGN_OR_RETURN(LayerReport lr, QuantizeEmbeddingWeight(token, embedding_plan_, &qp));
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (auto& [name, t] : stage->NamedTensors()) tensors.emplace_back(name, *t);
    bytes_delta_ += RecordQuantizedWeight(token.name(), token.weight(), *embedding_plan_.weight, qp,
                                          /*with_weight=*/false, FloatBytes(token.name()), tensors);
    QD_RETURN_IF_ERROR(scratch_->Put("embedding", tensors));
    char sqnr[32];
    std::snprintf(sqnr, sizeof(sqnr), "%.1f", lr.weight_sqnr_db);
    Log(LogLevel::kInfo, token.info().name + " (Embedding): " + lr.weight_format +
                             ", weight SQNR " + sqnr + " dB" +
                             (model_->config().tie_word_embeddings
                                  ? "; lm_head keeps the float weight (exported untied)"
                                  : ""));
    return OkStatus();
  }

  // Bytes of `module`'s float weight in the checkpoint.
  int64_t FloatBytes(const std::string& module) const {
    return static_cast<int64_t>(model_->weights().Find(module + ".weight")->nbytes);
  }

  bool IsKvProjection(const std::string& name) const {
    auto ends = [&](const std::string& suffix) {
      return name.size() >= suffix.size() &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    return ends(kv_.key_suffix) || ends(kv_.value_suffix);
  }

  // One file, or a split's files as one dataset; chat conversations
  // rendered with the model's chat template.
  StatusOr<io::Dataset> LoadJobDataset(const std::string& path,
                                       const std::vector<std::string>& files,
                                       const std::string& name, const io::DatasetOptions& dopt) {
    QD_ASSIGN_OR_RETURN(io::Dataset d, files.empty() ? io::LoadDataset(path, dopt)
                                                     : io::LoadDatasetFiles(files, name, dopt));
    if (d.chat_rows.empty()) return d;
    io::ChatRenderSettings chat;
    QD_ASSIGN_OR_RETURN(exporter::GgufChatMetadata meta,
                        exporter::HfChatMetadata(opt_.model_dir, *tokenizer_));
    for (const auto& [key, value] : meta.kv) {
      if (key == "tokenizer.chat_template") chat.chat_template = value.s;
    }
    QD_ASSIGN_OR_RETURN(io::SpecialTokenConfig special, io::ReadSpecialTokenConfig(opt_.model_dir));
    chat.bos_token = special.bos_token.value_or("");
    chat.eos_token = special.eos_token.value_or("");
    QD_RETURN_IF_ERROR(io::RenderChatRows(d, chat));
    Log(LogLevel::kInfo, "dataset " + d.name + ": " + std::to_string(d.text_rows.size()) +
                             " conversations rendered with the model's chat template");
    return d;
  }

  Status LoadEvaluation() {
    if (opt_.evaluation.dataset_path.empty())
      return InvalidArgumentError("evaluation is enabled but has no dataset");
    io::DatasetOptions dopt;
    dopt.text_field = opt_.evaluation.text_field;
    QD_ASSIGN_OR_RETURN(io::Dataset data,
                        LoadJobDataset(opt_.evaluation.dataset_path, opt_.evaluation.dataset_files,
                                       opt_.evaluation.dataset_name, dopt));
    eval_dataset_name_ = data.name;
    // Tokenizing stops at the job's cancellation scope (RunQuantizationJob).
    QD_ASSIGN_OR_RETURN(std::vector<int32_t> ids, data.TextTokens(*tokenizer_));
    if (obs_.CancelRequested()) return CancelledStatus("tokenizing the evaluation data");
    eval::WindowOptions wopt;
    wopt.n_ctx = opt_.evaluation.n_ctx;
    wopt.max_windows = opt_.evaluation.max_windows;
    QD_ASSIGN_OR_RETURN(windows_, eval::MakeEvalWindows(ids, tokenizer_->bos_id(), wopt));
    return OkStatus();
  }

  // Samples on which per-block output error is measured: the calibration
  // set when the job has one, else the first full evaluation windows.
  Status LoadMetricSamples() {
    std::vector<std::vector<int32_t>> samples;
    if (!opt_.calibration.dataset_path.empty()) {
      io::DatasetOptions dopt;
      dopt.text_field = opt_.calibration.text_field;
      QD_ASSIGN_OR_RETURN(io::Dataset data, LoadJobDataset(opt_.calibration.dataset_path,
                                                           opt_.calibration.dataset_files,
                                                           opt_.calibration.dataset_name, dopt));
      QD_ASSIGN_OR_RETURN(std::vector<int32_t> stream, data.TokenStream(*tokenizer_));
      if (obs_.CancelRequested()) return CancelledStatus("tokenizing the calibration data");
      io::CalibrationOptions copt;
      copt.method = opt_.calibration.sampling;
      copt.num_samples = opt_.calibration.num_samples;
      copt.seq_len =
          std::min<int64_t>(opt_.calibration.seq_len, model_->config().max_position_embeddings);
      copt.seed = opt_.calibration.seed;
      QD_ASSIGN_OR_RETURN(io::CalibrationSet set, io::SampleCalibration(stream, copt));
      Log(LogLevel::kInfo, "calibration: " + set.description);
      samples = std::move(set.samples);
      imatrix_info_.datasets = {data.name};
      imatrix_info_.chunk_count = static_cast<uint32_t>(samples.size());
      imatrix_info_.chunk_size = samples.empty() ? 0 : static_cast<uint32_t>(samples[0].size());
    } else if (windows_) {
      for (const auto& w : windows_->windows) {
        if (static_cast<int64_t>(w.size()) != windows_->n_ctx) continue;
        samples.push_back(w);
        if (static_cast<int>(samples.size()) >= opt_.evaluation.metric_windows) break;
      }
    }
    if (samples.empty()) return OkStatus();
    const int64_t n = samples.size(), t = samples[0].size();
    metric_ids_ = at::empty({n, t}, at::kLong);
    auto acc = metric_ids_.accessor<int64_t, 2>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < t; ++j) acc[i][j] = samples[i][j];
    return OkStatus();
  }

  // ---- quantize ----

  // The model-level pieces as the quantized model has them: transformed
  // (rotation) and saved to scratch, so evaluation and export read one
  // consistent model.
  Status PrepareModelPieces() {
    if (!opt_.model_transform) return OkStatus();
    QD_ASSIGN_OR_RETURN(auto embedding, model_->LoadEmbedding());
    QD_RETURN_IF_ERROR(opt_.model_transform->TransformEmbedding(*embedding));
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (auto& [name, t] : embedding->NamedTensors()) tensors.emplace_back(name, *t);
    QD_RETURN_IF_ERROR(scratch_->Put("embedding", tensors));
    QD_ASSIGN_OR_RETURN(auto head, model_->LoadHead());
    QD_RETURN_IF_ERROR(opt_.model_transform->TransformHead(*head));
    tensors.clear();
    for (auto& [name, t] : head->NamedTensors()) tensors.emplace_back(name, *t);
    return scratch_->Put("head", tensors);
  }

  Status Quantize() {
    const Stage stage = LoopStage(opt_);
    const int n = static_cast<int>(model_->num_blocks());
    QD_RETURN_IF_ERROR(PrepareModelPieces());
    QD_RETURN_IF_ERROR(QuantizeEmbedding());
    if (!opt_.block_algorithms.empty() && !metric_ids_.defined())
      return InvalidArgumentError("quantization algorithms need calibration data");
    BlockCheckpointer checkpoint(
        *scratch_, opt_.scratch_dir, ResumeFingerprint(opt_),
        CheckpointPacer(opt_.checkpoint_cheap_seconds, opt_.checkpoint_work_per_cost), obs_);
    ResumePoint resumed = checkpoint.Resume(n, plans_);
    // Input of the current block on the quantized path; moved, so that a
    // copy placed on the device does not keep the restored one alive.
    at::Tensor hidden = std::move(resumed.hidden);
    const int start = resumed.start;
    if (start > 0) {
      act_params_ = std::move(resumed.activation_params);
      bytes_delta_ = resumed.bytes_delta;
      report_.blocks = std::move(resumed.blocks);
      // Experts the restored blocks left in float stay so in the plans the
      // rest of the job (and its export) reads.
      for (const BlockReport& b : report_.blocks)
        KeepExpertsFloat(model_->config(), b.block - 1, b.experts, plans_);
    }
    for (const auto& [name, kept] : stored_.layers) {
      if (kept.input) act_params_.inputs[name] = *kept.input;
      if (kept.output) act_params_.outputs[name] = *kept.output;
    }
    if (start == 0 && metric_ids_.defined()) {
      QD_ASSIGN_OR_RETURN(auto embedding, model_->LoadEmbedding(*quantized_weights_));
      QD_ASSIGN_OR_RETURN(hidden, embedding->Forward(metric_ids_));
    }
    if (hidden.defined())
      hidden = PlaceCalibrationActivations(hidden);
    else
      Log(LogLevel::kInfo, "block output rel-mse: not measured: no calibration data");
    // On a GPU the next block is read and staged while this one computes.
    BlockPrefetcher<std::unique_ptr<models::DecoderBlock>> blocks(
        [this](int i) { return model_->LoadBlock(i); }, !opt_.model_options.device.is_cpu());
    const BlockStep step(opt_, *model_, plans_, kv_, act_params_, *scratch_, obs_, &stored_,
                         gguf_recipe_.get());
    for (int i = start; i < n; ++i) {
      if (obs_.CancelRequested()) return JobCancelled();
      progress_.Report(stage, static_cast<double>(i) / n, i + 1, n);
      BlockWork w = step.Begin(i, n);
      QD_ASSIGN_OR_RETURN(w.block, blocks.Get(i, n));
      w.stages.Mark("load");
      QD_RETURN_IF_ERROR(step.Transform(w));
      QD_RETURN_IF_ERROR(step.FloatForward(w, hidden));
      QD_RETURN_IF_ERROR(step.MeasureSensitivity(w, hidden));
      QD_RETURN_IF_ERROR(step.RunAlgorithms(
          w, hidden,
          [&](double f, const std::string& message, const std::optional<TrainingStepInfo>& t) {
            progress_.Report(stage, (i + std::clamp(f, 0.0, 1.0)) / n, i + 1, n, message, t);
          }));
      QD_RETURN_IF_ERROR(step.RoundWeights(w));
      bytes_delta_ += w.bytes_delta;
      QD_RETURN_IF_ERROR(step.QuantizedForward(w, hidden));
      QD_RETURN_IF_ERROR(step.Persist(w));
      step.Finish(w);
      obs_.OnBlock(w.report);
      Log(LogLevel::kInfo, "block " + std::to_string(i + 1) + " stages: " + w.stages.Render());
      report_.blocks.push_back(std::move(w.report));
      QD_RETURN_IF_ERROR(checkpoint.AfterBlock(i + 1, n, hidden, bytes_delta_, report_.blocks));
    }
    QD_RETURN_IF_ERROR(scratch_->Flush());
    report_.quantized_model_bytes = report_.float_model_bytes + bytes_delta_;
    return OkStatus();
  }

  // On the device while the hidden states and the block's float output fit
  // beside a block's working set (the quantized output takes the input's
  // place, DecoderBlock::ForwardInPlace, unless the block runs in one
  // sub-batch), else in host memory; the blocks then stream sub-batches
  // (DecoderBlock::Forward). Logged.
  at::Tensor PlaceCalibrationActivations(const at::Tensor& hidden) {
    const c10::Device device = opt_.model_options.device;
    const int64_t copies =
        hidden.size(0) > opt_.model_options.SamplesPerChunk(hidden.size(1)) ? 2 : 3;
    const int64_t bytes = copies * hidden.numel() * c10::elementSize(opt_.model_options.dtype);
    const ActivationPlacement place = PlaceActivations(
        opt_.activation_offload, bytes, BlockWorkingSetBytes(model_->config(), opt_.model_options),
        device, QueryDeviceMemory(device));
    Log(LogLevel::kInfo, "calibration " + place.reason);
    if (opt_.calibration.compute_dtype != opt_.model_options.dtype && device.is_cpu()) {
      Log(LogLevel::kWarning,
          "calibration in bfloat16 on the CPU: most CPUs have no bfloat16 matrix units, so "
          "these passes are slower than float32 here; the option pays on a GPU");
    }
    if (place.on_host) return ToHost(hidden);
    return hidden.device() == device ? hidden : hidden.to(device);
  }

  // ---- evaluate ----

  Status Evaluate() {
    eval::BlockwiseModel float_model = eval::FromCausalLM(*model_);
    eval::BlockwiseModel quant_model;
    quant_model.num_blocks = model_->num_blocks();
    // A quantized embedding is evaluated frozen (real-quantized rows
    // dequantized as they are looked up), loaded once.
    std::shared_ptr<models::EmbeddingStage> frozen_embedding;
    if (embedding_plan_.weight) {
      QD_ASSIGN_OR_RETURN(auto stage, model_->LoadEmbedding(*quantized_weights_));
      models::Embedding& token = stage->token_embedding();
      QD_ASSIGN_OR_RETURN(quant::QParams qp, LoadWeightQParams(*quantized_weights_, token.name(),
                                                               *embedding_plan_.weight));
      QD_ASSIGN_OR_RETURN(FreezeReport r, FreezeEmbedding(token, *embedding_plan_.weight, qp));
      if (r.layers == 1)
        Log(LogLevel::kInfo, "evaluated the frozen embedding: " + FrozenSizeLine(r));
      frozen_embedding = std::move(stage);
    }
    quant_model.embed = [this, frozen_embedding](const at::Tensor& ids) -> StatusOr<at::Tensor> {
      if (frozen_embedding) return frozen_embedding->Forward(ids);
      QD_ASSIGN_OR_RETURN(auto stage, model_->LoadEmbedding(*quantized_weights_));
      return stage->Forward(ids);
    };
    auto act_error = std::make_shared<Status>();
    quant_model.load_block =
        [this, act_error](int64_t i) -> StatusOr<std::unique_ptr<models::DecoderBlock>> {
      if (!act_error->ok()) return *act_error;
      QD_ASSIGN_OR_RETURN(auto block, model_->LoadBlock(i, *quantized_weights_));
      QD_RETURN_IF_ERROR(FreezeForEvaluation(*block));
      if (opt_.model_transform) QD_RETURN_IF_ERROR(opt_.model_transform->InstallOnline(*block));
      QD_RETURN_IF_ERROR(InstallActivationQuantizers(*block, plans_, act_params_, act_error));
      return block;
    };
    quant_model.load_head = [this]() { return model_->LoadHead(*quantized_weights_); };

    eval::EvalOptions eopt;
    eopt.dataset = eval_dataset_name_;
    const int n = static_cast<int>(model_->num_blocks());
    eopt.on_progress = [&](const eval::EvalProgress& p) {
      progress_.Report(Stage::kEvaluate, static_cast<double>(p.block) / n,
                       static_cast<int>(p.block), n, "float and quantized perplexity");
    };
    eopt.cancelled = [this] { return obs_.CancelRequested(); };
    auto cmp = eval::CompareModels(float_model, quant_model, *windows_, eopt);
    if (cmp.ok() && !act_error->ok()) return *act_error;
    if (!cmp.ok()) {
      if (cmp.status().code() == StatusCode::kCancelled) return JobCancelled(cmp.status());
      return cmp.status();
    }
    report_.float_perplexity = cmp->reference;
    report_.quantized_perplexity = cmp->candidate;
    report_.kl_mean = cmp->kl_mean;
    report_.kl_high = cmp->kl_high;
    report_.kl_percentile = cmp->kl_percentile;
    report_.top1_agreement = cmp->top1_agreement;
    report_.frozen_linear_float_bytes = frozen_.float_bytes;
    report_.frozen_linear_bytes = frozen_.frozen_bytes;
    report_.frozen_linear_packed_bytes = frozen_.packed_bytes;
    if (frozen_.layers > 0)
      Log(LogLevel::kInfo, "evaluated " + std::to_string(frozen_.layers) +
                               " frozen linears: " + FrozenSizeLine(frozen_));
    if (!frozen_.kept_float.empty())
      Log(LogLevel::kInfo, std::to_string(frozen_.kept_float.size()) +
                               " quantized linears evaluated unfrozen (their parameters are not "
                               "expressible as codes), e.g. " +
                               frozen_.kept_float.front());
    char line[256];
    std::snprintf(line, sizeof(line), "perplexity float %.4f, quantized %.4f (%+.2f%%), KL %.5f",
                  cmp->reference.ppl, cmp->candidate.ppl,
                  100.0 * (cmp->candidate.ppl / cmp->reference.ppl - 1), cmp->kl_mean);
    Log(LogLevel::kInfo, line);
    return OkStatus();
  }

  // The quantized model is evaluated with real-quantized storage: each
  // quantized linear holds codes and scales (freeze.h), which dequantize to
  // exactly the fake-quantized weights.
  Status FreezeForEvaluation(models::DecoderBlock& block) {
    std::map<std::string, quant::QParams> qparams;
    for (models::Linear* l : block.linears()) {
      const LayerPlan& plan = plans_.at(l->name());
      if (!plan.weight) continue;
      QD_ASSIGN_OR_RETURN(qparams[l->name()],
                          LoadWeightQParams(*quantized_weights_, l->name(), *plan.weight));
    }
    QD_ASSIGN_OR_RETURN(FreezeReport r, FreezeBlock(block, plans_, qparams));
    std::lock_guard<std::mutex> lock(frozen_mu_);
    frozen_ += r;
    return OkStatus();
  }

  // ---- export ----

  Status Export() {
    const auto& formats = opt_.export_options.formats;
    // The exporters' view of the result: values from the scratch store over
    // the checkpoint, the exact weight parameters, calibrated activations.
    const auto exported = std::make_unique<PipelineQuantizedModel>(
        opt_.model_dir, *model_, quantized_weights_, plans_, opt_.quant_config, act_params_.inputs,
        act_params_.outputs);
    for (size_t i = 0; i < formats.size(); ++i) {
      if (obs_.CancelRequested()) return JobCancelled();
      std::string dir = opt_.export_options.output_dir;
      if (formats.size() > 1)
        dir = (fs::path(dir) / exporter::ExportFormatName(formats[i])).string();
      exporter::ExportOptions eo;
      eo.output_dir = dir;
      eo.overwrite = opt_.export_options.overwrite;
      eo.output_owner = {opt_.export_options.output_root, opt_.job_name,
                         opt_.export_options.tenant};
      eo.min_kv_scale = kv_.min_kv_scale;
      eo.gguf_float_type = opt_.export_options.gguf_float_type;
      eo.gguf_recipe = gguf_recipe_;
      eo.gguf_imatrix_info = imatrix_info_;
      eo.target = opt_.export_options.target;
      if (embedding_plan_.weight && formats[i] == exporter::ExportFormat::kGguf &&
          eo.gguf_float_type != gguf::GgmlType::kF32) {
        // The quantized embedding is written as its values, with the float
        // tensors: F16 / BF16 round them again.
        Log(LogLevel::kWarning,
            std::string("gguf: the quantized embedding is written as its values in ") +
                gguf::GetGgmlTypeTraits(eo.gguf_float_type).name +
                ", which rounds them (gguf float type F32 keeps them exact)");
      }
      const double base = static_cast<double>(i) / formats.size();
      auto result = exporter::ExportModel(*exported, formats[i], eo, [&](int done, int total) {
        progress_.Report(Stage::kExport, base + static_cast<double>(done) / total / formats.size());
      });
      if (!result.ok()) return result.status();
      for (const std::string& note : result->notes) Log(LogLevel::kWarning, note);
      for (const std::string& line : result->info) Log(LogLevel::kInfo, line);
      Log(LogLevel::kInfo, std::string("wrote ") + exporter::ExportFormatName(formats[i]) + " to " +
                               result->artifact.path);
      report_.artifacts.push_back(std::move(result->artifact));
    }
    return OkStatus();
  }

  const JobOptions& opt_;
  JobObserver& obs_;
  JobProgress progress_;
  JobReport report_;

  // A quantized checkpoint the model reads dequantized (declared first: the
  // model holds its source).
  std::unique_ptr<exporter::QuantizedModel> stored_model_;
  StoredQuantization stored_;
  std::unique_ptr<models::CausalLM> model_;
  std::unique_ptr<io::Tokenizer> tokenizer_;
  std::unique_ptr<ScratchStore> scratch_;
  std::shared_ptr<io::TensorSource> quantized_weights_;
  // Set for a job with a llama.cpp recipe: the model's weights.
  std::shared_ptr<const gguf::GgufRecipeWeights> gguf_recipe_;
  // What the calibration set was, for the imatrix file of a recipe job.
  gguf::ImatrixInfo imatrix_info_;
  LayerPlan embedding_plan_;
  std::map<std::string, LayerPlan> plans_;
  std::optional<eval::EvalWindows> windows_;
  std::string eval_dataset_name_;
  at::Tensor metric_ids_;
  int64_t bytes_delta_ = 0;  // quantized minus float bytes of the quantized tensors
  KvCacheOptions kv_;
  ActivationParams act_params_;  // calibrated static activation parameters
  std::mutex frozen_mu_;
  FreezeReport frozen_;  // evaluation's frozen linears
};

}  // namespace

JobOutcome RunQuantizationJob(const JobOptions& options, JobObserver& observer) {
  // Every long loop below, however deep, stops when the observer asks
  // (worker/common/cancellation.h).
  CancellationScope scope([&observer] { return observer.CancelRequested(); });
  QuantizationJob job(options, observer);
  return job.Run();
}

}  // namespace quantd::pipeline
