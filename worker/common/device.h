// The engine's device: parsing "cpu" / "cuda" / "cuda:N" once, at startup,
// before LibTorch runs a kernel, and reading the GPU's memory for progress,
// metrics and the worker's heartbeat.
#ifndef QUANTD_WORKER_COMMON_DEVICE_H_
#define QUANTD_WORKER_COMMON_DEVICE_H_

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>

#include "worker/common/status.h"

namespace quantd {

// The device a "--device" / spec.device string names, checked against this
// build and host: INVALID_ARGUMENT (field `field`) for a malformed name,
// FAILED_PRECONDITION (DEVICE_UNAVAILABLE) for a GPU this LibTorch cannot
// drive or that is not there. "cuda" means cuda:0.
StatusOr<c10::Device> ParseEngineDevice(const std::string& name,
                                        const std::string& field = "spec.device");

struct DeviceMemory {
  int64_t total_bytes = 0;
  int64_t used_bytes = 0;  // by every process on the device (total - free)
};

// The GPU's memory as its runtime reports it; nullopt on CPU, or when no GPU
// runtime is loaded in this process (a CPU-only LibTorch). The runtime's
// functions are looked up in the loaded LibTorch, so the engine needs no
// CUDA headers to build.
std::optional<DeviceMemory> QueryDeviceMemory(const c10::Device& device);

// "cpu" or "cuda:N": the name workers report and metrics label with.
std::string DeviceName(const c10::Device& device);

}  // namespace quantd

#endif  // QUANTD_WORKER_COMMON_DEVICE_H_
