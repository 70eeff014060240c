// Per-input-channel scaling of a decoder block's linear groups, and the
// activation captures that the scaling algorithms (SmoothQuant, AWQ,
// AutoSmoothQuant) search with.
//
// A LinearGroup's linears all read the output of one previous op (its
// prev_op: a norm, or a linear such as v_proj for o_proj). Scaling input
// channel j by s_j is exact when the previous op's output channel j is
// divided by s_j and every linear of the group multiplies its column j by
// s_j: the block computes the same function, but the weights and the
// activations the quantizers see change.
#ifndef QUANTD_WORKER_ALGO_CHANNEL_SCALING_H_
#define QUANTD_WORKER_ALGO_CHANNEL_SCALING_H_

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/models/decoder_block.h"

namespace quantd::algo {

// True when the group has a previous op in this block that can absorb a
// scale (see LinearGroup::prev_op).
bool CanFoldScales(const models::DecoderBlock& block, const models::LinearGroup& group);

// prev_op's output channels /= scales; the group's linears' input columns
// *= scales. `scales` is [in_features] of the group (any float dtype). New
// tensors replace the old ones (never written in place, so tensors shared
// with a checkpoint mapping stay untouched). FAILED_PRECONDITION when the
// group cannot fold; INVALID_ARGUMENT for a wrong size.
Status FoldChannelScales(models::DecoderBlock& block, const models::LinearGroup& group,
                         const at::Tensor& scales);

// What one float pass of a block recorded: the inputs and outputs of
// chosen linears, all samples, float32. Inputs are flattened to
// [tokens, in_features]; outputs keep [B, T, out_features].
struct LinearCaptures {
  std::map<std::string, at::Tensor> inputs;
  std::map<std::string, at::Tensor> outputs;
  at::Tensor block_output;  // [B, T, hidden]
};

// Runs block.Forward(hidden) once, recording the inputs of `inputs_of`
// and the outputs of `outputs_of` (module names).
StatusOr<LinearCaptures> CaptureLinears(models::DecoderBlock& block, const at::Tensor& hidden,
                                        const std::vector<std::string>& inputs_of,
                                        const std::vector<std::string>& outputs_of);

// Per-channel statistics of a [tokens, channels] capture, float32 [channels].
at::Tensor ChannelAbsMax(const at::Tensor& x);
at::Tensor ChannelAbsMean(const at::Tensor& x);

}  // namespace quantd::algo

#endif  // QUANTD_WORKER_ALGO_CHANNEL_SCALING_H_
