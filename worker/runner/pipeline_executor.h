// PipelineExecutor: runs a leased job on the engine.
//
// It resolves the spec once (job_spec::ResolveJob, which checks it again: this
// worker may be a different build than the frontend), checks every URI
// against the worker's roots and resolves the model and dataset URIs to
// local paths, runs pipeline::RunQuantizationJob in a scratch directory of
// its own, streams the engine's progress, block metrics and logs as job
// events, and translates the report into the JobResult sent to quantd.
#ifndef QUANTD_WORKER_RUNNER_PIPELINE_EXECUTOR_H_
#define QUANTD_WORKER_RUNNER_PIPELINE_EXECUTOR_H_

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "worker/io/uri/model_files.h"
#include "worker/io/uri/uri.h"
#include "worker/io/uri/uri_roots.h"
#include "worker/job_spec/resolve_job.h"
#include "worker/pipeline/job_options.h"
#include "worker/precision/auto_precision_job.h"
#include "worker/runner/lease_loop.h"

namespace quantd::worker {

struct PipelineExecutorOptions {
  // Scratch space: <data_dir>/scratch/<job id>; downloads: <data_dir>/cache;
  // the default output: <data_dir>/artifacts/<job id>; the confined view of
  // a job's model directory: <data_dir>/inputs/<job id>/.
  std::string data_dir;
  // Which URIs a job may name (worker/io/uri/uri_roots.h), enforced here
  // whatever the frontend said: inputs under the roots, outputs below a file
  // root or <data_dir>/artifacts/ (per-tenant roots with the job's tenant),
  // written without following symlinks (worker/export/artifact.h); the model
  // directory is read through a confined view (worker/io/uri/model_files.h).
  // Null: no restriction (the standalone CLI, whose user names their own
  // files).
  std::shared_ptr<const io::UriRoots> roots;
  std::string hf_cache_dir;  // empty: $HF_HUB_CACHE / $HF_HOME/hub / ~/.cache/huggingface/hub
  // The Hub for hf:// models (empty: offline, the cache alone) and a token
  // for private or gated repositories (never written anywhere).
  std::string hf_endpoint;
  std::string hf_token;
  // s3:// inputs and outputs (endpoint, region, credentials; never written
  // anywhere). An empty endpoint refuses s3://.
  io::S3Options s3;
  // Keep a job's scratch directory after it ends (debugging).
  bool keep_scratch = false;
  // Where blocks run: "cpu" or "cuda:N" (checked by the binary at startup,
  // before LibTorch runs a kernel). A job's spec.device only selects which
  // workers may lease it; the worker's own device is the one used.
  std::string device = "cpu";
  // On a GPU, where calibration activations live between blocks
  // (pipeline/activation_placement.h): auto, or forced host / device.
  pipeline::ActivationOffload activation_offload = pipeline::ActivationOffload::kAuto;
};

class PipelineExecutor : public JobExecutor {
 public:
  explicit PipelineExecutor(PipelineExecutorOptions options) : options_(std::move(options)) {}
  // Resolves job.spec() and runs it.
  ExecutionOutcome Execute(const quantd::v1::Job& job, JobContext& ctx) override;
  // Runs a job whose spec the caller resolved (quantd-quantize, which
  // reports the refusal and the warnings before the run).
  ExecutionOutcome Execute(const quantd::v1::Job& job, const job_spec::ResolvedJob& resolved,
                           JobContext& ctx);

  // The engine's options for a resolved job: URIs resolved to local paths,
  // algorithms made for the planner, defaults applied.
  // With `ctx`, a model fetched from the Hub reports its download progress
  // there; `model`, when given, receives what resolving spec.model_uri found
  // (for hf://, the commit and the files fetched); `remote_output`, when
  // given, the s3:// output (the export then goes to a local staging
  // directory, uploaded after the run).
  StatusOr<pipeline::JobOptions> BuildOptions(
      const quantd::v1::Job& job, const job_spec::ResolvedJob& resolved, JobContext* ctx = nullptr,
      io::ResolvedUri* model = nullptr,
      std::optional<io::OutputLocation>* remote_output = nullptr) const;
  // The same after resolving job.spec().
  StatusOr<pipeline::JobOptions> BuildOptions(const quantd::v1::Job& job) const;

 private:
  // spec.auto_precision as the search takes it, its cache in the worker's
  // data directory.
  precision::AutoPrecisionOptions AutoPrecisionOf(const quantd::v1::JobSpec& spec) const;
  StatusOr<io::ResolvedUri> Resolve(const std::string& field, const std::string& uri,
                                    const std::string& tenant, JobContext* ctx = nullptr) const;
  // The confined view the engine reads the model through (model_files.h),
  // under `inputs`: a directory's listed files when the worker has roots;
  // a GGUF file always, as model.gguf beside the config.json and chat
  // template made from its metadata (gguf_model_dir.h). Null for a local
  // run's directory, which is read as it is.
  // Uploads each artifact of `result` (exported below `local_dir`) to the
  // s3:// output and points its URI there; the local copy is removed.
  Status UploadArtifacts(const io::OutputLocation& remote, const std::string& local_dir,
                         const std::string& job_name, quantd::v1::JobResult& result) const;
  StatusOr<std::unique_ptr<io::ModelFiles>> OpenModelView(const std::string& model_path,
                                                          const std::filesystem::path& inputs,
                                                          const std::string& tenant) const;

  PipelineExecutorOptions options_;
};

}  // namespace quantd::worker

#endif  // QUANTD_WORKER_RUNNER_PIPELINE_EXECUTOR_H_
