// Activation quantization of a decoder block's linears: the dynamic and
// static strategies, output quantization and the FP8 KV cache.
//
//  - Dynamic input/output specs are fake-quantized with parameters computed
//    at every forward (per tensor, or per token as dynamic per_channel).
//  - Static specs are calibrated: CalibrateBlockActivations runs the block
//    (weights already quantized) over the calibration hidden states with one
//    observer per quantizer, over the whole calibration set, and returns the
//    parameters. Observers see activations without activation quantization
//    applied, so a static scale equals that of a reference observer run over
//    the same layer inputs.
//  - KV cache: the k_proj / v_proj output specs of a block are static
//    per-tensor FP8 whose scales are unified with max (and floored at
//    min_kv_scale), so one scale serves the block's whole cache.
//
// InstallActivationQuantizers then adds the fake-quant hooks, both for the
// block being quantized and for the blocks the evaluation loads again.
#ifndef QUANTD_WORKER_PIPELINE_ACTIVATION_QUANTIZERS_H_
#define QUANTD_WORKER_PIPELINE_ACTIVATION_QUANTIZERS_H_

#include <ATen/ATen.h>

#include <map>
#include <string>

#include "worker/common/status.h"
#include "worker/models/decoder_block.h"
#include "worker/pipeline/layer_plan.h"
#include "worker/quant/qparams.h"

namespace quantd::pipeline {

// Calibrated static parameters by module name.
struct ActivationParams {
  std::map<std::string, quant::QParams> inputs;
  std::map<std::string, quant::QParams> outputs;
  // Observed [min, max] of each statically quantized input.
  std::map<std::string, std::pair<double, double>> input_ranges;
};

struct KvCacheOptions {
  // Module-name suffixes of the projections whose outputs are the cache.
  std::string key_suffix = "k_proj";
  std::string value_suffix = "v_proj";
  // Lower bound of the unified scale (the reference's min_kv_scale).
  float min_kv_scale = 0;
};

// True when some layer of `plans` needs calibration (a static activation spec).
bool NeedsActivationCalibration(const std::map<std::string, LayerPlan>& plans);
// True when some layer of `plans` quantizes an input or output at all.
bool HasActivationQuantization(const std::map<std::string, LayerPlan>& plans);

// Observes the static input/output specs of `block`'s linears over `hidden`
// and returns their parameters (k/v outputs unified when `kv_layers` names
// them as cache projections). Any error names the layer.
//
// An expert's linear (a name with "experts.N.") that fewer than
// max(1, min_expert_tokens) tokens reached takes the widest parameters
// (largest scale) of the same linear of the block's other experts that
// did reach the floor; FAILED_PRECONDITION when none did.
StatusOr<ActivationParams> CalibrateBlockActivations(models::DecoderBlock& block,
                                                     const at::Tensor& hidden,
                                                     const std::map<std::string, LayerPlan>& plans,
                                                     const KvCacheOptions& kv,
                                                     int64_t min_expert_tokens = 0);

// Adds the fake-quantization hooks of every input/output spec of `block`'s
// linears: static ones from `params` (FAILED_PRECONDITION when missing),
// dynamic ones computing parameters per call. Errors raised inside a forward
// are kept in `*error` (first one wins) and the tensor passes unchanged;
// callers check it after the forward.
Status InstallActivationQuantizers(models::DecoderBlock& block,
                                   const std::map<std::string, LayerPlan>& plans,
                                   const ActivationParams& params, std::shared_ptr<Status> error);

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_ACTIVATION_QUANTIZERS_H_
