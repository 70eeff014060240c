// The options of quantization-aware training (spec.qat; docs/qat.md).
// Torch-free.
#ifndef QUANTD_WORKER_QAT_QAT_OPTIONS_H_
#define QUANTD_WORKER_QAT_QAT_OPTIONS_H_

#include <cstdint>
#include <string>

namespace quantd::qat {

struct QatOptions {
  // kAuto: cross-entropy with labels, MSE with targets, else distillation
  // (TorchScript models); a language model trains each block against its
  // float outputs.
  enum class Loss { kAuto, kCrossEntropy, kMse, kDistillation };
  // Optimizer steps (per decoder block for a language model).
  int steps = 0;
  double learning_rate = 1e-4;
  int batch_size = 32;
  // The training tensor dataset; empty: the calibration dataset.
  std::string dataset_path;
  Loss loss = Loss::kAuto;
  bool train_biases = false;
  bool learn_scales = false;
  uint64_t seed = 0;
};

}  // namespace quantd::qat

#endif  // QUANTD_WORKER_QAT_QAT_OPTIONS_H_
