#include "worker/common/device.h"

#include <ATen/Context.h>
#include <dlfcn.h>

#include "worker/common/torch_compat.h"

namespace quantd {

StatusOr<c10::Device> ParseEngineDevice(const std::string& name, const std::string& field) {
  const std::string allowed = "'" + name + "' is not one of cpu, cuda, cuda:N";
  if (name != "cpu" && name.rfind("cuda", 0) != 0)
    return Status(StatusCode::kInvalidArgument, "device " + allowed, "INVALID_DEVICE")
        .AddViolation(field, allowed);
  c10::Device device(c10::kCPU);
  try {
    device = c10::Device(name);
  } catch (const c10::Error&) {
    return Status(StatusCode::kInvalidArgument, "device " + allowed, "INVALID_DEVICE")
        .AddViolation(field, allowed);
  }
  if (device.is_cpu()) return device;
  if (!torch_compat::DeviceTypeAvailable(device.type()))
    return Status(StatusCode::kFailedPrecondition,
                  "device " + name + " needs a CUDA (or ROCm) LibTorch; this build (LibTorch " +
                      torch_compat::TorchVersion() +
                      ") is CPU-only. Build with `bazel build --config=cuda` or CMake against "
                      "LIBTORCH_HOME (docs/build.md), or use cpu",
                  "DEVICE_UNAVAILABLE")
        .AddViolation(field, "this build has no GPU backend");
  const int count = static_cast<int>(at::getNumGPUs());
  const int index = device.has_index() ? device.index() : 0;
  if (index >= count)
    return Status(StatusCode::kFailedPrecondition,
                  "device " + name + " is not there: this host shows " + std::to_string(count) +
                      " GPU(s)",
                  "DEVICE_UNAVAILABLE")
        .AddViolation(field, "no GPU with index " + std::to_string(index));
  return c10::Device(device.type(), static_cast<c10::DeviceIndex>(index));
}

std::string DeviceName(const c10::Device& device) {
  if (device.is_cpu()) return "cpu";
  return "cuda:" + std::to_string(device.has_index() ? device.index() : 0);
}

namespace {

// cudaGetDevice / cudaSetDevice / cudaMemGetInfo (or the hip* twins) from the
// runtime LibTorch's GPU library already loaded; all return 0 on success.
struct GpuRuntime {
  using GetDevice = int (*)(int*);
  using SetDevice = int (*)(int);
  using MemGetInfo = int (*)(size_t*, size_t*);
  GetDevice get_device = nullptr;
  SetDevice set_device = nullptr;
  MemGetInfo mem_get_info = nullptr;

  static const GpuRuntime& Get() {
    static const GpuRuntime r = [] {
      GpuRuntime g;
      for (const char* prefix : {"cuda", "hip"}) {
        const std::string p(prefix);
        g.get_device = reinterpret_cast<GetDevice>(dlsym(RTLD_DEFAULT, (p + "GetDevice").c_str()));
        g.set_device = reinterpret_cast<SetDevice>(dlsym(RTLD_DEFAULT, (p + "SetDevice").c_str()));
        g.mem_get_info =
            reinterpret_cast<MemGetInfo>(dlsym(RTLD_DEFAULT, (p + "MemGetInfo").c_str()));
        if (g.get_device && g.set_device && g.mem_get_info) return g;
      }
      return GpuRuntime{};
    }();
    return r;
  }
};

}  // namespace

std::optional<DeviceMemory> QueryDeviceMemory(const c10::Device& device) {
  if (device.is_cpu() || !at::hasCUDA()) return std::nullopt;
  const GpuRuntime& rt = GpuRuntime::Get();
  if (rt.mem_get_info == nullptr) return std::nullopt;
  int previous = 0;
  if (rt.get_device(&previous) != 0) return std::nullopt;
  const int index = device.has_index() ? device.index() : 0;
  if (index != previous && rt.set_device(index) != 0) return std::nullopt;
  size_t free_bytes = 0, total_bytes = 0;
  const int rc = rt.mem_get_info(&free_bytes, &total_bytes);
  if (index != previous) rt.set_device(previous);
  if (rc != 0) return std::nullopt;
  DeviceMemory m;
  m.total_bytes = static_cast<int64_t>(total_bytes);
  m.used_bytes = static_cast<int64_t>(total_bytes - free_bytes);
  return m;
}

}  // namespace quantd
