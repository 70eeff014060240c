// The activation-offload setting of a worker or quantd-quantize run
// (--activation-offload), torch-free so that flag parsing needs no
// LibTorch. What it decides is in activation_placement.h.
#ifndef QUANTD_WORKER_PIPELINE_ACTIVATION_OFFLOAD_H_
#define QUANTD_WORKER_PIPELINE_ACTIVATION_OFFLOAD_H_

#include <string_view>

#include "worker/common/status.h"

namespace quantd::pipeline {

// kAuto: host memory when the activations need more than half of the
// device's free memory (the rest is for the block's weights, attention
// scratch and GPTQ's Hessians); kHost / kDevice force the choice.
enum class ActivationOffload { kAuto, kHost, kDevice };

// "auto", "host" or "device"; INVALID_ARGUMENT naming the value otherwise.
StatusOr<ActivationOffload> ParseActivationOffload(std::string_view name);
const char* ActivationOffloadName(ActivationOffload mode);

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_ACTIVATION_OFFLOAD_H_
