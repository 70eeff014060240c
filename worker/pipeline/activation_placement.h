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
#include "worker/pipeline/activation_offload.h"

namespace quantd::pipeline {

struct ActivationPlacement {
  bool on_host = false;
  std::string reason;  // one line for the job's log
};

// The decision for `bytes` of activations computed on `device`, whose memory
// is `memory` (nullopt: unknown, e.g. on CPU). On CPU they are on the host
// anyway (on_host false: nothing to move).
ActivationPlacement PlaceActivations(ActivationOffload mode, int64_t bytes,
                                     const c10::Device& device,
                                     const std::optional<DeviceMemory>& memory);

// x in host memory: pinned when a GPU backend is present (so the
// sub-batch copies to the device are asynchronous), unchanged when already
// on the host.
at::Tensor ToHost(const at::Tensor& x);

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_ACTIVATION_PLACEMENT_H_
