// Accuracy-targeted quantization (spec.auto_precision; docs/auto_precision.md):
// a job that measures each layer's sensitivity to the candidate formats,
// picks the cheapest assignment predicted to meet the evaluation's budget,
// measures it, corrects its prediction and tries again, then quantizes and
// exports the chosen assignment as an ordinary job.
#ifndef QUANTD_WORKER_PRECISION_AUTO_PRECISION_JOB_H_
#define QUANTD_WORKER_PRECISION_AUTO_PRECISION_JOB_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "worker/pipeline/job_observer.h"
#include "worker/pipeline/job_options.h"

namespace quantd::precision {

struct AutoPrecisionOptions {
  // Preset names or "float", as the spec lists them (checked at CreateJob).
  std::vector<std::string> candidates;
  // spec.quantization.group_size, for the per-group presets.
  std::optional<int> group_size;
  // Measured rounds, the first (every layer in the cheapest candidate)
  // included.
  int max_rounds = 4;
  // spec.auto_precision.cost_per_weight: a cost per weight for every
  // candidate, minimized instead of the bytes; empty: the bytes.
  std::map<std::string, double> cost_per_weight;
  // Where the first round's sensitivities and metrics are kept for later
  // jobs on the same model, data and candidates; empty: not kept.
  std::string cache_dir;
};

// `job` is the job as its spec resolved: quant_config holds only what
// applies to every round (exclude, algorithms, KV cache), evaluation the
// budget (a language model: max_perplexity_increase and / or
// max_kl_divergence; a TorchScript classifier: max_accuracy_drop). The
// outcome is the final job's, with report.auto_precision describing the search.
pipeline::JobOutcome RunAutoPrecisionJob(const pipeline::JobOptions& job,
                                         const AutoPrecisionOptions& search,
                                         pipeline::JobObserver& observer);

}  // namespace quantd::precision

#endif  // QUANTD_WORKER_PRECISION_AUTO_PRECISION_JOB_H_
