// The seams through which quantization algorithms join the pipeline.
//
// BlockAlgorithm: runs on one decoder block, after it is loaded and before
// its weights are rounded, with the calibration hidden states that enter the
// block (already through the quantized blocks before it). SmoothQuant and
// AWQ rescale weights and norms in place; GPTQ quantizes weights itself and
// records the parameters it used (or, with a llama.cpp recipe, the ggml
// blocks), so the pipeline does not round those layers again. Algorithms run in the order the job
// lists them.
//
// ModelTransform: changes the whole model consistently (rotation): the
// pipeline passes it every piece as it is loaded (embedding, each block,
// head), for calibration, evaluation and export alike, and lets it install
// online operations (R4 Hadamard) on blocks of the quantized forward.
#ifndef QUANTD_WORKER_PIPELINE_BLOCK_ALGORITHM_H_
#define QUANTD_WORKER_PIPELINE_BLOCK_ALGORITHM_H_

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "worker/common/status.h"
#include "worker/io/gguf/ggml_types.h"
#include "worker/models/causal_lm.h"
#include "worker/models/decoder_block.h"
#include "worker/pipeline/job_observer.h"
#include "worker/pipeline/layer_plan.h"
#include "worker/pipeline/stage_times.h"
#include "worker/quant/qparams.h"

namespace quantd::pipeline {

struct BlockAlgorithmContext {
  const models::CausalLM& model;
  models::DecoderBlock& block;
  // [num_samples, seq_len, hidden] hidden states entering the block.
  const at::Tensor& inputs;
  const LayerPlanner& planner;
  JobObserver& observer;
  // Output: module name -> the weight parameters an algorithm quantized that
  // layer's (already fake-quantized) weight with.
  std::map<std::string, quant::QParams> quantized_weights;
  // Output: module name -> the float weight just before the algorithm
  // quantized it (the reference of the layer's reported SQNR).
  std::map<std::string, at::Tensor> float_weights;
  // Output: module name -> the group of each input column (int32
  // [in_features]) when an algorithm assigned groups out of column order
  // (GPTQ act_order without static_groups); quantized_weights' per-group
  // parameters [out, G] are indexed by it, and export writes it as g_idx.
  // Absent: column c belongs to group c / group_size.
  std::map<std::string, at::Tensor> weight_group_index;
  // Where the block's time goes: an algorithm may charge its own stages
  // ("gptq hessian", ...); what it leaves uncharged counts as "algorithms".
  // Null outside a job.
  StageTimes* stages = nullptr;
  // A job with a llama.cpp recipe: the ggml block type the recipe gives a
  // module's weight (nullopt for one it leaves as it is). Unset otherwise.
  std::function<std::optional<gguf::GgmlType>(const std::string& module)> ggml_type;
  // Output: module name -> the ggml blocks an algorithm quantized that
  // layer's weight to (uint8 [out, row bytes], GptqQuantizeGgml), which the
  // GGUF export writes as they are.
  std::map<std::string, at::Tensor> ggml_blocks;
  // Mixture-of-experts blocks: an expert whose linears saw fewer
  // calibration tokens than this gets no statistics-driven algorithm (GPTQ
  // leaves it to round-to-nearest) and is reported
  // (CalibrationOptions::min_expert_tokens).
  int64_t min_expert_tokens = 0;
  // The block's float outputs on `inputs` (undefined without calibration
  // samples): what quantization-aware training fits the block to.
  at::Tensor float_outputs;
  // Progress inside the block: `fraction` of its algorithms done, with a
  // message and, for training, the step. May be empty (tests).
  std::function<void(double fraction, const std::string& message,
                     const std::optional<TrainingStepInfo>& step)>
      progress;
};

class BlockAlgorithm {
 public:
  virtual ~BlockAlgorithm() = default;
  virtual const char* name() const = 0;
  // CANCELLED when ctx.observer.CancelRequested() turns true mid-way.
  virtual Status Apply(BlockAlgorithmContext& ctx) = 0;
};

class ModelTransform {
 public:
  virtual ~ModelTransform() = default;
  virtual const char* name() const = 0;
  virtual Status TransformEmbedding(models::EmbeddingStage& embedding) = 0;
  virtual Status TransformBlock(models::DecoderBlock& block) = 0;
  virtual Status TransformHead(models::HeadStage& head) = 0;
  // Online operations of the transformed model (e.g. a Hadamard transform
  // on down_proj's input), installed on every block the quantized forward
  // runs. Default: none.
  virtual Status InstallOnline(models::DecoderBlock& block) { return OkStatus(); }
};

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_BLOCK_ALGORITHM_H_
