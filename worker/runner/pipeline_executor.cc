#include "worker/runner/pipeline_executor.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <tuple>

#include "worker/algo/block_qat.h"
#include "worker/algo/registry.h"
#include "worker/common/cancellation.h"
#include "worker/config/presets.h"
#include "worker/export/artifact.h"
#include "worker/export/hf/hf_files.h"
#include "worker/io/gguf/gguf_model_dir.h"
#include "worker/io/uri/model_files.h"
#include "worker/job_spec/quantization_settings.h"
#include "worker/pipeline/quantization_job.h"
#include "worker/precision/auto_precision_job.h"
#include "worker/runner/job_translation.h"
#include "worker/torchscript/script_job.h"

namespace quantd::worker {
namespace {

namespace fs = std::filesystem;

// Forwards the engine's reports to the frontend as job events.
class EventForwarder : public pipeline::JobObserver {
 public:
  explicit EventForwarder(JobContext& ctx) : ctx_(ctx) {}
  void OnProgress(const pipeline::ProgressInfo& p) override { ctx_.SetProgress(ToProto(p)); }
  void OnLog(pipeline::LogLevel level, const std::string& message) override {
    quantd::v1::JobEvent ev;
    ev.mutable_log()->set_severity(level == pipeline::LogLevel::kError     ? quantd::v1::ERROR
                                   : level == pipeline::LogLevel::kWarning ? quantd::v1::WARNING
                                                                           : quantd::v1::INFO);
    ev.mutable_log()->set_message(message);
    ctx_.Report(std::move(ev));
  }
  void OnBlock(const pipeline::BlockReport& block) override {
    quantd::v1::JobEvent ev;
    *ev.mutable_block_metrics() = ToProto(block);
    ctx_.Report(std::move(ev));
  }
  bool CancelRequested() const override { return ctx_.CancelRequested(); }

 private:
  JobContext& ctx_;
};

// Views left by workers that were killed (<job id>-<pid> of a process that
// is gone); workers may share a data directory.
void RemoveDeadViews(const fs::path& inputs) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(inputs, ec)) {
    const std::string name = e.path().filename().string();
    const size_t dash = name.rfind('-');
    if (dash == std::string::npos) continue;
    const long pid = std::strtol(name.c_str() + dash + 1, nullptr, 10);
    if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) {
      std::error_code rm;
      fs::remove_all(e.path(), rm);
    }
  }
}

// The files of a model directory the engine reads: those a view holds and
// those fetched from the Hub.
void ModelFileNames(std::vector<std::string>& names, std::vector<std::string>& suffixes) {
  names = {"config.json", "model.safetensors.index.json"};
  for (const char* name : exporter::kHfSideFiles) names.push_back(name);
  suffixes = {".safetensors"};
}

// The name a TorchScript model file has in its view.
constexpr char kScriptModelFileName[] = "model.pt";

std::string JobId(const std::string& name) {
  auto slash = name.rfind('/');
  return slash == std::string::npos ? name : name.substr(slash + 1);
}

}  // namespace

StatusOr<io::ResolvedUri> PipelineExecutor::Resolve(const std::string& field,
                                                    const std::string& uri,
                                                    const std::string& tenant,
                                                    JobContext* ctx) const {
  io::UriOptions opt;
  if (options_.roots != nullptr) {
    Status allowed = options_.roots->CheckInput(uri, tenant);
    if (!allowed.ok()) return allowed.Prepend(field + ": ");
    opt.allowed_roots = options_.roots->InputDirectories(tenant);
  }
  opt.hf_cache_dir = options_.hf_cache_dir;
  opt.hf_endpoint = options_.hf_endpoint;
  opt.hf_token = options_.hf_token;
  ModelFileNames(opt.model_files, opt.model_file_suffixes);
  opt.s3 = options_.s3;
  if (ctx != nullptr) {
    opt.on_hub_progress = [ctx](const io::HubFileProgress& p) {
      quantd::v1::Progress progress;
      progress.set_stage(quantd::v1::LOAD);
      const bool big = p.bytes_total >= (1u << 20);
      const double unit = big ? 1048576.0 : 1024.0;
      char amount[64];
      std::snprintf(amount, sizeof(amount), "%.1f of %.1f %s", p.bytes_done / unit,
                    p.bytes_total / unit, big ? "MiB" : "KiB");
      progress.set_message("downloading " + p.file + ": " + amount);
      ctx->SetProgress(progress);
    };
  }
  opt.download_cache_dir = (fs::path(options_.data_dir) / "cache").string();
  auto r = io::ResolveUri({uri, ""}, opt);
  if (!r.ok()) return Status(r.status()).Prepend(field + " " + io::QuoteUri(uri) + ": ");
  return *std::move(r);
}

