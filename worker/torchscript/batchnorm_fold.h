// Folds each BatchNorm2d that directly follows a Conv2d (the convolution's
// output feeds only the batch norm) into the convolution, as the reference
// toolkit does before static activation quantization: the convolution's
// weight is scaled per output channel by gamma / sqrt(running_var + eps),
// its bias becomes (bias - running_mean) * that scale + beta (computed in
// float64, stored in the weight's dtype), and the batch norm's call leaves
// the graph. A convolution traced without a bias gets one.
#ifndef QUANTD_WORKER_TORCHSCRIPT_BATCHNORM_FOLD_H_
#define QUANTD_WORKER_TORCHSCRIPT_BATCHNORM_FOLD_H_

#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/torchscript/script_model.h"

namespace quantd::torchscript {

struct FoldReport {
  // "block1.conv <- block1.bn" per folded pair.
  std::vector<std::string> folded;
  // Pairs left alone and why.
  std::vector<std::string> skipped;
};

StatusOr<FoldReport> FoldBatchNorms(ScriptModel& model);

}  // namespace quantd::torchscript

#endif  // QUANTD_WORKER_TORCHSCRIPT_BATCHNORM_FOLD_H_
