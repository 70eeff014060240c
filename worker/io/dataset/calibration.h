// Calibration sampling: N samples of seq_len tokens from a token stream.
//
// Two protocols, as the reference toolkits use them:
//   concat: the stream cut from its start into consecutive, non-overlapping
//     chunks of seq_len (the first N chunks);
//   random_windows: N windows of seq_len starting at uniformly drawn
//     offsets in [0, len - seq_len], from a seeded generator (GPTQ's
//     wikitext protocol). The generator is a 64-bit Mersenne Twister with
//     rejection sampling, so the same seed gives the same samples on every
//     platform and standard library.
// Defaults: num_samples 128, seq_len 512, seed 42. seq_len is capped to the
// stream length, and concat yields fewer than N samples when the stream
// holds fewer whole chunks; the result records what was actually used.
// Torch-free.
#ifndef QUANTD_WORKER_IO_DATASET_CALIBRATION_H_
#define QUANTD_WORKER_IO_DATASET_CALIBRATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "worker/common/status.h"

namespace quantd::io {

enum class SamplingMethod { kConcat, kRandomWindows };

// "concat" / "random_windows"; INVALID_ARGUMENT for anything else.
StatusOr<SamplingMethod> ParseSamplingMethod(const std::string& name);
const char* SamplingMethodName(SamplingMethod method);

struct CalibrationOptions {
  SamplingMethod method = SamplingMethod::kConcat;
  int64_t num_samples = 128;
  int64_t seq_len = 512;
  uint64_t seed = 42;
  // >= 0: every sample is this BOS id followed by seq_len - 1 stream tokens
  // (llama.cpp imatrix style); -1: samples are cut from the stream as is.
  int32_t bos_per_sample = -1;
};

struct CalibrationSet {
  std::vector<std::vector<int32_t>> samples;  // each seq_len ids
  int64_t seq_len = 0;                        // after capping
  int64_t stream_tokens = 0;
  // e.g. "random_windows: 128 samples x 512 tokens from 245569 tokens (seed 42)".
  std::string description;
};

// INVALID_ARGUMENT for num_samples or seq_len < 1, or an empty stream.
StatusOr<CalibrationSet> SampleCalibration(const std::vector<int32_t>& stream,
                                           const CalibrationOptions& options);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_DATASET_CALIBRATION_H_
