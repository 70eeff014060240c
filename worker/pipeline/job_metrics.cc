#include "worker/pipeline/job_metrics.h"

#include <cstdio>

#include "worker/common/squared_error.h"

namespace quantd::pipeline {

double OutputRelMse(const at::Tensor& quantized, const at::Tensor& reference) {
  const SquaredError se = SumSquaredError(quantized, reference);
  return se.reference > 0 ? se.error / se.reference : 0;
}

Status AccuracyGate(const EvaluationOptions& limits, const JobReport& report) {
  const auto& e = limits;
  std::string why;
  if (e.max_perplexity_increase && report.float_perplexity && report.quantized_perplexity) {
    const double increase = report.quantized_perplexity->ppl / report.float_perplexity->ppl - 1;
    if (increase > *e.max_perplexity_increase) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "perplexity rose %.2f%% (%.4f -> %.4f), limit %.2f%%",
                    100 * increase, report.float_perplexity->ppl, report.quantized_perplexity->ppl,
                    100 * *e.max_perplexity_increase);
      why = buf;
    }
  }
  if (e.max_kl_divergence && report.kl_mean && *report.kl_mean > *e.max_kl_divergence) {
    char buf[120];
    std::snprintf(buf, sizeof(buf), "mean KL divergence %.5f exceeds the limit %.5f",
                  *report.kl_mean, *e.max_kl_divergence);
    why += (why.empty() ? "" : "; ") + std::string(buf);
  }
  const auto& t = report.tensor_evaluation;
  if (e.max_accuracy_drop && t && t->float_top1_accuracy && t->quantized_top1_accuracy) {
    const double drop = *t->float_top1_accuracy - *t->quantized_top1_accuracy;
    if (drop > *e.max_accuracy_drop) {
      char buf[160];
      std::snprintf(buf, sizeof(buf),
                    "top-1 accuracy fell %.2f points (%.2f%% -> %.2f%%), limit %.2f points",
                    100 * drop, 100 * *t->float_top1_accuracy, 100 * *t->quantized_top1_accuracy,
                    100 * *e.max_accuracy_drop);
      why += (why.empty() ? "" : "; ") + std::string(buf);
    }
  }
  if (why.empty()) return OkStatus();
  return Status(StatusCode::kFailedPrecondition, "accuracy gate: " + why, "ACCURACY_GATE");
}

std::string FrozenSizeLine(const FreezeReport& r) {
  char buf[200];
  std::snprintf(buf, sizeof(buf), "%.1f KiB as float, %.1f KiB real-quantized (%.3fx)",
                r.float_bytes / 1024.0, r.packed_bytes / 1024.0,
                static_cast<double>(r.packed_bytes) / r.float_bytes);
  std::string line = buf;
  if (r.frozen_bytes != r.packed_bytes) {
    std::snprintf(buf, sizeof(buf), ", held in memory as %.1f KiB", r.frozen_bytes / 1024.0);
    line += buf;
  }
  return line;
}

}  // namespace quantd::pipeline
