// torch_compat: the one place where LibTorch 1.13 (Debian, CPU) and vendor
// LibTorch 2.x (CUDA / ROCm releases, a pip wheel's torch/ folder) differ.
//
// The engine is written against the API both versions share. Where a call
// changed between them, the engine calls the wrapper here instead, so a
// version bump is one edit in one header. Header-only; needs LibTorch's
// include directory (//third_party:libtorch).
#ifndef QUANTD_WORKER_COMMON_TORCH_COMPAT_H_
#define QUANTD_WORKER_COMMON_TORCH_COMPAT_H_

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <optional>
#include <string>

// torch/version.h lives under torch/csrc/api/include in every LibTorch
// layout (Debian, release zips, pip wheels); the short <torch/version.h>
// form only works when that API folder is on the include path.
#if __has_include(<torch/version.h>)
#include <torch/version.h>
#else
#include <torch/csrc/api/include/torch/version.h>
#endif

// 2.9's device-generic allocator interface (c10::DeviceAllocator), which
// reports the caching allocator's statistics without CUDA headers.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 9)
#include <c10/core/CachingDeviceAllocator.h>
#define QUANTD_TORCH_HAS_DEVICE_ALLOCATOR 1
#else
#define QUANTD_TORCH_HAS_DEVICE_ALLOCATOR 0
#endif

#define QUANTD_TORCH_VERSION_MAJOR TORCH_VERSION_MAJOR
#define QUANTD_TORCH_VERSION_MINOR TORCH_VERSION_MINOR
// True when the LibTorch being compiled against is at least major.minor.
#define QUANTD_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||         \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace quantd::torch_compat {

// "1.13.0", "2.6.0", ...: reported by the CLI and the benches.
inline std::string TorchVersion() { return TORCH_VERSION; }

// Read-only element pointer. 2.1 added const_data_ptr and started to steer
// const access away from data_ptr (copy-on-write storages materialise on a
// mutable access); 1.13 has only data_ptr.
template <typename T>
const T* ConstDataPtr(const at::Tensor& t) {
#if QUANTD_TORCH_AT_LEAST(2, 1)
  return t.const_data_ptr<T>();
#else
  return t.data_ptr<T>();
#endif
}

// Writable element pointer (mutable_data_ptr from 2.1 on).
template <typename T>
T* MutableDataPtr(const at::Tensor& t) {
#if QUANTD_TORCH_AT_LEAST(2, 1)
  return t.mutable_data_ptr<T>();
#else
  return t.data_ptr<T>();
#endif
}

// ATen's own float8 dtypes (Float8_e4m3fn, Float8_e5m2) exist from 2.1. The
// engine simulates FP8 in float32 and never needs them, but a loader meeting
// an FP8 checkpoint tensor asks here. nullopt: this LibTorch has no such dtype.
inline std::optional<at::ScalarType> Float8E4M3FnType() {
#if QUANTD_TORCH_AT_LEAST(2, 1)
  return at::ScalarType::Float8_e4m3fn;
#else
  return std::nullopt;
#endif
}
inline std::optional<at::ScalarType> Float8E5M2Type() {
#if QUANTD_TORCH_AT_LEAST(2, 1)
  return at::ScalarType::Float8_e5m2;
#else
  return std::nullopt;
#endif
}

// c10::optional became an alias of std::optional in 2.x (and is on its way
// out); ATen signatures accept both, so engine code spells ATen's optional
// arguments with this alias and converts nothing.
template <typename T>
using TorchOptional = c10::optional<T>;

// True when this LibTorch can run kernels on `type` (kCPU always). A ROCm
// build reports its GPUs through the CUDA device type (HIP is masqueraded as
// CUDA by PyTorch's hipify), so "cuda:N" works on both vendors.
inline bool DeviceTypeAvailable(c10::DeviceType type) {
  switch (type) {
    case c10::DeviceType::CPU:
      return true;
    case c10::DeviceType::CUDA:
      return at::hasCUDA();
    default:
      return false;
  }
}

// What LibTorch's caching allocator holds on a GPU, in bytes: live tensors
// (allocated) and everything it has taken from the device, cached free
// blocks included (reserved), now and at their peaks since the last
// ResetAllocatorPeaks.
struct AllocatorStats {
  int64_t allocated = 0;
  int64_t reserved = 0;
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
};

#if QUANTD_TORCH_HAS_DEVICE_ALLOCATOR
// The device's caching allocator once it has served an allocation; null on
// CPU, before that, or when LibTorch has none for the device type (throws
// c10::Error, which the callers turn into "nothing to report").
inline c10::DeviceAllocator* InitializedDeviceAllocator(const c10::Device& device) {
  if (device.is_cpu()) return nullptr;
  c10::DeviceAllocator* a = c10::getDeviceAllocator(device.type());
  return a != nullptr && a->initialized() ? a : nullptr;
}
#endif

// nullopt on CPU, before the device's first allocation, and with a LibTorch
// older than 2.9: 1.13 and earlier 2.x expose these statistics only through
// CUDA headers, which the engine does not build against.
inline std::optional<AllocatorStats> DeviceAllocatorStats(const c10::Device& device) {
#if QUANTD_TORCH_HAS_DEVICE_ALLOCATOR
  try {
    c10::DeviceAllocator* a = InitializedDeviceAllocator(device);
    if (a == nullptr) return std::nullopt;
    const auto s = a->getDeviceStats(device.has_index() ? device.index() : 0);
    constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    AllocatorStats r;
    r.allocated = s.allocated_bytes[kAll].current;
    r.reserved = s.reserved_bytes[kAll].current;
    r.peak_allocated = s.allocated_bytes[kAll].peak;
    r.peak_reserved = s.reserved_bytes[kAll].peak;
    return r;
  } catch (const c10::Error&) {
    return std::nullopt;
  }
#else
  (void)device;
  return std::nullopt;
#endif
}

// Starts new peaks at the current values (no-op where DeviceAllocatorStats
// has nothing to report).
inline void ResetAllocatorPeaks(const c10::Device& device) {
#if QUANTD_TORCH_HAS_DEVICE_ALLOCATOR
  try {
    if (c10::DeviceAllocator* a = InitializedDeviceAllocator(device))
      a->resetPeakStats(device.has_index() ? device.index() : 0);
  } catch (const c10::Error&) {
  }
#else
  (void)device;
#endif
}

}  // namespace quantd::torch_compat

#endif  // QUANTD_WORKER_COMMON_TORCH_COMPAT_H_
