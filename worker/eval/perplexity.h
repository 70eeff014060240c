// Block-wise perplexity, and the divergence of a quantized model from its
// float original, measured in the same pass.
//
// All windows go through block i before block i+1 is loaded, so evaluation
// keeps one block resident plus the hidden states of the evaluation windows
// (windows x n_ctx x hidden_size floats, twice when comparing). Logits are
// produced a slice of tokens at a time and reduced immediately, so a large
// vocabulary never materialises for the whole text.
//
// Metrics, per scored token t with reference distribution P and candidate Q:
//   NLL = -log Q(t);  ppl = exp(sum NLL / tokens);
//   KL(P || Q) = sum_v P(v) (log P(v) - log Q(v));  reported as the mean over
//   tokens and a high percentile (numpy's linear interpolation);
//   top-1 agreement = fraction of tokens where argmax P == argmax Q.
#ifndef QUANTD_WORKER_EVAL_PERPLEXITY_H_
#define QUANTD_WORKER_EVAL_PERPLEXITY_H_

#include <cstdint>
#include <functional>
#include <string>

#include "worker/common/status.h"
#include "worker/eval/blockwise_model.h"
#include "worker/eval/eval_windows.h"

namespace quantd::eval {

struct EvalProgress {
  int64_t block = 0;  // blocks finished, 1..num_blocks
  int64_t num_blocks = 0;
};

struct EvalOptions {
  // Recorded in results, e.g. "wikitext2-test".
  std::string dataset;
  // Windows per block Forward call.
  int64_t batch_size = 8;
  // Logit elements (tokens x vocab) materialised at once in the head.
  int64_t max_logit_elements = int64_t{2} << 20;
  // Percentile of per-token KL reported beside the mean.
  double kl_percentile = 99.0;
  // Called after every block.
  std::function<void(const EvalProgress&)> on_progress;
  // Checked before every block and before every batch of windows in a
  // block, the embedding and the head; true stops with CANCELLED.
  std::function<bool()> cancelled;
};

struct PerplexityResult {
  std::string dataset;
  std::string protocol;  // EvalWindows::Protocol()
  int64_t n_ctx = 0;
  int64_t windows = 0;
  int64_t tokens = 0;  // scored tokens
  double nll_sum = 0;
  double ppl = 0;
};

struct ComparisonResult {
  PerplexityResult reference;
  PerplexityResult candidate;
  double kl_mean = 0;
  double kl_percentile = 99.0;  // which percentile kl_high is
  double kl_high = 0;
  double kl_max = 0;
  double top1_agreement = 0;
  int64_t tokens = 0;
};

// CANCELLED when options.cancelled() turns true; other errors are the
// loaders'.
StatusOr<PerplexityResult> EvaluatePerplexity(const BlockwiseModel& model,
                                              const EvalWindows& windows,
                                              const EvalOptions& options);

// Runs `reference` (float) and `candidate` (quantized) block by block over
// the same windows: block i of each, then block i+1.
StatusOr<ComparisonResult> CompareModels(const BlockwiseModel& reference,
                                         const BlockwiseModel& candidate,
                                         const EvalWindows& windows, const EvalOptions& options);

}  // namespace quantd::eval

#endif  // QUANTD_WORKER_EVAL_PERPLEXITY_H_
