// SmoothQuant on a TorchScript model's layers (algorithm "smoothquant"),
// where the graph allows folding the scales into the weights.
//
// SmoothQuant moves range from a layer's input activations into its weight
// with a per-input-channel scale s (algo/smoothquant.h):
//   s_j = clamp(max|x_j|^α / max|W_:,j|^(1-α), scale_clamp_min).
// The layer's weight takes s (its input channel j times s_j) and the input
// must be divided by s. In a decoder block quantd knows the previous op; a
// TorchScript model is any graph, so the division is folded into the layer
// P whose output reaches the layer through operators that commute with a
// positive per-channel scale (ReLU, pooling, a folded batch norm, dropout,
// reshapes that keep the channel axis): P's output channel j is divided by
// s_j (its weight's output row, and its bias).
//
// Whether P -> layer is such a path is tested on the data, not read from
// the graph: with P's output multiplied by a fixed positive per-channel
// factor r (0.5 to 2) and the layer's input divided by r, the layer's input
// before the division must be the float one times r, and the model's output
// the float output, both within 1e-4 of their largest magnitude (float
// rounding through a few layers is far below that; a path through a bias,
// a non-homogeneous activation, or a branch that also reaches elsewhere
// misses by the size of r). Candidates P have as many output channels as
// the layer has input channels, the nearest earlier layers first.
//
// Layers considered: quantized Linear, Conv2d and ConvTranspose2d with an
// input quantizer (smoothing serves activation quantization), groups 1;
// producers: Linear, Conv2d (any groups: output row j is channel j) and
// ConvTranspose2d with groups 1. Each producer feeds at most one smoothed
// layer. The scales come from one float pass over the calibration samples;
// the algorithm runs before calibration, so observers, GPTQ, QAT and every
// export see the rescaled weights, and the float model still computes the
// same function (checked on the first batch).
#ifndef QUANTD_WORKER_TORCHSCRIPT_SCRIPT_SMOOTHQUANT_H_
#define QUANTD_WORKER_TORCHSCRIPT_SCRIPT_SMOOTHQUANT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/config/algorithm_options.h"
#include "worker/torchscript/script_quantizer.h"
#include "worker/torchscript/tensor_dataset.h"

namespace quantd::torchscript {

struct ScriptSmoothQuantOptions {
  config::SmoothQuantOptions smoothquant;
  int64_t samples = 0;  // of the calibration dataset, from its start
  int batch_size = 32;
};

struct ScriptSmoothQuantReport {
  // "features.3 <- features.0: alpha 0.5, scales 0.21 to 3.9"
  std::vector<std::string> smoothed;
  // "classifier.1: why" for considered layers left unscaled.
  std::vector<std::string> skipped;
};

// FAILED_PRECONDITION when no layer can be smoothed (the reasons named).
StatusOr<ScriptSmoothQuantReport> RunScriptSmoothQuant(ScriptQuantizer& quantizer,
                                                       const TensorDataset& data,
                                                       const ScriptSmoothQuantOptions& options);

}  // namespace quantd::torchscript

#endif  // QUANTD_WORKER_TORCHSCRIPT_SCRIPT_SMOOTHQUANT_H_
