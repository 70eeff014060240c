// Launch interface of GPTQ's fused CUDA column loop (gptq_kernels.cu,
// compiled by nvcc in the CMake build when LibTorch has CUDA). Plain data
// only, so that gptq.cc and nvcc share nothing but this header.
#ifndef QUANTD_WORKER_ALGO_CUDA_GPTQ_KERNELS_H_
#define QUANTD_WORKER_ALGO_CUDA_GPTQ_KERNELS_H_

#include <cstdint>

#include "worker/quant/spec.h"

namespace quantd::algo::cuda {

// One block of columns [i1, i2) of GPTQ's loop for an integer weight spec:
// for each column, in order, the group's parameters when a group starts
// there, the column's rounding, its scaled error and the updates of the
// block's later columns. Rows are independent, so each thread takes one row
// through the whole block; the arithmetic is GptqRun::IntegerBlock's (the
// host loop), operation for operation. All pointers are device memory.
struct IntegerBlockArgs {
  float* w = nullptr;             // [cols, rows]: column c of the weight is row c
  float* q = nullptr;             // [cols, rows]: the rounded values (out)
  float* err = nullptr;           // [i2 - i1, rows]: (w - q) / Hinv_pp (out)
  const float* hinv = nullptr;    // [cols, cols]
  float* scale = nullptr;         // [rows, groups]
  float* zero_point = nullptr;    // [rows, groups], or null (symmetric with no zero point)
  double* loss = nullptr;         // [rows], accumulated
  const int64_t* perm = nullptr;  // [cols] (static groups only)
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t i1 = 0;
  int64_t i2 = 0;
  int64_t groups = 1;
  // 0: one parameter column (per tensor or per channel); 1: groups of
  // group_size consecutive columns, fit when their first column is reached;
  // 2: static groups, group perm[p] / group_size, fit before the loop.
  int group_mode = 0;
  int64_t group_size = 0;
  float qmin = 0;
  float qmax = 0;
  bool symmetric = true;
  bool float_zero_point = false;
  float symmetric_zero_point = 0;
  quant::RoundMethod round = quant::RoundMethod::kHalfEven;
};

// The largest i2 - i1 the kernel takes (its shared-memory tile).
constexpr int64_t kMaxBlockColumns = 256;

// Launches on the current CUDA stream of `device_index`; nullptr on
// success, else the CUDA error's text.
const char* LaunchIntegerBlock(const IntegerBlockArgs& args, int device_index);

}  // namespace quantd::algo::cuda

#endif  // QUANTD_WORKER_ALGO_CUDA_GPTQ_KERNELS_H_
