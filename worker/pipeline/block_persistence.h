// What a job keeps of each finished block in its scratch store, and the
// checkpoints that let a later attempt resume (resume_state.h).
//
// A block's scratch file holds its changed tensors, the exact parameters of
// its quantized weights (<module>.weight_scale / weight_zero_point) and the
// calibrated static activation parameters under "__quantd__/" keys. After a
// block the BlockCheckpointer, when its CheckpointPacer says it is due,
// flushes the block files, saves the next block's input and writes
// resume.json; Resume reads them back.
#ifndef QUANTD_WORKER_PIPELINE_BLOCK_PERSISTENCE_H_
#define QUANTD_WORKER_PIPELINE_BLOCK_PERSISTENCE_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "worker/common/status.h"
#include "worker/pipeline/activation_quantizers.h"
#include "worker/pipeline/checkpoint_pacer.h"
#include "worker/pipeline/job_observer.h"
#include "worker/pipeline/layer_plan.h"
#include "worker/pipeline/scratch_store.h"
#include "worker/quant/qparams.h"

namespace quantd::pipeline {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// The scratch file of block `block` (0-based): "block_00003".
std::string BlockFileName(int block);

// The scratch key of a static activation parameter, e.g.
// "__quantd__/model.layers.0.self_attn.q_proj.input_scale".
std::string ActivationKey(const std::string& module, const char* what);

// Appends a quantized weight's scratch entries to `out` (the weight itself
// when `with_weight`, its scale and its zero point as float32) and returns
// what it changes in the model's size: its real-quantized storage
// (QuantizedStorageBytes) minus `float_bytes`.
int64_t RecordQuantizedWeight(const std::string& module, const at::Tensor& weight,
                              const quant::QuantSpec& spec, const quant::QParams& qp,
                              bool with_weight, int64_t float_bytes, NamedTensors& out);

// Appends the static input/output parameters `params` holds for `module`.
void AddActivationParams(const std::string& module, const ActivationParams& params,
                         NamedTensors& out);

// Reads back into `params` the static activation parameters of every layer
// of `plans` found in `scratch`; zero points are int32 except the float
// ones of asymmetric specs with a float32 zero-point type.
Status RestoreActivationParams(const io::TensorSource& scratch,
                               const std::map<std::string, LayerPlan>& plans,
                               ActivationParams& params);

// Where a job starts its block loop: block 0 with nothing, or after the
// blocks of an earlier attempt's checkpoint.
struct ResumePoint {
  int start = 0;      // first block still to do
  at::Tensor hidden;  // its input on the quantized path (may be undefined)
  ActivationParams activation_params;
  int64_t bytes_delta = 0;
  std::vector<BlockReport> blocks;  // the reports of blocks 1..start
};

class BlockCheckpointer {
 public:
  // `fingerprint`: ResumeFingerprint of the job's options. Logs go to `obs`.
  BlockCheckpointer(ScratchStore& scratch, std::string scratch_dir, std::string fingerprint,
                    CheckpointPacer pacer, JobObserver& obs)
      : scratch_(scratch),
        scratch_dir_(std::move(scratch_dir)),
        fingerprint_(std::move(fingerprint)),
        pacer_(pacer),
        obs_(obs) {}

  // After block `done` of `n` (its file handed to the scratch store):
  // checkpoints when the pacer says it is due, with `hidden` as the next
  // block's input, then drops the previous checkpoint's hidden states.
  Status AfterBlock(int done, int n, const at::Tensor& hidden, int64_t bytes_delta,
                    const std::vector<BlockReport>& blocks);

  // Continues from a checkpoint in the scratch directory when there is a
  // usable one for this fingerprint and `plans`; otherwise (none, other
  // options, damaged: logged) starts at block 0.
  ResumePoint Resume(int n, const std::map<std::string, LayerPlan>& plans);

 private:
  Status Write(int done, const at::Tensor& hidden, int64_t bytes_delta,
               const std::vector<BlockReport>& blocks);
  void Log(LogLevel level, const std::string& msg) { obs_.OnLog(level, msg); }

  ScratchStore& scratch_;
  std::string scratch_dir_;
  std::string fingerprint_;
  CheckpointPacer pacer_;
  JobObserver& obs_;
  int checkpointed_blocks_ = 0;  // blocks_done of the last checkpoint on disk
};

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_BLOCK_PERSISTENCE_H_
