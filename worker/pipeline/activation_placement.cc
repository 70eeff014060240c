#include "worker/pipeline/activation_placement.h"

#include <cstdio>

namespace quantd::pipeline {
namespace {

std::string GiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return buf;
}

}  // namespace

ActivationPlacement PlaceActivations(ActivationOffload mode, int64_t bytes,
                                     const c10::Device& device,
                                     const std::optional<DeviceMemory>& memory) {
  ActivationPlacement p;
  const std::string what = "activations " + GiB(bytes);
  if (device.is_cpu()) {
    p.reason = what + " in host memory (the job runs on the CPU)";
    return p;
  }
  const std::string dev = device.str();
  if (mode == ActivationOffload::kHost) {
    p.on_host = true;
    p.reason = what + " kept in host memory and streamed to " + dev + " (activation offload: host)";
    return p;
  }
  if (mode == ActivationOffload::kDevice) {
    p.reason = what + " kept on " + dev + " (activation offload: device)";
    return p;
  }
  if (!memory) {
    p.reason = what + " kept on " + dev + " (its free memory is unknown)";
    return p;
  }
  const int64_t free_bytes = memory->total_bytes - memory->used_bytes;
  p.on_host = bytes > free_bytes / 2;
  p.reason = what + (p.on_host ? " kept in host memory and streamed to " : " kept on ") + dev +
             ": " + GiB(free_bytes) + " free there, half of it allowed for activations";
  return p;
}

at::Tensor ToHost(const at::Tensor& x) {
  if (!x.defined() || x.device().is_cpu()) return x;
  at::Tensor host = at::empty(x.sizes(), x.options().device(at::kCPU).pinned_memory(true));
  host.copy_(x);
  return host;
}

}  // namespace quantd::pipeline
