// GPTQ cost on Llama-sized linears, against the Hessian accumulation matmuls
// of the same layer measured in the same run (the part of GPTQ that grows
// with the calibration set).
//
//   bazel run -c opt //worker/algo:gptq_bench [-- --tokens=N --layers=4096x4096,14336x4096
//       --threads=T]
//   gptq_bench --device=cuda:0 --tokens=262144   (a GPU build: tools/gpu_check.sh)
//
// On a GPU the Hessian is accumulated on the device and GptqQuantizeWeight
// runs its whole column loop there (integer specs: the fused column kernel
// of a CMake CUDA build). tensor_s times the same GPTQ through the
// per-column tensor-op loop (GptqQuantizeWeightWithTensorOps), the GPU's
// loop before that kernel; tensor/gptq is the speed-up of the default loop
// over it, and `same` says whether the two gave the same bits (the bench
// fails when not).
// tools/gpu_check.sh adds 4096x14336 (down_proj, a 14336 x 14336 Hessian),
// too slow for a small CPU.
//
// Each layer's "hessian accumulation" line times the accumulation under
// bfloat16 calibration (inputs rounded to bfloat16, TF32 products on a GPU)
// against the float32 one.
//
// The "gguf Q4_K" row is GPTQ with a llama.cpp recipe's Q4_K blocks as its
// quantizer (GptqQuantizeGgml), which runs on the CPU.
//
// Shapes are [out, in] weights: 4096x4096 (q/o_proj of a 7B/8B model) and
// 14336x4096 (Llama-3-8B gate/up_proj; their Hessian is 4096 x 4096). The
// reference setting is 128 x 2048 calibration tokens; on a small machine use
// fewer (--tokens) and read the "scaled" column, which multiplies the
// measured accumulation time by 262144 / tokens (it is linear in tokens).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "worker/algo/gptq.h"
#include "worker/algo/gptq_ggml.h"
#include "worker/models/matmul_dtype.h"
#include "worker/quant/spec.h"

