// Throughput of the fused fake-quantization kernels on weight-sized float32
// tensors, against two baselines measured in the same run: a parallel memcpy
// of the same bytes (the memory-bandwidth ceiling) and the same operation
// composed from ATen ops.
//
//   bazel run -c opt //worker/quant:fake_quant_bench [-- --iters=N --threads=T]
//   fake_quant_bench --device=cuda:0   (a GPU build: tools/gpu_check.sh)
//
// GB/s counts the bytes read plus the bytes written (2 x the tensor size).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "worker/quant/fake_quant.h"

namespace quantd::quant {
namespace {

double MedianSeconds(int iters, const std::function<void()>& fn) {
  fn();  // warm-up: page faults, caches, thread pool
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Case {
  std::string name;
  QuantSpec spec;
  bool dynamic;  // MX: block scales computed in the kernel
};

std::vector<Case> Cases() {
  std::vector<Case> out;
  QuantSpec int8;
  int8.dtype = DataType::kInt8;
  int8.qscheme = QScheme::kPerChannel;
  int8.ch_axis = 0;
  out.push_back({"int8 per-channel", int8, false});
  QuantSpec int4;
  int4.dtype = DataType::kInt4;
  int4.qscheme = QScheme::kPerGroup;
  int4.ch_axis = -1;
  int4.group_size = 128;
  out.push_back({"int4 per-group 128", int4, false});
  QuantSpec fp8;
  fp8.dtype = DataType::kFp8E4M3;
  out.push_back({"fp8 e4m3 per-tensor", fp8, false});
  QuantSpec mxfp4;
  mxfp4.dtype = DataType::kMxFp4;
  mxfp4.qscheme = QScheme::kPerGroup;
  out.push_back({"MXFP4 (dynamic)", mxfp4, true});
  QuantSpec mxfp8 = mxfp4;
  mxfp8.dtype = DataType::kMxFp8E4M3;
  out.push_back({"MXFP8 e4m3 (dynamic)", mxfp8, true});
  return out;
}

int Run(int iters, const std::vector<std::vector<int64_t>>& shapes) {
  std::printf("fake_quant_bench: %d intra-op threads, median of %d runs\n", at::get_num_threads(),
              iters);
  std::printf("%-22s %-12s %9s %9s %9s %9s %9s\n", "operation", "shape", "fused", "memcpy",
              "composed", "x memcpy", "x ATen");
  std::printf("%-22s %-12s %9s %9s %9s %9s %9s\n", "", "", "GB/s", "GB/s", "GB/s", "", "");
  for (const std::vector<int64_t>& shape : shapes) {
    at::manual_seed(0);
    const at::Tensor x = at::randn(shape) * 0.02;
    at::Tensor out = at::empty_like(x);
    at::Tensor copy = at::empty_like(x);
    const int64_t bytes = x.numel() * static_cast<int64_t>(sizeof(float));
    const double moved = 2.0 * static_cast<double>(bytes);
    const char* src = static_cast<const char*>(x.data_ptr());
    char* dst = static_cast<char*>(copy.data_ptr());
    const double t_memcpy = MedianSeconds(iters, [&] {
      at::parallel_for(0, bytes, 1 << 20,
                       [&](int64_t b, int64_t e) { std::memcpy(dst + b, src + b, e - b); });
    });
    const std::string shape_name = std::to_string(shape[0]) + "x" + std::to_string(shape[1]);
    for (const Case& c : Cases()) {
      QParams qp;
      if (!c.dynamic) {
        auto computed = ComputeQParams(x, c.spec);
        if (!computed.ok()) {
          std::fprintf(stderr, "%s: %s\n", c.name.c_str(), computed.status().ToString().c_str());
          return 1;
        }
        qp = *computed;
      }
      FakeQuantOptions composed;
      composed.path = KernelPath::kComposed;
      Status status;
      const double t_fused = MedianSeconds(iters, [&] {
        if (c.dynamic) {
          status = FakeQuantizeDynamicInto(x, c.spec, out);
        } else {
          status = FakeQuantizeInto(x, c.spec, qp, out);
        }
      });
      const double t_composed = MedianSeconds(std::max(1, iters / 2), [&] {
        auto y = c.dynamic ? FakeQuantizeDynamic(x, c.spec, composed)
                           : FakeQuantize(x, c.spec, qp, composed);
        if (!y.ok()) status = y.status();
      });
      if (!status.ok()) {
        std::fprintf(stderr, "%s: %s\n", c.name.c_str(), status.ToString().c_str());
        return 1;
      }
      std::printf("%-22s %-12s %9.2f %9.2f %9.2f %9.2f %9.2f\n", c.name.c_str(), shape_name.c_str(),
                  moved / t_fused / 1e9, moved / t_memcpy / 1e9, moved / t_composed / 1e9,
                  t_memcpy / t_fused, t_composed / t_fused);
    }
  }
  return 0;
}

// On a GPU the engine's path is the fused CUDA kernels when the build has
// them (HasCudaKernels()), else the composed ATen formulation. Baselines: a
// device-to-device copy of the same bytes (the bandwidth ceiling) and the
// same operation in eager ATen ops (the composed path). Each timing is
// `reps` launches then one synchronisation (a one-element copy to the host
// waits for the stream). The result is also compared, bit for bit, with the
// fused CPU kernel.
int RunOnDevice(int iters, const std::vector<std::vector<int64_t>>& shapes,
                const at::Device& device) {
  const int reps = 20;
  std::printf("fake_quant_bench on %s: median of %d runs of %d launches; engine path: %s\n",
              device.str().c_str(), iters, reps,
              HasCudaKernels() ? "fused CUDA kernels" : "composed ATen (no CUDA kernels built)");
  std::printf("%-22s %-12s %9s %9s %9s %9s %9s %s\n", "operation", "shape", "engine", "D2D copy",
              "x copy", "eager", "x eager", "bits vs CPU fused");
  std::printf("%-22s %-12s %9s %9s %9s %9s %9s\n", "", "", "GB/s", "GB/s", "", "GB/s", "");
  for (const std::vector<int64_t>& shape : shapes) {
    at::manual_seed(0);
    const at::Tensor x_cpu = at::randn(shape) * 0.02;
    const at::Tensor x = x_cpu.to(device);
    at::Tensor copy = at::empty_like(x);
    const at::Tensor marker = at::zeros({1}, x.options());
    auto timed = [&](const std::function<void()>& fn) {
      return MedianSeconds(iters, [&] {
               for (int r = 0; r < reps; ++r) fn();
               (void)marker.cpu();
             }) /
             reps;
    };
    const double moved = 2.0 * static_cast<double>(x.numel()) * sizeof(float);
    const double t_copy = timed([&] { copy.copy_(x); });
    const std::string shape_name = std::to_string(shape[0]) + "x" + std::to_string(shape[1]);
    for (const Case& c : Cases()) {
      QParams qp, qp_cpu;
      if (!c.dynamic) {
        auto computed = ComputeQParams(x, c.spec);
        auto computed_cpu = ComputeQParams(x_cpu, c.spec);
        if (!computed.ok() || !computed_cpu.ok()) {
          std::fprintf(stderr, "%s: qparams failed\n", c.name.c_str());
          return 1;
        }
        qp = *computed;
        qp_cpu = *computed_cpu;
      }
      Status status;
      at::Tensor y;
      const double t = timed([&] {
        auto r = c.dynamic ? FakeQuantizeDynamic(x, c.spec) : FakeQuantize(x, c.spec, qp);
        if (r.ok()) y = *r; else status = r.status();
      });
      FakeQuantOptions eager;
      eager.path = KernelPath::kComposed;
      const double t_eager = timed([&] {
        auto r = c.dynamic ? FakeQuantizeDynamic(x, c.spec, eager) : FakeQuantize(x, c.spec, qp, eager);
        if (!r.ok()) status = r.status();
      });
      auto ref = c.dynamic ? FakeQuantizeDynamic(x_cpu, c.spec) : FakeQuantize(x_cpu, c.spec, qp_cpu);
      if (!status.ok() || !ref.ok()) {
        std::fprintf(stderr, "%s: %s\n", c.name.c_str(),
                     (status.ok() ? ref.status() : status).ToString().c_str());
        return 1;
      }
      const bool same = at::equal(y.cpu().view(at::kInt), ref->view(at::kInt));
      std::printf("%-22s %-12s %9.1f %9.1f %9.2f %9.1f %9.2f %s\n", c.name.c_str(),
                  shape_name.c_str(), moved / t / 1e9, moved / t_copy / 1e9, t_copy / t,
                  moved / t_eager / 1e9, t_eager / t, same ? "identical" : "DIFFERENT");
      if (!same) status = InternalError("GPU result differs from the CPU kernel");
      if (!status.ok()) return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace quantd::quant

// Flags: --iters=N (default 7), --threads=T (default: all cores),
// --device=cuda:0 (the GPU path against a device-to-device copy),
// --shape=RxC (instead of the two weight shapes; a small one fits in cache
// and measures the kernels' arithmetic rather than memory).
int main(int argc, char** argv) {
  int iters = 7;
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  std::string device = "cpu";
  std::vector<std::vector<int64_t>> shapes = {{4096, 4096}, {14336, 4096}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--iters=", 0) == 0) iters = std::max(1, std::stoi(arg.substr(8)));
    if (arg.rfind("--threads=", 0) == 0) threads = std::stoi(arg.substr(10));
    if (arg.rfind("--device=", 0) == 0) device = arg.substr(9);
    if (arg.rfind("--shape=", 0) == 0) {
      const std::string v = arg.substr(8);
      const size_t x = v.find('x');
      shapes = {{std::stoll(v.substr(0, x)), std::stoll(v.substr(x + 1))}};
    }
  }
  at::set_num_threads(std::max(1, threads));
  if (device != "cpu") return quantd::quant::RunOnDevice(iters, shapes, at::Device(device));
  return quantd::quant::Run(iters, shapes);
}
