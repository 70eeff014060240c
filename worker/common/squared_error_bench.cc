// squared_error_bench: SumSquaredError (float64 sums a 32 MiB slice at a
// time) against the whole-tensor float64 formulation it replaced,
// measured in the same run on the same tensors.
//
//   bazel run -c opt //worker/common:squared_error_bench -- [--melems=64]
//       [--reps=3] [--device=cpu|cuda:0]
//
// Prints each path's seconds, GB/s over the two float32 inputs, the ratio
// sliced / whole, and the extra memory each took at its peak: on CPU the
// rise of the process's peak RSS (the sliced path runs first, so its rise
// is its own), on a GPU the caching allocator's live peak above the inputs
// (LibTorch 2.9 or later).
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "worker/common/bench_util.h"
#include "worker/common/peak_rss.h"
#include "worker/common/squared_error.h"
#include "worker/common/torch_compat.h"

namespace {

// The formulation before the sliced sums: float64 copies of both tensors
// and of their difference and squares, whole.
quantd::SquaredError WholeTensorFloat64(const at::Tensor& out, const at::Tensor& ref) {
  const at::Tensor r = ref.to(at::kDouble);
  const double energy = r.pow(2).sum().item<double>();
  const double error = (out.to(at::kDouble) - r).pow(2).sum().item<double>();
  return {energy, error};
}

struct Run {
  double seconds = 1e30;
  double extra_gib = 0;
  quantd::SquaredError sums;
};

template <typename F>
Run Measure(F f, const c10::Device& device, int64_t reps) {
  Run run;
  const double rss_before = static_cast<double>(quantd::PeakRssBytes());
  quantd::torch_compat::ResetAllocatorPeaks(device);
  const auto live_before = quantd::torch_compat::DeviceAllocatorStats(device);
  for (int64_t i = 0; i < reps; ++i) {
    const double start = quantd::bench::NowSeconds();
    run.sums = f();  // item() synchronises a GPU
    run.seconds = std::min(run.seconds, quantd::bench::NowSeconds() - start);
  }
  if (auto after = quantd::torch_compat::DeviceAllocatorStats(device); after && live_before) {
    run.extra_gib = (after->peak_allocated - live_before->allocated) / 1073741824.0;
  } else {
    run.extra_gib = (quantd::PeakRssBytes() - rss_before) / 1073741824.0;
  }
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t melems = 64, reps = 3;
  std::string device_name = "cpu";
  for (int i = 1; i < argc; ++i) {
    if (quantd::bench::IntFlag(argv[i], "--melems", &melems) ||
        quantd::bench::IntFlag(argv[i], "--reps", &reps))
      continue;
    if (std::strncmp(argv[i], "--device=", 9) == 0) {
      device_name = argv[i] + 9;
      continue;
    }
    std::fprintf(stderr, "usage: squared_error_bench [--melems=64] [--reps=3] [--device=cpu]\n");
    return 2;
  }
  const c10::Device device(device_name);
  const int64_t n = melems << 20;
  at::manual_seed(1);
  const at::Tensor ref = at::randn({n}, at::TensorOptions().device(device));
  const at::Tensor out = ref + 0.01 * at::randn({n}, at::TensorOptions().device(device));
  const double gb = 2.0 * 4.0 * static_cast<double>(n) / 1e9;

  const Run sliced = Measure([&] { return quantd::SumSquaredError(out, ref); }, device, reps);
  const Run whole = Measure([&] { return WholeTensorFloat64(out, ref); }, device, reps);

  std::printf("squared_error_bench  %s  %lld M float32 elements x 2 (%.2f GB), best of %lld\n",
              device_name.c_str(), static_cast<long long>(melems), gb,
              static_cast<long long>(reps));
  std::printf("| path | s | GB/s | extra memory at peak GiB |\n|---|---|---|---|\n");
  std::printf("| sliced (SumSquaredError) | %.4f | %.1f | %.3f |\n", sliced.seconds,
              gb / sliced.seconds, sliced.extra_gib);
  std::printf("| whole-tensor float64 | %.4f | %.1f | %.3f |\n", whole.seconds, gb / whole.seconds,
              whole.extra_gib);
  std::printf("sliced / whole: %.2fx the time; relative difference of the error sums %.1e\n",
              sliced.seconds / whole.seconds,
              std::abs(sliced.sums.error - whole.sums.error) / whole.sums.error);
  return 0;
}
