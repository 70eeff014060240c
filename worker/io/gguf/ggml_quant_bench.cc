// Throughput of ggml's quantizers (reference and importance-weighted) on a
// weight-sized float32 matrix, single-threaded, against a baseline measured
// in the same run: the F16 conversion of the same floats (one rounding per
// element, the cheapest encode a GGUF export does). A llama.cpp recipe job
// runs these over every weight twice (the evaluated values and the export).
//
//   bazel run -c opt //worker/io/gguf:ggml_quant_bench [-- --rows=N --cols=N --iters=N]
//
// MB/s counts the float32 bytes read.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "worker/common/bench_util.h"
#include "worker/io/gguf/ggml_types.h"

namespace quantd::gguf {
namespace {

double MedianSeconds(int64_t iters, GgmlType type, const std::vector<float>& x, int64_t rows,
                     int64_t cols, const float* importance, std::vector<uint8_t>* out) {
  std::vector<double> t;
  for (int64_t i = 0; i <= iters; ++i) {  // the first run warms up
    const double start = bench::NowSeconds();
    const Status s = QuantizeRows(type, x.data(), out->data(), rows, cols, importance);
    if (!s.ok()) std::fprintf(stderr, "%s\n", s.message().c_str());
    if (i > 0) t.push_back(bench::NowSeconds() - start);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int Main(int argc, char** argv) {
  int64_t rows = 1024, cols = 4096, iters = 3;
  for (int i = 1; i < argc; ++i) {
    if (bench::IntFlag(argv[i], "--rows", &rows) || bench::IntFlag(argv[i], "--cols", &cols) ||
        bench::IntFlag(argv[i], "--iters", &iters))
      continue;
    std::fprintf(stderr,
                 "usage: ggml_quant_bench [--rows=N --cols=N (a multiple of 256) --iters=N]\n");
    return 2;
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = normal(rng);
  std::vector<float> importance(cols);
  std::uniform_real_distribution<float> uniform(0.1f, 4.0f);
  for (float& v : importance) v = uniform(rng);
  const double mb = static_cast<double>(x.size()) * 4 / 1e6;
  std::vector<uint8_t> out(*GgmlRowBytes(GgmlType::kF32, rows * cols));
  const double base = MedianSeconds(iters, GgmlType::kF16, x, rows, cols, nullptr, &out);
  std::printf("%d x %d float32 (%.0f MB), median of %d runs, one thread\n", static_cast<int>(rows),
              static_cast<int>(cols), mb, static_cast<int>(iters));
  std::printf("%-16s %10s %10s\n", "type", "MB/s", "vs F16");
  std::printf("%-16s %10.1f %10.3f\n", "F16 (baseline)", mb / base, 1.0);
  const std::vector<GgmlType> types = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ5_0,
                                       GgmlType::kQ5_1, GgmlType::kQ2_K, GgmlType::kQ3_K,
                                       GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
  for (bool weighted : {false, true}) {
    for (GgmlType type : types) {
      if (weighted && type == GgmlType::kQ8_0) continue;  // ggml ignores importance for Q8_0
      const double s =
          MedianSeconds(iters, type, x, rows, cols, weighted ? importance.data() : nullptr, &out);
      const std::string name =
          std::string(GetGgmlTypeTraits(type).name) + (weighted ? " imatrix" : "");
      std::printf("%-16s %10.1f %10.3f\n", name.c_str(), mb / s, base / s);
    }
  }
  return 0;
}

}  // namespace
}  // namespace quantd::gguf

int main(int argc, char** argv) { return quantd::gguf::Main(argc, argv); }
