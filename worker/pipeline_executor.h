// PipelineExecutor: runs a leased job on the engine.
//
// It re-checks the spec, resolves the model and dataset URIs to local paths
// (within the configured roots), turns the quantization settings into a
// layer planner, runs pipeline::RunQuantizationJob in a scratch directory of
// its own, streams the engine's progress, block metrics and logs as job
// events, and translates the report into the JobResult sent to quantd.
#ifndef QUANTD_WORKER_PIPELINE_EXECUTOR_H_
#define QUANTD_WORKER_PIPELINE_EXECUTOR_H_

#include <string>
#include <vector>

#include "worker/io/uri/uri.h"
#include "worker/lease_loop.h"
#include "worker/pipeline/job_options.h"

namespace quantd::worker {

struct PipelineExecutorOptions {
  // Scratch space: <data_dir>/scratch/<job id>; downloads: <data_dir>/cache.
  std::string data_dir;
  // Model, data and output locations must resolve under these (empty: any).
  std::vector<std::string> allowed_roots;
  std::string hf_cache_dir;  // empty: $HF_HUB_CACHE / $HF_HOME/hub / ~/.cache/huggingface/hub
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
  ExecutionOutcome Execute(const quantd::v1::Job& job, JobContext& ctx) override;

  // The engine's options for a job: URIs resolved to local paths, the
  // quantization settings resolved to a layer planner, defaults applied.
  StatusOr<pipeline::JobOptions> BuildOptions(const quantd::v1::Job& job) const;

 private:
  StatusOr<std::string> Resolve(const std::string& field, const std::string& uri) const;

  PipelineExecutorOptions options_;
};

}  // namespace quantd::worker

#endif  // QUANTD_WORKER_PIPELINE_EXECUTOR_H_