namespace {

// The spec.qat settings a language model cannot take, every one named.
Status LanguageModelQatCheck(const pipeline::JobOptions& o) {
  std::vector<FieldViolation> bad;
  const pipeline::QatOptions& q = *o.qat;
  if (!q.dataset_path.empty()) {
    bad.push_back({"spec.qat.dataset_uri",
                   "a language model trains on its calibration samples "
                   "(spec.calibration.dataset_uri)"});
  }
  if (q.loss != pipeline::QatOptions::Loss::kAuto &&
      q.loss != pipeline::QatOptions::Loss::kDistillation) {
    bad.push_back({"spec.qat.loss",
                   "a language model trains each decoder block against its float outputs "
                   "(distillation)"});
  }
  if (o.calibration.dataset_path.empty()) {
    bad.push_back({"spec.calibration.dataset_uri",
                   "quantization-aware training of a language model needs calibration text"});
  }
  for (const auto& a : o.block_algorithms) {
    if (std::string(a->name()) == "gptq") {
      bad.push_back({"spec.qat", "trains the weights GPTQ would fit: choose one of gptq and qat"});
    }
  }
  if (bad.empty()) return OkStatus();
  Status s(StatusCode::kInvalidArgument, bad.front().field + ": " + bad.front().description,
           "INVALID_QAT");
  for (const auto& v : bad) s.AddViolation(v.field, v.description);
  return s;
}

}  // namespace

StatusOr<pipeline::JobOptions> PipelineExecutor::BuildOptions(const quantd::v1::Job& job) const {
  QD_ASSIGN_OR_RETURN(job_spec::ResolvedJob resolved, job_spec::ResolveJob(job.spec()));
  return BuildOptions(job, resolved);
}

