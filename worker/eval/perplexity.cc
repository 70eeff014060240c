#include "worker/eval/perplexity.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace quantd::eval {
namespace {

// Consecutive windows of equal length, at most batch_size per batch, as
// [b, T] int64 id tensors.
std::vector<at::Tensor> MakeBatches(const EvalWindows& w, int64_t batch_size) {
  std::vector<at::Tensor> batches;
  size_t i = 0;
  while (i < w.windows.size()) {
    const size_t len = w.windows[i].size();
    size_t j = i;
    while (j < w.windows.size() && w.windows[j].size() == len &&
           static_cast<int64_t>(j - i) < std::max<int64_t>(1, batch_size)) {
      ++j;
    }
    at::Tensor ids = at::empty({static_cast<int64_t>(j - i), static_cast<int64_t>(len)}, at::kLong);
    auto a = ids.accessor<int64_t, 2>();
    for (size_t r = i; r < j; ++r) {
      for (size_t c = 0; c < len; ++c) a[r - i][c] = w.windows[r][c];
    }
    batches.push_back(ids);
    i = j;
  }
  return batches;
}

// One model's hidden states for every batch, advanced block by block.
struct Stream {
  const BlockwiseModel* model;
  std::vector<at::Tensor> hidden;
};

bool Stop(const EvalOptions& options) { return options.cancelled && options.cancelled(); }

// Where the evaluation stopped: batch `batch` (0-based) of `batches`.
Status StoppedAt(const std::string& what, size_t batch, size_t batches) {
  return CancelledError("evaluation cancelled " + what + ", before batch " +
                        std::to_string(batch + 1) + " of " + std::to_string(batches));
}

Status EmbedAll(Stream& s, const std::vector<at::Tensor>& batches, const EvalOptions& options) {
  if (!s.model->embed || !s.model->load_block || !s.model->load_head) {
    return InvalidArgumentError("BlockwiseModel is missing a loader");
  }
  for (const auto& ids : batches) {
    if (Stop(options)) return StoppedAt("in the embedding", s.hidden.size(), batches.size());
    QD_ASSIGN_OR_RETURN(at::Tensor h, s.model->embed(ids));
    s.hidden.push_back(std::move(h));
  }
  return OkStatus();
}

// One block over every batch; the cancel check runs before each batch, as a
// large model's block over hundreds of windows takes minutes.
Status RunBlock(Stream& s, int64_t index, const EvalOptions& options) {
  QD_ASSIGN_OR_RETURN(auto block, s.model->load_block(index));
  for (size_t b = 0; b < s.hidden.size(); ++b) {
    if (Stop(options)) {
      return StoppedAt("in block " + std::to_string(index + 1), b, s.hidden.size());
    }
    QD_ASSIGN_OR_RETURN(s.hidden[b], block->Forward(s.hidden[b]));
  }
  return OkStatus();  // the block's weights are freed here
}

Status RunBlocks(std::vector<Stream*> streams, const EvalOptions& options) {
  const int64_t n = streams[0]->model->num_blocks;
  for (const Stream* s : streams) {
    if (s->model->num_blocks != n) {
      return InvalidArgumentError("compared models have " + std::to_string(n) + " and " +
                                  std::to_string(s->model->num_blocks) + " blocks");
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    if (Stop(options)) {
      return CancelledError("evaluation cancelled before block " + std::to_string(i + 1) + " of " +
                            std::to_string(n));
    }
    for (Stream* s : streams) QD_RETURN_IF_ERROR(RunBlock(*s, i, options));
    if (options.on_progress) options.on_progress({i + 1, n});
  }
  return OkStatus();
}

// Log-probabilities (float64) of every scored position of a batch slice:
// rows of hidden [b, T, D] at positions 0..T-2, flattened.
StatusOr<at::Tensor> LogProbs(const models::HeadStage& head, const at::Tensor& rows) {
  QD_ASSIGN_OR_RETURN(at::Tensor logits, head.Forward(rows));
  return at::log_softmax(logits.to(at::kDouble), -1);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  const double pos = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = static_cast<size_t>(std::ceil(pos));
  std::nth_element(v.begin(), v.begin() + lo, v.end());
  const double a = v[lo];
  std::nth_element(v.begin(), v.begin() + hi, v.end());
  const double b = v[hi];
  return a + (b - a) * (pos - static_cast<double>(lo));
}

struct Reduction {
  double nll_ref = 0;
  double nll_cand = 0;
  int64_t tokens = 0;
  int64_t top1_agree = 0;
  std::vector<double> kl;
};

// Walks every scored token through the head(s) in slices of at most
// max_logit_elements logits. `cand` may be null (perplexity only).
Status Reduce(const Stream& ref, const Stream* cand, const std::vector<at::Tensor>& batches,
              const EvalOptions& options, Reduction& out) {
  QD_ASSIGN_OR_RETURN(auto head_ref, ref.model->load_head());
  std::unique_ptr<models::HeadStage> head_cand;
  if (cand != nullptr) {
    QD_ASSIGN_OR_RETURN(head_cand, cand->model->load_head());
  }
  const int64_t vocab = head_ref->lm_head().out_features();
  const int64_t rows_per_slice = std::max<int64_t>(1, options.max_logit_elements / vocab);
  try {
    for (size_t b = 0; b < batches.size(); ++b) {
      if (Stop(options)) return StoppedAt("in the head", b, batches.size());
      const int64_t t = batches[b].size(1);
      const at::Tensor targets =
          batches[b].narrow(1, 1, t - 1).reshape({-1}).to(ref.hidden[b].device());
      const at::Tensor h_ref =
          ref.hidden[b].narrow(1, 0, t - 1).reshape({-1, ref.hidden[b].size(2)});
      at::Tensor h_cand;
      if (cand != nullptr) {
        h_cand = cand->hidden[b].narrow(1, 0, t - 1).reshape({-1, cand->hidden[b].size(2)});
      }
      const int64_t n = targets.size(0);
      for (int64_t r = 0; r < n; r += rows_per_slice) {
        const int64_t len = std::min(rows_per_slice, n - r);
        const at::Tensor tgt = targets.narrow(0, r, len).unsqueeze(1);
        QD_ASSIGN_OR_RETURN(at::Tensor lp_ref, LogProbs(*head_ref, h_ref.narrow(0, r, len)));
        out.nll_ref -= lp_ref.gather(1, tgt).sum().item<double>();
        out.tokens += len;
        if (cand == nullptr) continue;
        QD_ASSIGN_OR_RETURN(at::Tensor lp_cand, LogProbs(*head_cand, h_cand.narrow(0, r, len)));
        out.nll_cand -= lp_cand.gather(1, tgt).sum().item<double>();
        const at::Tensor kl = (lp_ref.exp() * (lp_ref - lp_cand)).sum(-1).cpu().contiguous();
        const double* k = kl.data_ptr<double>();
        out.kl.insert(out.kl.end(), k, k + len);
        out.top1_agree += (lp_ref.argmax(-1) == lp_cand.argmax(-1)).sum().item<int64_t>();
      }
    }
  } catch (const c10::Error& e) {
    return InternalError(std::string("evaluation head: ") + e.what_without_backtrace());
  }
  return OkStatus();
}

PerplexityResult MakeResult(const EvalWindows& w, const EvalOptions& o, double nll,
                            int64_t tokens) {
  PerplexityResult r;
  r.dataset = o.dataset;
  r.protocol = w.Protocol();
  r.n_ctx = w.n_ctx;
  r.windows = static_cast<int64_t>(w.windows.size());
  r.tokens = tokens;
  r.nll_sum = nll;
  r.ppl = tokens > 0 ? std::exp(nll / static_cast<double>(tokens)) : 0;
  return r;
}

}  // namespace

StatusOr<PerplexityResult> EvaluatePerplexity(const BlockwiseModel& model,
                                              const EvalWindows& windows,
                                              const EvalOptions& options) {
  const std::vector<at::Tensor> batches = MakeBatches(windows, options.batch_size);
  Stream s{&model, {}};
  QD_RETURN_IF_ERROR(EmbedAll(s, batches, options));
  QD_RETURN_IF_ERROR(RunBlocks({&s}, options));
  Reduction red;
  QD_RETURN_IF_ERROR(Reduce(s, nullptr, batches, options, red));
  return MakeResult(windows, options, red.nll_ref, red.tokens);
}

StatusOr<ComparisonResult> CompareModels(const BlockwiseModel& reference,
                                         const BlockwiseModel& candidate,
                                         const EvalWindows& windows, const EvalOptions& options) {
  const std::vector<at::Tensor> batches = MakeBatches(windows, options.batch_size);
  Stream ref{&reference, {}};
  Stream cand{&candidate, {}};
  QD_RETURN_IF_ERROR(EmbedAll(ref, batches, options));
  QD_RETURN_IF_ERROR(EmbedAll(cand, batches, options));
  QD_RETURN_IF_ERROR(RunBlocks({&ref, &cand}, options));
  Reduction red;
  QD_RETURN_IF_ERROR(Reduce(ref, &cand, batches, options, red));
  ComparisonResult c;
  c.reference = MakeResult(windows, options, red.nll_ref, red.tokens);
  c.candidate = MakeResult(windows, options, red.nll_cand, red.tokens);
  c.tokens = red.tokens;
  double sum = 0;
  for (double k : red.kl) sum += k;
  c.kl_mean = red.kl.empty() ? 0 : sum / static_cast<double>(red.kl.size());
  c.kl_max = red.kl.empty() ? 0 : *std::max_element(red.kl.begin(), red.kl.end());
  c.kl_percentile = options.kl_percentile;
  c.kl_high = Percentile(std::move(red.kl), options.kl_percentile);
  c.top1_agreement =
      red.tokens > 0 ? static_cast<double>(red.top1_agree) / static_cast<double>(red.tokens) : 0;
  return c;
}

}  // namespace quantd::eval
