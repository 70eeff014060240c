// BlockStep: one decoder block of a job's quantize loop
// (quantization_job.cc), as stages with what each reads and writes.
// Run in this order on a BlockWork:
//
//   Begin             starts the block's clock and the device allocator peaks
//   (prefetch)        the loop fills work.block (BlockPrefetcher)
//   Transform         ModelTransform::TransformBlock (rotation)
//   FloatForward      hidden -> work.float_out (the float block's output)
//   RunAlgorithms     BlockAlgorithms in job order -> the weights they
//                     quantized (work.algorithm_qparams, work.float_weights)
//   RoundWeights      round-to-nearest of the other weights -> work.tensors,
//                     report.layers, work.bytes_delta
//   QuantizedForward  static activation quantizers calibrated and installed,
//                     then hidden -> the next block's input, in place;
//                     report.output_rel_mse
//   Persist           static activation parameters -> work.tensors, written
//                     to the scratch store while the next block computes
//   Finish            report.seconds and the allocator peaks
//
// Without calibration samples (hidden undefined) FloatForward and
// QuantizedForward do nothing. Checkpoints are the loop's
// (block_persistence.h).
#ifndef QUANTD_WORKER_PIPELINE_BLOCK_STEP_H_
#define QUANTD_WORKER_PIPELINE_BLOCK_STEP_H_

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "worker/algo/block_hooks.h"
#include "worker/common/status.h"
#include "worker/export/gguf/gguf_recipe_weights.h"
#include "worker/models/causal_lm.h"
#include "worker/models/decoder_block.h"
#include "worker/pipeline/activation_quantizers.h"
#include "worker/pipeline/block_persistence.h"
#include "worker/pipeline/job_observer.h"
#include "worker/pipeline/job_options.h"
#include "worker/pipeline/layer_plan.h"
#include "worker/pipeline/scratch_store.h"
#include "worker/pipeline/stage_times.h"
#include "worker/pipeline/stored_quantization.h"
#include "worker/quant/qparams.h"

namespace quantd::pipeline {

// CANCELLED at a block or stage boundary.
Status JobCancelled();
// A stop from deep in a loop keeps its message, which says where the job
// stopped (e.g. "evaluation cancelled in block 2, before batch 9 of 50").
Status JobCancelled(const Status& from);

// One block on its way through the stages.
struct BlockWork {
  int index = 0;  // 0-based
  std::chrono::steady_clock::time_point start;
  std::unique_ptr<models::DecoderBlock> block;
  at::Tensor float_out;  // undefined without calibration samples
  // Module name -> parameters of the weights a BlockAlgorithm quantized, and
  // those weights before it did (BlockAlgorithmContext).
  std::map<std::string, quant::QParams> algorithm_qparams;
  // GPTQ's groups of permuted columns (BlockAlgorithmContext::weight_group_index).
  std::map<std::string, at::Tensor> algorithm_group_index;
  std::map<std::string, at::Tensor> float_weights;
  // A recipe job's weights GPTQ quantized: their ggml blocks
  // (BlockAlgorithmContext::ggml_blocks).
  std::map<std::string, at::Tensor> ggml_blocks;
  // A llama.cpp recipe job with calibration samples: per recipe weight, the
  // sum of its input columns' squared activations (float64) and the tokens
  // summed, gathered in the float forward (the block's part of the imatrix).
  std::map<std::string, std::pair<at::Tensor, int64_t>> importance;
  // Module name -> per sensitivity candidate, the block output's relative
  // MSE with that layer alone quantized as the candidate.
  std::map<std::string, std::vector<double>> sensitivity;
  NamedTensors tensors;     // what the block's scratch file holds
  int64_t bytes_delta = 0;  // quantized minus float bytes of its weights
  BlockReport report;
  StageTimes stages;  // where the block's time went (Begin starts it)
};

// The experts of block `block` (0-based) that `report` marks kept in
// float: their linears' plans become unquantized. A resumed job applies it
// to the blocks it restores.
void KeepExpertsFloat(const models::ModelConfig& config, int block,
                      const std::vector<ExpertReport>& report,
                      std::map<std::string, LayerPlan>& plans);

class BlockStep {
 public:
  // Job-wide inputs: `opt` (transform, algorithms, planner, calibration,
  // device), the model, every layer's plan, the KV cache; `act_params`
  // collects the calibrated static activation parameters; finished blocks
  // go to `scratch`.
  // `stored`, when the model is a quantized checkpoint: the parameters its
  // layers keep (act_params already holds the kept activation scales).
  // `recipe`, for a job with a llama.cpp recipe: the weights it quantizes
  // are rounded to the recipe's decoded blocks instead of through a plan.
  // `plans` changes only where CalibrationOptions::keep_starved_experts_float
  // leaves an expert in float (KeepExpertsFloat).
  BlockStep(const JobOptions& opt, const models::CausalLM& model,
            std::map<std::string, LayerPlan>& plans, const KvCacheOptions& kv,
            ActivationParams& act_params, ScratchStore& scratch, JobObserver& obs,
            const StoredQuantization* stored = nullptr,
            const gguf::GgufRecipeWeights* recipe = nullptr)
      : opt_(opt),
        model_(model),
        plans_(plans),
        kv_(kv),
        act_params_(act_params),
        scratch_(scratch),
        obs_(obs),
        stored_(stored),
        recipe_(recipe) {}

  BlockWork Begin(int index, int n) const;
  Status Transform(BlockWork& w) const;
  Status FloatForward(BlockWork& w, const at::Tensor& hidden) const;
  // JobOptions::sensitivity, on the float block before any algorithm: for
  // each linear the job quantizes and each candidate, the block run on
  // `hidden` with that linear alone quantized as the candidate plans it
  // (weight rounded to nearest, input quantized, static inputs calibrated
  // on `hidden`), against FloatForward's output. Nothing without
  // calibration samples.
  Status MeasureSensitivity(BlockWork& w, const at::Tensor& hidden) const;
  // `progress` (may be empty) gets the algorithms' progress inside the block.
  using AlgorithmProgress =
      std::function<void(double, const std::string&, const std::optional<TrainingStepInfo>&)>;
  Status RunAlgorithms(BlockWork& w, const at::Tensor& hidden,
                       const AlgorithmProgress& progress = {}) const;
  Status RoundWeights(BlockWork& w) const;
  Status QuantizedForward(BlockWork& w, at::Tensor& hidden) const;
  Status Persist(BlockWork& w) const;
  void Finish(BlockWork& w) const;

 private:
  const JobOptions& opt_;
  const models::CausalLM& model_;
  std::map<std::string, LayerPlan>& plans_;
  const KvCacheOptions& kv_;
  ActivationParams& act_params_;
  ScratchStore& scratch_;
  JobObserver& obs_;
  const StoredQuantization* stored_;
  const gguf::GgufRecipeWeights* recipe_;

  void ObserveImportance(BlockWork& w, algo::ScopedHooks& hooks) const;
  void ReportExperts(BlockWork& w) const;
};

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_BLOCK_STEP_H_