StatusOr<pipeline::JobOptions> PipelineExecutor::BuildOptions(
    const quantd::v1::Job& job, const job_spec::ResolvedJob& resolved, JobContext* ctx,
    io::ResolvedUri* model, std::optional<io::OutputLocation>* remote_output) const {
  pipeline::JobOptions o;
  QD_ASSIGN_OR_RETURN(io::ResolvedUri model_uri,
                      Resolve("spec.model_uri", resolved.model_uri, job.tenant(), ctx));
  o.model_dir = model_uri.local_path;
  if (model != nullptr) *model = std::move(model_uri);
  const job_spec::ResolvedQuantization& q = resolved.quantization;
  o.planner = q.planner;
  o.quant_config = q.config;
  o.quantization_description = q.description;
  if (!q.config.algorithms.empty()) {
    QD_ASSIGN_OR_RETURN(algo::AlgorithmSet algorithms,
                        algo::MakeAlgorithms(q.config.algorithms, o.planner));
    for (auto& a : algorithms.block_algorithms) o.block_algorithms.push_back(std::move(a));
    o.model_transform = std::move(algorithms.model_transform);
  }
  // kv_cache_quant_config of a config or JSON, or the FP8 KV cache.
  o.kv_cache = q.kv_cache;
  o.min_kv_scale = q.min_kv_scale;

  const job_spec::CalibrationSettings& cal = resolved.calibration;
  if (!cal.dataset_uri.empty()) {
    QD_ASSIGN_OR_RETURN(io::ResolvedUri data, Resolve("spec.calibration.dataset_uri",
                                                      cal.dataset_uri, job.tenant(), ctx));
    o.calibration.dataset_path = data.local_path;
    o.calibration.dataset_revision = data.revision;
    o.calibration.dataset_files = data.files;
    o.calibration.dataset_name = data.dataset_name;
    if (!data.field.empty()) o.calibration.text_field = data.field;
  }
  if (cal.text_field) o.calibration.text_field = *cal.text_field;
  if (cal.num_samples) o.calibration.num_samples = *cal.num_samples;
  o.tensor_model.calibration_samples = cal.num_samples;
  if (job.spec().quantization().has_fold_batchnorm()) {
    o.tensor_model.fold_batchnorm = job.spec().quantization().fold_batchnorm();
  }
  if (job.spec().has_qat()) {
    const quantd::v1::QatSpec& qs = job.spec().qat();
    pipeline::QatOptions qat;
    qat.steps = qs.steps();
    if (qs.has_learning_rate()) qat.learning_rate = qs.learning_rate();
    if (qs.has_batch_size()) qat.batch_size = qs.batch_size();
    if (!qs.dataset_uri().empty()) {
      QD_ASSIGN_OR_RETURN(io::ResolvedUri data,
                          Resolve("spec.qat.dataset_uri", qs.dataset_uri(), job.tenant(), ctx));
      qat.dataset_path = data.local_path;
    }
    switch (qs.loss()) {
      case quantd::v1::QAT_LOSS_CROSS_ENTROPY:
        qat.loss = pipeline::QatOptions::Loss::kCrossEntropy;
        break;
      case quantd::v1::QAT_LOSS_MSE:
        qat.loss = pipeline::QatOptions::Loss::kMse;
        break;
      case quantd::v1::QAT_LOSS_DISTILLATION:
        qat.loss = pipeline::QatOptions::Loss::kDistillation;
        break;
      default:
        break;
    }
    qat.train_biases = qs.parameters() == quantd::v1::QAT_WEIGHTS_AND_BIASES;
    qat.learn_scales = qs.learn_scales();
    qat.seed = qs.seed();
    o.qat = qat;
  }
  for (const std::string& name : job.spec().sensitivity().candidates()) {
    QD_ASSIGN_OR_RETURN(config::QuantConfig c, config::PresetConfig(name));
    o.sensitivity.push_back({name, job_spec::PlannerFor(std::move(c))});
  }
  if (cal.seq_len) o.calibration.seq_len = *cal.seq_len;
  if (cal.sampling) o.calibration.sampling = *cal.sampling;  // unset: the engine's default
  o.calibration.seed = cal.seed;
  o.calibration.on_float_outputs = cal.on_float_outputs;
  if (cal.bfloat16_compute) o.calibration.compute_dtype = at::kBFloat16;
  if (cal.min_expert_tokens) o.calibration.min_expert_tokens = *cal.min_expert_tokens;
  o.calibration.keep_starved_experts_float = cal.keep_starved_experts_float;

  const job_spec::EvaluationSettings& ev = resolved.evaluation;
  o.evaluation.enabled = ev.enabled();
  if (o.evaluation.enabled) {
    QD_ASSIGN_OR_RETURN(io::ResolvedUri data,
                        Resolve("spec.evaluation.dataset_uri", ev.dataset_uri, job.tenant(), ctx));
    o.evaluation.dataset_path = data.local_path;
    o.evaluation.dataset_revision = data.revision;
    o.evaluation.dataset_files = data.files;
    o.evaluation.dataset_name = data.dataset_name;
    if (!data.field.empty()) o.evaluation.text_field = data.field;
  }
  if (ev.text_field) o.evaluation.text_field = *ev.text_field;
  if (ev.n_ctx) o.evaluation.n_ctx = *ev.n_ctx;
  o.evaluation.max_windows = ev.max_windows;
  o.evaluation.max_perplexity_increase = ev.max_perplexity_increase;
  o.evaluation.max_kl_divergence = ev.max_kl_divergence;
  o.evaluation.max_accuracy_drop = ev.max_accuracy_drop;

  const job_spec::ExportSettings& ex = resolved.export_settings;
  o.export_options.formats = ex.formats;
  o.export_options.formats_given = ex.formats_given;
  // The output goes where the one URI parser says, and nowhere else.
  const std::string output_uri =
      ex.output_uri.empty()
          ? io::PathToFileUri(options_.data_dir + "/artifacts/" + JobId(job.name()))
          : ex.output_uri;
  std::optional<io::OutputLocation> remote;
  if (options_.roots != nullptr) {
    auto where = options_.roots->CheckOutput(output_uri, job.tenant());
    if (!where.ok()) return Status(where.status()).Prepend("spec.export.output_uri: ");
    if (where->scheme == "s3") {
      remote = *where;
    } else {
      o.export_options.output_dir = where->path;
      o.export_options.output_root = where->base;
    }
  } else {
    auto parsed = io::ParseUri(output_uri);
    if (!parsed.ok()) return Status(parsed.status()).Prepend("spec.export.output_uri: ");
    if (parsed->scheme == "s3") {
      io::OutputLocation loc;
      loc.scheme = "s3";
      loc.bucket = parsed->host;
      loc.path = parsed->path;
      remote = loc;
    } else if (parsed->scheme != "file") {
      return InvalidArgumentError("spec.export.output_uri: " + io::QuoteUri(output_uri) +
                                  " is not a file:// or s3:// URI");
    } else {
      o.export_options.output_dir = parsed->path;
    }
  }
  if (remote) {
    if (remote->path.size() <= 1) {
      return InvalidArgumentError("spec.export.output_uri: " + io::QuoteUri(output_uri) +
                                  " names a whole bucket; an output is a prefix in it");
    }
    if (options_.s3.endpoint.empty()) {
      return FailedPreconditionError("spec.export.output_uri: this worker has no S3 endpoint");
    }
    // Exported here first, uploaded after the run (UploadArtifacts).
    o.export_options.output_root = options_.data_dir + "/artifacts";
    o.export_options.output_dir =
        o.export_options.output_root + "/" + JobId(job.name()) + "-upload";
    if (remote_output != nullptr) *remote_output = remote;
  }
  o.export_options.tenant = job.tenant();
  o.export_options.overwrite = ex.overwrite;
  o.export_options.gguf_float_type = ex.gguf_float_type;
  o.export_options.target = ex.target;
  o.export_options.gguf_recipe = ex.gguf_recipe;
  o.scratch_dir = (fs::path(options_.data_dir) / "scratch" / JobId(job.name())).string();
  try {
    o.model_options = models::ModelOptions::For(at::Device(options_.device));
    o.activation_offload = options_.activation_offload;
  } catch (const c10::Error&) {
    return InvalidArgumentError("worker device '" + options_.device + "' is not a device");
  }
  o.job_name = job.name();
  return o;
}

