// Fake quantization of a decoder block as the job's plan asks for it, for
// algorithms that search by the quantized block's output (AutoSmoothQuant)
// and for measuring activation quantization in tests:
//  - QuantizeBlockWeights: every planned weight rounded to nearest, with the
//    originals kept for restoring;
//  - BlockInputQuantizers: every planned linear input fake-quantized, dynamic
//    specs at each call, static specs with parameters calibrated by the
//    spec's observer over a pass of calibration inputs.
#ifndef QUANTD_WORKER_ALGO_ACTIVATION_QUANT_H_
#define QUANTD_WORKER_ALGO_ACTIVATION_QUANT_H_

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "worker/algo/block_hooks.h"
#include "worker/common/status.h"
#include "worker/models/decoder_block.h"
#include "worker/pipeline/layer_plan.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::algo {

// The weights of a block before QuantizeBlockWeights changed them.
class SavedWeights {
 public:
  // Puts every saved weight back.
  void Restore();

 private:
  friend StatusOr<SavedWeights> QuantizeBlockWeights(models::DecoderBlock& block,
                                                     const pipeline::LayerPlanner& planner);
  std::vector<std::pair<models::Linear*, at::Tensor>> saved_;
};

// Rounds every weight the plan quantizes to nearest, with parameters from the
// weight itself (as the pipeline does).
StatusOr<SavedWeights> QuantizeBlockWeights(models::DecoderBlock& block,
                                            const pipeline::LayerPlanner& planner);

class BlockInputQuantizers {
 public:
  BlockInputQuantizers() = default;

  // One pass of `block` over `hidden` with the spec's observer on the input
  // of every linear whose plan has a static input spec; dynamic specs need
  // no calibration. INVALID_ARGUMENT for an input spec an observer cannot
  // calibrate.
  static StatusOr<BlockInputQuantizers> Calibrate(models::DecoderBlock& block,
                                                  const at::Tensor& hidden,
                                                  const pipeline::LayerPlanner& planner);

  // Adds an input hook fake-quantizing each planned linear's input, after
  // the hooks already installed (so an online rotation runs first); the
  // hooks live as long as `hooks` is armed.
  Status Install(models::DecoderBlock& block, ScopedHooks& hooks) const;

  // Static parameters by module name.
  const std::map<std::string, quant::QParams>& static_qparams() const { return static_qparams_; }

 private:
  std::map<std::string, quant::QuantSpec> specs_;
  std::map<std::string, quant::QParams> static_qparams_;
};

// Relative squared error of a block output against a reference.
double RelativeMse(const at::Tensor& out, const at::Tensor& ref);

}  // namespace quantd::algo

#endif  // QUANTD_WORKER_ALGO_ACTIVATION_QUANT_H_
