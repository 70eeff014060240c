// BlockwiseModel: a model as evaluation sees it, one piece at a time.
//
// Evaluation runs every window through block i before loading block i+1,
// so it needs the model only as three loaders. FromCausalLM gives a model's
// float pieces; the pipeline supplies its own loaders to evaluate quantized
// blocks (an overlay of quantized weights, fake-quant hooks installed).
#ifndef QUANTD_WORKER_EVAL_BLOCKWISE_MODEL_H_
#define QUANTD_WORKER_EVAL_BLOCKWISE_MODEL_H_

#include <ATen/ATen.h>

#include <functional>
#include <memory>

#include "worker/common/status.h"
#include "worker/models/causal_lm.h"
#include "worker/models/decoder_block.h"

namespace quantd::eval {

struct BlockwiseModel {
  int64_t num_blocks = 0;
  // [B, T] int64 ids -> [B, T, D] hidden states.
  std::function<StatusOr<at::Tensor>(const at::Tensor& ids)> embed;
  std::function<StatusOr<std::unique_ptr<models::DecoderBlock>>(int64_t index)> load_block;
  std::function<StatusOr<std::unique_ptr<models::HeadStage>>()> load_head;
};

// Loads every piece from `model`'s own weights. `model` must outlive the
// result.
BlockwiseModel FromCausalLM(const models::CausalLM& model);

}  // namespace quantd::eval

#endif  // QUANTD_WORKER_EVAL_BLOCKWISE_MODEL_H_
