// The figures a job derives from what it measured: a block's output error,
// the accuracy gate over the evaluation's results, and the log line of the
// evaluation's frozen (real-quantized) sizes.
#ifndef QUANTD_WORKER_PIPELINE_JOB_METRICS_H_
#define QUANTD_WORKER_PIPELINE_JOB_METRICS_H_

#include <ATen/ATen.h>

#include <string>

#include "worker/common/status.h"
#include "worker/pipeline/freeze.h"
#include "worker/pipeline/job_options.h"

namespace quantd::pipeline {

// ||quantized - reference||^2 / ||reference||^2 in float64 (a block's
// output_rel_mse); 0 when the reference is all zeros.
double OutputRelMse(const at::Tensor& quantized, const at::Tensor& reference);

// FAILED_PRECONDITION, reason ACCURACY_GATE, naming every limit of `limits`
// that `report`'s perplexity or mean KL divergence exceeds; OK otherwise
// (also when the figure was not measured).
Status AccuracyGate(const EvaluationOptions& limits, const JobReport& report);

// "885.0 KiB as float, 134.1 KiB real-quantized (0.151x)": the packed
// size is counted as the model size is (QuantizedStorageBytes), and what
// evaluation held in memory is added when it differs (codes of 2, 3, 5
// or 6 bits are held one per byte).
std::string FrozenSizeLine(const FreezeReport& r);

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_JOB_METRICS_H_
