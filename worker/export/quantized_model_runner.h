// QuantizedModelRunner: runs a QuantizedModel the way the engine evaluates a
// quantized model, so exports and imports can be compared with it.
//
// Weights are the model's values after quantization (QuantizedModel::Load);
// every layer's activation quantizers become fake-quantization hooks on its
// Linear: static ones with their calibrated parameters, dynamic ones with
// parameters computed at each call (per-token for per_channel activations).
// The k/v projections' output quantizers are the FP8 KV cache. The runner
// gives the model block by block (eval::BlockwiseModel, for perplexity) or
// whole (Forward, for logits).
#ifndef QUANTD_WORKER_EXPORT_QUANTIZED_MODEL_RUNNER_H_
#define QUANTD_WORKER_EXPORT_QUANTIZED_MODEL_RUNNER_H_

#include <ATen/ATen.h>

#include <memory>

#include "worker/common/status.h"
#include "worker/eval/blockwise_model.h"
#include "worker/export/quantized_model.h"
#include "worker/models/causal_lm.h"
#include "worker/models/model_options.h"

namespace quantd::exporter {

class QuantizedModelRunner {
 public:
  // `model` must outlive the runner. Errors are LoadCausalLM's.
  static StatusOr<std::unique_ptr<QuantizedModelRunner>> Create(
      const QuantizedModel& model, const models::ModelOptions& options = {});

  // Pieces with the activation hooks installed. The runner must outlive the
  // result.
  eval::BlockwiseModel Blockwise() const;
  // ids [B, T] -> logits [B, T, vocab] (float32).
  StatusOr<at::Tensor> Forward(const at::Tensor& ids) const;

  const models::CausalLM& causal_lm() const { return *lm_; }

 private:
  QuantizedModelRunner() = default;
  Status InstallHooks(models::Linear& linear) const;

  const QuantizedModel* model_ = nullptr;
  std::unique_ptr<models::CausalLM> lm_;
};

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_QUANTIZED_MODEL_RUNNER_H_
