// scratch_store_bench: a quantize loop's block writes, synchronous (Put)
// against overlapped with the next block's compute (PutAsync), measured in
// the same run.
//
//   bazel run -c opt //worker/pipeline:scratch_store_bench -- [--blocks=6]
//       [--mb=256] [--dir=/tmp/quantd_scratch_bench]
//
// Each block "computes" with float32 matmuls for about as long as one of its
// writes takes (measured first), then writes --mb of float32 tensors,
// fsync'd, to the scratch store. Prints the loop's seconds both ways and the
// ratio async / sync (0.5 is full overlap when compute and write take the
// same time; 1.0 is none).
#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "worker/common/bench_util.h"
#include "worker/pipeline/scratch_store.h"

namespace {

using quantd::pipeline::ScratchStore;
using Tensors = std::vector<std::pair<std::string, at::Tensor>>;

// About `seconds` of float32 matmuls; returns a value so they are not elided.
double Compute(double seconds, const at::Tensor& a) {
  double sink = 0;
  const double end = quantd::bench::NowSeconds() + seconds;
  while (quantd::bench::NowSeconds() < end) sink += a.matmul(a).sum().item<double>();
  return sink;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t blocks = 6, mb = 256;
  std::string dir = "/tmp/quantd_scratch_bench";
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--dir=", 6) == 0) {
      dir = a + 6;
    } else if (!quantd::bench::IntFlag(a, "--blocks", &blocks) &&
               !quantd::bench::IntFlag(a, "--mb", &mb)) {
      std::fprintf(stderr, "unknown argument %s\n", a);
      return 2;
    }
  }
  // A block's tensors: four of mb / 4 MiB each.
  const int64_t per = mb * 1024 * 1024 / 4 / 4;
  Tensors block;
  for (int t = 0; t < 4; ++t) block.emplace_back("t" + std::to_string(t), at::randn({per}));
  const at::Tensor a = at::randn({256, 256});

  const auto run = [&](bool async, double compute_s, double* sink) -> double {
    std::filesystem::remove_all(dir);
    auto store = ScratchStore::Create(dir);
    if (!store.ok()) {
      std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
      std::exit(1);
    }
    const double start = quantd::bench::NowSeconds();
    for (int64_t b = 0; b < blocks; ++b) {
      *sink += Compute(compute_s, a);
      Tensors named;
      for (const auto& [name, t] : block) named.emplace_back(std::to_string(b) + "." + name, t);
      const std::string file = "block_" + std::to_string(b);
      auto s = async ? (*store)->PutAsync(file, named) : (*store)->Put(file, named);
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        std::exit(1);
      }
    }
    if (auto s = (*store)->Flush(); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      std::exit(1);
    }
    return quantd::bench::NowSeconds() - start;
  };

  double sink = 0;
  const double write_s = run(false, 0, &sink) / blocks;  // writes alone
  const double sync_s = run(false, write_s, &sink);
  const double async_s = run(true, write_s, &sink);
  std::filesystem::remove_all(dir);
  std::printf(
      "scratch_store_bench: %lld blocks of %lld MiB, each with %.2f s of compute "
      "(one write alone: %.2f s)\n",
      static_cast<long long>(blocks), static_cast<long long>(mb), write_s, write_s);
  std::printf("%-28s %8.2f s\n", "sync (Put)", sync_s);
  std::printf("%-28s %8.2f s\n", "async (PutAsync)", async_s);
  std::printf("%-28s %8.3f   (0.5: full overlap, 1.0: none)\n", "ratio async / sync",
              async_s / sync_s);
  return sink == 12345.678 ? 1 : 0;
}
