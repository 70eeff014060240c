// Quantization-aware training of a decoder language model, block by block
// (spec.qat on a language model; docs/qat.md).
//
// A language model is quantized one decoder block at a time, each on the
// calibration hidden states that reach it through the quantized blocks
// before it. BlockQat trains the block there: every linear the plan gives a
// weight spec becomes a qat::TrainableWeight (straight-through gradients;
// LSQ scales with learn_scales), optionally with its float bias, and Adam
// minimizes the relative squared error between the block's output and its
// float output on the same inputs (sum (y - y_float)^2 / sum y_float^2 over
// a batch of calibration samples), `steps` steps per block, the learning
// rate decaying along a cosine. The block then holds the trained weights
// fake-quantized with their final parameters (recorded as
// ctx.quantized_weights, so the pipeline does not round them again).
// Resuming after a crash is the block pipeline's: a checkpointed block keeps
// its trained weights and the next attempt trains the blocks after it.
#ifndef QUANTD_WORKER_ALGO_BLOCK_QAT_H_
#define QUANTD_WORKER_ALGO_BLOCK_QAT_H_

#include "worker/common/status.h"
#include "worker/pipeline/block_algorithm.h"
#include "worker/qat/qat_options.h"

namespace quantd::algo {

class BlockQat final : public pipeline::BlockAlgorithm {
 public:
  explicit BlockQat(qat::QatOptions options) : options_(options) {}
  const char* name() const override { return "qat"; }
  // FAILED_PRECONDITION without calibration samples; INVALID_ARGUMENT
  // (spec.qat.learn_scales) naming the layers whose weight format cannot
  // learn its scale; FAILED_PRECONDITION (spec.qat.learning_rate) when the
  // loss stops being finite.
  Status Apply(pipeline::BlockAlgorithmContext& ctx) override;

 private:
  qat::QatOptions options_;
};

}  // namespace quantd::algo

#endif  // QUANTD_WORKER_ALGO_BLOCK_QAT_H_