namespace quantd::algo {
namespace {

constexpr int64_t kReferenceTokens = 128 * 2048;
constexpr int64_t kChunk = 2048;  // tokens per accumulation step (one sample)

at::Device g_device = at::kCPU;

// Wall time of fn, including the device work it queued (a one-element copy
// to the host waits for the stream).
double Seconds(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  if (!g_device.is_cpu()) (void)at::zeros({1}, at::TensorOptions().device(g_device)).cpu();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

quant::QuantSpec Int4(int group) {
  quant::QuantSpec s;
  s.dtype = quant::DataType::kUInt4;
  s.symmetric = false;
  if (group > 0) {
    s.qscheme = quant::QScheme::kPerGroup;
    s.group_size = group;
    s.ch_axis = -1;
  } else {
    s.qscheme = quant::QScheme::kPerChannel;
    s.ch_axis = 0;
  }
  return s;
}

int Run(int64_t tokens, const std::vector<std::pair<int64_t, int64_t>>& layers) {
  std::printf(
      "device %s, threads %d, calibration tokens %lld (reference %lld), accumulation in chunks of "
      "%lld\n",
      g_device.str().c_str(), at::get_num_threads(), static_cast<long long>(tokens),
      static_cast<long long>(kReferenceTokens), static_cast<long long>(kChunk));
  std::printf("%-12s %-16s %10s %10s %10s %10s %12s %14s %10s %10s %6s\n", "layer", "spec",
              "matmul_s", "accum_s", "gptq_s", "ratio", "scaled_mm_s", "scaled_ratio", "tensor_s",
              "tensor/gptq", "same");
  {
    // Warm-up: a device's first factorisation and launches load libraries.
    at::Tensor w0 = at::randn({256, 256}).to(g_device);
    HessianAccumulator a0(256);
    if (!a0.Add(at::randn({1, 1024, 256}).to(g_device)).ok()) return 1;
    (void)GptqQuantizeWeight(w0, a0.hessian(), Int4(128));
    (void)GptqQuantizeWeightWithTensorOps(w0, a0.hessian(), Int4(128));
  }
  for (const auto& [out, in] : layers) {
    at::manual_seed(0);
    // Inputs with correlated channels, as activations have.
    at::Tensor mix = (at::randn({in, in}) / std::sqrt(static_cast<double>(in))).to(g_device);
    at::Tensor w = (at::randn({out, in}) * 0.02).to(g_device);
    std::vector<at::Tensor> chunks;
    for (int64_t t = 0; t < tokens; t += kChunk) {
      at::Tensor g = at::randn({std::min(kChunk, tokens - t), in}).to(g_device);
      chunks.push_back(g + g.matmul(mix));
    }
    // Baseline: the accumulation matmuls alone, H += x^T x.
    at::Tensor h = at::zeros({in, in}, w.options());
    const double mm = Seconds([&] {
      for (const at::Tensor& x : chunks) h.addmm_(x.t(), x);
    });
    HessianAccumulator acc(in);
    const double accum = Seconds([&] {
      for (const at::Tensor& x : chunks) {
        Status s = acc.Add(x.unsqueeze(0));
        if (!s.ok()) std::abort();
      }
    });
    // The same accumulation under bfloat16 calibration (the rounded inputs;
    // TF32 products on a GPU), against the float32 one above.
    const double accum_bf16 = Seconds([&] {
      HessianAccumulator bf16(in);
      models::MatmulDtypeScope scope(at::kBFloat16);
      for (const at::Tensor& x : chunks) {
        Status s = bf16.Add(x.unsqueeze(0));
        if (!s.ok()) std::abort();
      }
    });
    std::printf(
        "%-12s hessian accumulation: float32 %.3f s, bfloat16 calibration %.3f s "
        "(%.2fx of float32's time)\n",
        (std::to_string(out) + "x" + std::to_string(in)).c_str(), accum, accum_bf16,
        accum_bf16 / accum);
    for (const auto& [label, spec] : std::vector<std::pair<std::string, quant::QuantSpec>>{
             {"uint4 g128", Int4(128)}, {"uint4 channel", Int4(0)}}) {
      StatusOr<GptqResult> r = InternalError("not run");
      const double gptq = Seconds([&] { r = GptqQuantizeWeight(w, acc.hessian(), spec); });
      if (!r.ok()) {
        std::fprintf(stderr, "GPTQ failed: %s\n", r.status().ToString().c_str());
        return 1;
      }
      const double scaled_mm = mm * static_cast<double>(kReferenceTokens) / tokens;
      // The per-column tensor-op loop (the GPU's loop before the fused
      // kernel; on the CPU, the GPU's loop run here) on the same inputs.
      StatusOr<GptqResult> rt = InternalError("not run");
      const double tensor =
          Seconds([&] { rt = GptqQuantizeWeightWithTensorOps(w, acc.hessian(), spec); });
      if (!rt.ok()) {
        std::fprintf(stderr, "GPTQ (tensor ops) failed: %s\n", rt.status().ToString().c_str());
        return 1;
      }
      const bool same = at::equal(rt->weight.cpu(), r->weight.cpu());
      std::printf("%-12s %-16s %10.2f %10.2f %10.3f %10.2f %12.1f %14.3f %10.3f %10.1f %6s\n",
                  (std::to_string(out) + "x" + std::to_string(in)).c_str(), label.c_str(), mm,
                  accum, gptq, gptq / mm, scaled_mm, gptq / scaled_mm, tensor, tensor / gptq,
                  same ? "yes" : "NO");
      if (!same) return 1;
    }
    // GPTQ on a llama.cpp recipe's Q4_K grid (gptq_ggml.h: blocks fit by
    // ggml's quantizer as the loop reaches them; the CPU whatever the
    // device): no tensor-op twin.
    StatusOr<GgmlGptqResult> g = InternalError("not run");
    const double ggml =
        Seconds([&] { g = GptqQuantizeGgml(w, acc.hessian(), gguf::GgmlType::kQ4_K); });
    if (!g.ok()) {
      std::fprintf(stderr, "GPTQ (Q4_K) failed: %s\n", g.status().ToString().c_str());
      return 1;
    }
    const double scaled_mm = mm * static_cast<double>(kReferenceTokens) / tokens;
    std::printf("%-12s %-16s %10.2f %10.2f %10.3f %10.2f %12.1f %14.3f %10s %10s %6s\n",
                (std::to_string(out) + "x" + std::to_string(in)).c_str(), "gguf Q4_K", mm, accum,
                ggml, ggml / mm, scaled_mm, ggml / scaled_mm, "-", "-", "-");
  }
  return 0;
}

}  // namespace
}  // namespace quantd::algo

int main(int argc, char** argv) {
  int64_t tokens = 8 * 2048;
  std::vector<std::pair<int64_t, int64_t>> layers = {{4096, 4096}, {14336, 4096}};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--tokens=", 0) == 0) {
      tokens = std::atoll(a.c_str() + 9);
    } else if (a.rfind("--layers=", 0) == 0) {
      layers.clear();
      std::stringstream ss(a.substr(9));
      std::string item;
      while (std::getline(ss, item, ',')) {
        const size_t x = item.find('x');
        if (x == std::string::npos) {
          std::fprintf(stderr, "--layers wants OUTxIN[,OUTxIN...]\n");
          return 2;
        }
        layers.emplace_back(std::atoll(item.substr(0, x).c_str()),
                            std::atoll(item.substr(x + 1).c_str()));
      }
    } else if (a.rfind("--device=", 0) == 0) {
      quantd::algo::g_device = at::Device(a.substr(9));
    } else if (a.rfind("--threads=", 0) == 0 && std::atoi(a.c_str() + 10) > 0) {
      at::set_num_threads(std::atoi(a.c_str() + 10));
    } else {
      std::fprintf(stderr,
                   "usage: gptq_bench [--tokens=N] [--layers=OUTxIN,...] [--device=D] "
                   "[--threads=T]\n");
      return 2;
    }
  }
  if (tokens < 1) return 2;
  return quantd::algo::Run(tokens, layers);
}
