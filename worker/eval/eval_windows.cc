#include "worker/eval/eval_windows.h"

#include <algorithm>

namespace quantd::eval {

std::string EvalWindows::Protocol() const {
  const std::string n = std::to_string(n_ctx);
  if (with_bos) {
    return "non-overlapping windows of [BOS] + " + std::to_string(n_ctx - 1) +
           " text tokens (n_ctx " + n + "); every text token scored; ppl = exp(mean NLL)";
  }
  return "non-overlapping windows of " + n +
         " text tokens (no BOS); all but the first token of each window scored; ppl = exp(mean "
         "NLL)";
}

StatusOr<EvalWindows> MakeEvalWindows(const std::vector<int32_t>& text_ids, int32_t bos_id,
                                      const WindowOptions& options) {
  if (options.n_ctx < 2) {
    return InvalidArgumentError("n_ctx must be at least 2, got " + std::to_string(options.n_ctx));
  }
  if (options.max_windows < 0) {
    return InvalidArgumentError("max_windows must be >= 0, got " +
                                std::to_string(options.max_windows));
  }
  EvalWindows w;
  w.n_ctx = options.n_ctx;
  w.with_bos = bos_id >= 0;
  const size_t per_window = static_cast<size_t>(w.with_bos ? options.n_ctx - 1 : options.n_ctx);
  const size_t min_text = w.with_bos ? 1 : 2;  // something must be scored
  for (size_t start = 0; start < text_ids.size(); start += per_window) {
    if (options.max_windows > 0 && static_cast<int64_t>(w.windows.size()) >= options.max_windows) {
      break;
    }
    const size_t end = std::min(text_ids.size(), start + per_window);
    if (end - start < min_text) break;
    std::vector<int32_t> win;
    win.reserve(end - start + 1);
    if (w.with_bos) win.push_back(bos_id);
    win.insert(win.end(), text_ids.begin() + start, text_ids.begin() + end);
    w.scored_tokens += static_cast<int64_t>(win.size()) - 1;
    w.windows.push_back(std::move(win));
  }
  if (w.windows.empty()) {
    return InvalidArgumentError("the evaluation text has " + std::to_string(text_ids.size()) +
                                " tokens, too few to score");
  }
  return w;
}

}  // namespace quantd::eval
