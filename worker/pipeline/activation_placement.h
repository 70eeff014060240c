// Where a job keeps the activations it carries from block to block
// (calibration hidden states, the block's float and quantized outputs;
// evaluation windows' hidden states): on the compute device while they fit,
// else in pinned host memory, from which DecoderBlock::Forward streams one
// sub-batch at a time to the device and its output back.
#ifndef QUANTD_WORKER_PIPELINE_ACTIVATION_PLACEMENT_H_
#define QUANTD_WORKER_PIPELINE_ACTIVATION_PLACEMENT_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>

#include "worker/common/device.h"
#include "worker/common/status.h"
#include "worker/models/model_config.h"
#include "worker/models/model_options.h"
#include "worker/pipeline/activation_offload.h"

namespace quantd::pipeline {

struct ActivationPlacement {
  bool on_host = false;
  std::string reason;  // one line for the job's log
};

// What a block needs on the device beside the activations it carries, in
// bytes: this block's and the prefetched block's float32 weights, one
// sub-batch's MLP or attention intermediates, one attention tile (scores and
// their softmax), and GPTQ's share (the float weights kept for the SQNR
// report, and the widest linear input's Hessian with its damped copy,
// Cholesky factor and inverse). The formula of docs/worker.md ("Peak GPU
// memory"), less its activation term; an estimate from the config, not a
// measurement.
int64_t BlockWorkingSetBytes(const models::ModelConfig& config,
                             const models::ModelOptions& options);

// The decision for `bytes` of activations computed on `device`, whose memory
// is `memory` (nullopt: unknown, e.g. on CPU), beside a block working set of
// `working_set_bytes`. Auto keeps them on the device while both together
// need at most three quarters of its free memory (the last quarter is for
// what the formula leaves out: the caching allocator's fragmentation, the
// CUDA context's growth). On CPU they are on the host anyway (on_host
// false: nothing to move).
ActivationPlacement PlaceActivations(ActivationOffload mode, int64_t bytes,
                                     int64_t working_set_bytes, const c10::Device& device,
                                     const std::optional<DeviceMemory>& memory);

// x in host memory: pinned when a GPU backend is present (so the
// sub-batch copies to the device are asynchronous), unchanged when already
// on the host.
at::Tensor ToHost(const at::Tensor& x);

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_ACTIVATION_PLACEMENT_H_