ExecutionOutcome PipelineExecutor::Execute(const quantd::v1::Job& job, JobContext& ctx) {
  // A cancel or a lost lease (ctx) stops the spec check too.
  CancellationScope scope([&ctx] { return ctx.CancelRequested(); });
  // The frontend checked the spec at CreateJob; resolve (and so check) it
  // again, since this worker may be a different build than the frontend.
  StatusOr<job_spec::ResolvedJob> resolved = job_spec::ResolveJob(job.spec());
  if (!resolved.ok()) {
    ExecutionOutcome out;
    out.status = resolved.status();
    return out;
  }
  return Execute(job, *resolved, ctx);
}

Status PipelineExecutor::UploadArtifacts(const io::OutputLocation& remote,
                                         const std::string& local_dir, const std::string& job_name,
                                         quantd::v1::JobResult& result) const {
  const io::S3Client s3(options_.s3);
  const std::string prefix = remote.path.substr(1);
  for (quantd::v1::Artifact& a : *result.mutable_artifacts()) {
    auto parsed = io::ParseUri(a.uri());
    if (!parsed.ok() || parsed->scheme != "file" || !io::PathIsUnder(parsed->path, local_dir)) {
      return InternalError("artifact " + io::QuoteUri(a.uri()) + " is not in " + local_dir);
    }
    const std::string sub = parsed->path.substr(local_dir.size());  // "" or "/<format>"
    std::vector<std::string> files;
    for (const auto& f : a.files()) files.push_back(f.path());
    QD_ASSIGN_OR_RETURN(std::vector<io::S3UploadedFile> uploaded,
                        s3.UploadFiles(parsed->path, files, remote.bucket, prefix + sub, job_name));
    // What went up is what the export measured.
    std::map<std::string, std::string> sha;
    for (const auto& f : uploaded) sha[f.path] = f.sha256;
    for (const auto& f : a.files()) {
      if (sha[f.path()] != f.sha256()) {
        return DataLossError("uploaded " + f.path() + " differs from the exported file");
      }
    }
    a.set_uri("s3://" + remote.bucket + "/" + prefix + sub);
  }
  std::error_code ec;
  fs::remove_all(local_dir, ec);
  return OkStatus();
}

