// Perplexity windows: how a tokenized text is cut for evaluation.
//
// The protocol (docs/worker.md, "What a job does"): the text is tokenized once; it is cut into
// non-overlapping windows of [BOS] + (n_ctx - 1) text tokens (the last one
// may be shorter); every text token is scored, the first one of each window
// from BOS alone. Without a BOS token, windows hold n_ctx text tokens and the
// first token of each window is not scored. Torch-free.
#ifndef QUANTD_WORKER_EVAL_EVAL_WINDOWS_H_
#define QUANTD_WORKER_EVAL_EVAL_WINDOWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "worker/common/status.h"

namespace quantd::eval {

struct WindowOptions {
  int64_t n_ctx = 512;
  // 0: every window of the text.
  int64_t max_windows = 0;
};

struct EvalWindows {
  // Token ids of each window, BOS included; all but possibly the last have
  // n_ctx ids.
  std::vector<std::vector<int32_t>> windows;
  int64_t n_ctx = 0;
  bool with_bos = false;
  // Tokens whose probability is scored: len(window) - 1 summed.
  int64_t scored_tokens = 0;

  // One line naming the protocol, recorded with every result.
  std::string Protocol() const;
};

// `bos_id` < 0: the model has no BOS (see above). INVALID_ARGUMENT when
// n_ctx < 2 or the text yields nothing to score.
StatusOr<EvalWindows> MakeEvalWindows(const std::vector<int32_t>& text_ids, int32_t bos_id,
                                      const WindowOptions& options);

}  // namespace quantd::eval

#endif  // QUANTD_WORKER_EVAL_EVAL_WINDOWS_H_
