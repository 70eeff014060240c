// Which linear groups of a decoder block AWQ works on, from the reference
// toolkit's algo_config keys "scaling_layers" and "model_decoder_layers"
// (AwqOptions). Torch-free: quantd checks a job's config against the
// model's config.json with it at submit, and AwqAlgorithm applies it to
// every block.
//
// Without scaling_layers AWQ works on every group of the block. With them,
// on the named groups only (scale search, clip search, quantization); the
// other linears are left to the pipeline's quantizer (or GPTQ). An entry
// names a group when
//  - its layers are the group's linears, in any order (a part of a group
//    cannot be scaled: the previous op scales all of them);
//  - its prev_op is the op the engine folds the group's scale into (a group
//    whose previous op cannot absorb a scale, e.g. o_proj under
//    grouped-query attention, cannot be named);
//  - its module2inspect, when set, is the module whose output the engine
//    compares: the group's parent ("self_attn", "mlp") for a group of
//    several linears, the linear itself for one.
// model_decoder_layers, when set, must be the model's decoder layer list
// ("model.layers", "transformer.h", "model.decoder.layers").
#ifndef QUANTD_WORKER_ALGO_AWQ_LAYOUT_H_
#define QUANTD_WORKER_ALGO_AWQ_LAYOUT_H_

#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/config/algorithm_options.h"
#include "worker/models/layer_shapes.h"

namespace quantd::algo {

using config::AwqOptions;
using config::AwqScalingGroup;

// One flag per block.groups entry: whether AWQ works on it. Otherwise
// INVALID_ARGUMENT (reason INVALID_JOB_SPEC) with a violation per entry
// that cannot be honoured, at `field` + ".scaling_layers[i].layers" (or
// ".prev_op", ".module2inspect", ".model_decoder_layers").
StatusOr<std::vector<bool>> AwqGroupSelection(const AwqOptions& options,
                                              const models::BlockLayout& block,
                                              const std::string& field);

}  // namespace quantd::algo

#endif  // QUANTD_WORKER_ALGO_AWQ_LAYOUT_H_
