// RunQuantizationJob: one whole job on the engine.
//
//   load -> quantize (block by block) -> evaluate -> export
//
// Blocks are loaded from the checkpoint one at a time, quantized, measured on
// calibration samples (or the first evaluation windows), written to the
// job's scratch store and dropped, so peak memory is one block plus the
// sample activations. Evaluation compares the float and quantized models in
// one block-wise pass (perplexity of both, KL divergence, top-1 agreement).
// Export reads the quantized weights back from scratch. The observer hears
// progress, per-block metrics and logs, and is asked at every block boundary
// whether to stop.
#ifndef QUANTD_WORKER_PIPELINE_QUANTIZATION_JOB_H_
#define QUANTD_WORKER_PIPELINE_QUANTIZATION_JOB_H_

#include "worker/pipeline/job_observer.h"
#include "worker/pipeline/job_options.h"

namespace quantd::pipeline {

// Never throws. A cancelled job has status CANCELLED and cancelled = true,
// and leaves no artifact behind.
JobOutcome RunQuantizationJob(const JobOptions& options, JobObserver& observer);

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_QUANTIZATION_JOB_H_
