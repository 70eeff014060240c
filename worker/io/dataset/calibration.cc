#include "worker/io/dataset/calibration.h"

#include <algorithm>
#include <random>

namespace quantd::io {
namespace {

// Uniform integer in [0, n], independent of the standard library's
// distribution implementation (rejection sampling on raw 64-bit draws).
uint64_t UniformInclusive(std::mt19937_64& rng, uint64_t n) {
  if (n == UINT64_MAX) return rng();
  const uint64_t range = n + 1;
  const uint64_t limit = UINT64_MAX - (UINT64_MAX % range);
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return x % range;
}

}  // namespace

StatusOr<SamplingMethod> ParseSamplingMethod(const std::string& name) {
  if (name == "concat") return SamplingMethod::kConcat;
  if (name == "random_windows") return SamplingMethod::kRandomWindows;
  return InvalidArgumentError("unknown calibration sampling \"" + name +
                              "\" (expected concat or random_windows)");
}

const char* SamplingMethodName(SamplingMethod method) {
  return method == SamplingMethod::kConcat ? "concat" : "random_windows";
}

StatusOr<CalibrationSet> SampleCalibration(const std::vector<int32_t>& stream,
                                           const CalibrationOptions& o) {
  if (o.num_samples < 1) {
    return InvalidArgumentError("num_samples must be >= 1, got " + std::to_string(o.num_samples));
  }
  if (o.seq_len < 1)
    return InvalidArgumentError("seq_len must be >= 1, got " + std::to_string(o.seq_len));
  if (stream.empty()) return InvalidArgumentError("the calibration text has no tokens");
  const bool bos = o.bos_per_sample >= 0;
  CalibrationSet set;
  set.stream_tokens = static_cast<int64_t>(stream.size());
  // Stream tokens per sample.
  const int64_t cap = set.stream_tokens + (bos ? 1 : 0);
  set.seq_len = std::min(o.seq_len, cap);
  const int64_t take = set.seq_len - (bos ? 1 : 0);

  auto emit = [&](int64_t start) {
    std::vector<int32_t> s;
    s.reserve(set.seq_len);
    if (bos) s.push_back(o.bos_per_sample);
    s.insert(s.end(), stream.begin() + start, stream.begin() + start + take);
    set.samples.push_back(std::move(s));
  };
  if (o.method == SamplingMethod::kConcat) {
    const int64_t chunks = take > 0 ? set.stream_tokens / take : o.num_samples;
    for (int64_t i = 0; i < std::min(o.num_samples, chunks); ++i) emit(i * take);
  } else {
    std::mt19937_64 rng(o.seed);
    const uint64_t max_start = static_cast<uint64_t>(set.stream_tokens - take);
    for (int64_t i = 0; i < o.num_samples; ++i) {
      emit(static_cast<int64_t>(UniformInclusive(rng, max_start)));
    }
  }
  set.description = std::string(SamplingMethodName(o.method)) + ": " +
                    std::to_string(set.samples.size()) + " samples x " +
                    std::to_string(set.seq_len) + " tokens from " +
                    std::to_string(set.stream_tokens) + " tokens";
  if (o.method == SamplingMethod::kRandomWindows) {
    set.description += " (seed " + std::to_string(o.seed) + ")";
  }
  if (bos) set.description += ", BOS first in every sample";
  return set;
}

}  // namespace quantd::io