StatusOr<std::unique_ptr<io::ModelFiles>> PipelineExecutor::OpenModelView(
    const std::string& model_path, const fs::path& inputs, const std::string& tenant) const {
  struct stat st;
  const bool one_file = stat(model_path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  // A local run (no roots) reads a model directory as it is; a GGUF file
  // always needs a view, to hold the files made from its metadata.
  if (options_.roots == nullptr && !one_file) return std::unique_ptr<io::ModelFiles>();
  RemoveDeadViews(inputs.parent_path());
  io::ModelFilesOptions mf;
  ModelFileNames(mf.names, mf.suffixes);
  mf.allowed_dirs = options_.roots != nullptr ? options_.roots->InputDirectories(tenant)
                                              : std::vector<std::string>{"/"};
  if (!one_file) {
    return io::ModelFiles::Open(model_path, (inputs / fs::path(model_path).filename()).string(),
                                mf);
  }
  // Only the checked file is read, under the name the engine looks for. The
  // view is named after the file (the GGUF export's general.name), never
  // "." or ".." (a file named "...gguf" would make the view the inputs
  // directory itself, which is removed with the view).
  std::string stem = fs::path(model_path).stem().string();
  if (stem.empty() || stem == "." || stem == "..") stem = "model";
  const std::string view = (inputs / stem).string();
  if (torchscript::IsScriptModelPath(model_path)) {
    return io::ModelFiles::OpenFile(model_path, view, kScriptModelFileName, mf);
  }
  QD_ASSIGN_OR_RETURN(auto files,
                      io::ModelFiles::OpenFile(model_path, view, gguf::kGgufModelFileName, mf));
  const std::string in_view = view + "/" + gguf::kGgufModelFileName;
  if (!gguf::LooksLikeGguf(in_view)) {
    return InvalidArgumentError(model_path +
                                " is a file but neither a GGUF file nor a TorchScript archive; a "
                                "model is a Hugging Face directory (config.json and "
                                "safetensors), a .gguf file or a torch.jit.save'd module");
  }
  Status made = gguf::WriteGgufModelDir(view);
  if (!made.ok()) {
    // Name the tenant's file, not the view's.
    std::string message = made.message();
    for (size_t at = message.find(in_view); at != std::string::npos;
         at = message.find(in_view, at + model_path.size())) {
      message.replace(at, in_view.size(), model_path);
    }
    return Status(made.code(), message, made.reason());
  }
  return files;
}

precision::AutoPrecisionOptions PipelineExecutor::AutoPrecisionOf(
    const quantd::v1::JobSpec& spec) const {
  precision::AutoPrecisionOptions o;
  const auto& ap = spec.auto_precision();
  o.candidates.assign(ap.candidates().begin(), ap.candidates().end());
  if (spec.quantization().has_group_size()) o.group_size = spec.quantization().group_size();
  if (ap.has_max_rounds()) o.max_rounds = ap.max_rounds();
  o.cost_per_weight.insert(ap.cost_per_weight().begin(), ap.cost_per_weight().end());
  o.cache_dir = (fs::path(options_.data_dir) / "cache" / "auto_precision").string();
  return o;
}

ExecutionOutcome PipelineExecutor::Execute(const quantd::v1::Job& job,
                                           const job_spec::ResolvedJob& resolved, JobContext& ctx) {
  ExecutionOutcome out;
  // A cancel or a lost lease (ctx) stops every long loop below, planning
  // included, not only the block loop.
  CancellationScope scope([&ctx] { return ctx.CancelRequested(); });
  io::ResolvedUri model;
  std::optional<io::OutputLocation> remote;
  auto options = BuildOptions(job, resolved, &ctx, &model, &remote);
  if (!options.ok()) {
    out.status = options.status();
    return out;
  }
  // An output that cannot be written fails the job now, not after hours of
  // quantizing (the export checks again when it writes).
  const auto& ex = options->export_options;
  std::error_code made;
  fs::create_directories(fs::path(options_.data_dir) / "artifacts", made);
  for (const exporter::ExportFormat format : ex.formats) {
    std::string dir = ex.output_dir;
    if (ex.formats.size() > 1) dir += std::string("/") + exporter::ExportFormatName(format);
    Status writable =
        exporter::CheckOutputWritable(dir, ex.overwrite, {ex.output_root, job.name(), ex.tenant});
    if (!writable.ok()) {
      out.status = writable.Prepend("spec.export.output_uri: ");
      return out;
    }
  }
  // The engine reads the model through a confined view (OpenModelView).
  std::unique_ptr<io::ModelFiles> model_files;
  const fs::path inputs = fs::path(options_.data_dir) / "inputs" /
                          (JobId(job.name()) + "-" + std::to_string(::getpid()));
  auto view = OpenModelView(options->model_dir, inputs, job.tenant());
  if (!view.ok()) {
    out.status = Status(view.status()).Prepend("spec.model_uri: ");
    std::error_code ec;
    fs::remove(inputs, ec);
    return out;
  }
  model_files = *std::move(view);
  if (model_files != nullptr) {
    options->model_source = options->model_dir;
    options->model_dir = model_files->view_dir();
    const std::string script = options->model_dir + "/" + kScriptModelFileName;
    if (torchscript::IsScriptModelPath(script)) options->model_dir = script;
  }
  EventForwarder forwarder(ctx);
  if (!model.revision.empty()) {
    forwarder.OnLog(pipeline::LogLevel::kInfo,
                    "spec.model_uri " + resolved.model_uri + ": commit " + model.revision +
                        (model.files_downloaded > 0
                             ? " (" + std::to_string(model.files_downloaded) + " files, " +
                                   std::to_string(model.bytes_downloaded) + " bytes downloaded)"
                             : " (from the cache)"));
  }
  for (const auto& [field, revision, name] :
       {std::tuple{"spec.calibration.dataset_uri", options->calibration.dataset_revision,
                   options->calibration.dataset_name},
        std::tuple{"spec.evaluation.dataset_uri", options->evaluation.dataset_revision,
                   options->evaluation.dataset_name}}) {
    if (!revision.empty())
      forwarder.OnLog(pipeline::LogLevel::kInfo,
                      std::string(field) + " " + name + ": commit " + revision);
  }
  if (!model.warning.empty()) {
    forwarder.OnLog(pipeline::LogLevel::kWarning, "spec.model_uri: " + model.warning);
  }
  if (!resolved.evaluation.disabled && resolved.evaluation.dataset_uri.empty())
    forwarder.OnLog(
        pipeline::LogLevel::kWarning,
        "no evaluation dataset (spec.evaluation.dataset_uri): perplexity is not measured");
  const bool script = torchscript::IsScriptModelPath(options->model_dir);
  if (!script && options->qat) {
    // A language model trains block by block on its calibration samples.
    Status refused = LanguageModelQatCheck(*options);
    if (!refused.ok()) {
      out.status = refused;
      return out;
    }
    options->block_algorithms.push_back(std::make_shared<algo::BlockQat>(*options->qat));
  }
  if (!script && options->tensor_model.fold_batchnorm) {
    forwarder.OnLog(pipeline::LogLevel::kWarning,
                    "spec.quantization.fold_batchnorm applies to TorchScript models; this model "
                    "has no batch norms to fold");
  }
  pipeline::JobOutcome result;
  if (job.spec().has_auto_precision()) {
    result = precision::RunAutoPrecisionJob(*options, AutoPrecisionOf(job.spec()), forwarder);
  } else if (script) {
    result = torchscript::RunScriptJob(*options, forwarder);
  } else {
    result = pipeline::RunQuantizationJob(*options, forwarder);
  }
  out.status = result.status;
  out.cancelled = result.cancelled;
  out.result = ToProto(result.report, job.spec());
  out.result.set_resolved_revision(model.revision);
  out.result.set_calibration_dataset_revision(options->calibration.dataset_revision);
  out.result.set_evaluation_dataset_revision(options->evaluation.dataset_revision);
  if (remote && out.status.ok() && !out.cancelled) {
    forwarder.OnLog(pipeline::LogLevel::kInfo,
                    "uploading the artifacts to s3://" + remote->bucket + remote->path);
    Status uploaded =
        UploadArtifacts(*remote, options->export_options.output_dir, job.name(), out.result);
    if (!uploaded.ok()) out.status = uploaded.Prepend("spec.export.output_uri: ");
  }
  if (!options_.keep_scratch) {
    std::error_code ec;
    fs::remove_all(options->scratch_dir, ec);
  }
  model_files.reset();
  std::error_code ec;
  fs::remove(inputs, ec);  // empty once the view is gone
  return out;
}

}  // namespace quantd::worker
