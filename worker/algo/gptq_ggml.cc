#include "worker/algo/gptq_ggml.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <vector>

#include "worker/algo/gptq.h"
#include "worker/algo/gptq_loop.h"
#include "worker/common/cancellation.h"
#include "worker/io/gguf/ggml_block_grid.h"

namespace quantd::algo {
namespace {

using gguf::GgmlType;

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The code whose value is nearest x on a granule's grid (the lowest integer
// when the granule's scale is zero, where every code decodes alike).
inline int NearestCode(float x, float step, float base, const gguf::GgmlCodeRange& r) {
  const float lo = static_cast<float>(r.offset);
  const float hi = static_cast<float>(r.levels - 1 + r.offset);
  if (step == 0.0f) return std::clamp(-r.offset, 0, r.levels - 1);
  float c = std::nearbyint((x - base) / step);
  if (!(c >= lo)) c = lo;  // NaN too
  if (c > hi) c = hi;
  return static_cast<int>(c) - r.offset;
}

class GgmlGptqRun {
 public:
  GgmlGptqRun(GgmlType type, const config::GptqOptions& opt, int64_t rows, int64_t cols)
      : type_(type),
        opt_(opt),
        range_(*gguf::GgmlGridCodes(type)),
        qk_(gguf::GetGgmlTypeTraits(type).block_size),
        block_bytes_(gguf::GetGgmlTypeTraits(type).type_size),
        rows_(rows),
        cols_(cols),
        granules_(cols / gguf::kGridGranule),
        row_bytes_(cols / qk_ * block_bytes_) {}

  StatusOr<GgmlGptqResult> Run(const at::Tensor& weight, const at::Tensor& hessian) {
    GgmlGptqResult result;
    at::Tensor w = weight.to(at::kCPU, at::kFloat).contiguous().clone();
    at::Tensor h = hessian.to(at::kCPU, at::kFloat).contiguous().clone();
    // The fit's importance: diag(H), proportional to each input column's
    // mean squared activation (llama.cpp's imatrix weights).
    importance_ = h.diagonal().contiguous().clone();
    at::Tensor dead = h.diagonal() == 0;
    if (dead.any().item<bool>()) {
      h.diagonal().masked_fill_(dead, 1.0);
      w.index_put_({at::indexing::Slice(), dead}, 0.0);
    }
    blocks_ = at::empty({rows_, static_cast<int64_t>(row_bytes_)}, at::kByte);
    step_.assign(rows_ * granules_, 0.0f);
    base_.assign(rows_ * granules_, 0.0f);
    codes_.assign(rows_ * cols_, 0);

    if (opt_.static_groups) QD_RETURN_IF_ERROR(FitAll(w));
    perm_.resize(cols_);
    for (int64_t c = 0; c < cols_; ++c) perm_[c] = c;
    if (opt_.act_order) {
      const at::Tensor p = at::argsort(h.diagonal(), /*dim=*/0, /*descending=*/true);
      w = w.index_select(1, p);
      h = h.index_select(0, p).index_select(1, p);
      const at::Tensor ph = p.to(at::kLong).contiguous();
      std::copy(ph.data_ptr<int64_t>(), ph.data_ptr<int64_t>() + cols_, perm_.begin());
    }

    auto start = std::chrono::steady_clock::now();
    DampedInverse factored = FactorDampedHessian(h, opt_);
    result.factor_seconds = SecondsSince(start);
    result.damp_percent = factored.damp_percent;
    result.damp_retries = factored.damp_retries;
    if (!factored.hinv.defined()) {
      // ggml's own quantization of the weights as given; a non-finite
      // diag H (one way the factorisation fails) is no importance at all.
      at::Tensor original = weight.to(at::kCPU, at::kFloat).contiguous();
      const bool finite = at::isfinite(importance_).all().item<bool>();
      QD_RETURN_IF_ERROR(gguf::QuantizeRows(type_, original.data_ptr<float>(),
                                            blocks_.data_ptr<uint8_t>(), rows_, cols_,
                                            finite ? importance_.data_ptr<float>() : nullptr));
      result.rtn_fallback = true;
      result.fallback_reason = factored.failure;
      result.blocks = blocks_;
      QD_ASSIGN_OR_RETURN(result.weight, Decode());
      return result;
    }
    const at::Tensor& hinv = factored.hinv;

    start = std::chrono::steady_clock::now();
    at::Tensor wt = w.t().contiguous();  // column p is row p
    std::vector<double> row_loss(rows_, 0.0);
    QD_RETURN_IF_ERROR(Loop(wt, hinv, row_loss));
    for (double l : row_loss) result.loss += l;
    uint8_t* b = blocks_.data_ptr<uint8_t>();
    for (int64_t r = 0; r < rows_; ++r)
      for (int64_t k = 0; k < cols_ / qk_; ++k)
        gguf::GgmlSetBlockCodes(type_, codes_.data() + r * cols_ + k * qk_,
                                b + r * row_bytes_ + k * block_bytes_);
    result.loop_seconds = SecondsSince(start);
    result.blocks = blocks_;
    QD_ASSIGN_OR_RETURN(result.weight, Decode());
    return result;
  }

 private:
  // Fits the block that starts at column c of row r on `x` (its qk_ values
  // as updated so far) and records the block's grid.
  Status FitBlock(int64_t r, int64_t c, const float* x) {
    uint8_t* blk = blocks_.data_ptr<uint8_t>() + r * row_bytes_ + (c / qk_) * block_bytes_;
    QD_RETURN_IF_ERROR(
        gguf::QuantizeRows(type_, x, blk, 1, qk_, importance_.data_ptr<float>() + c));
    const int64_t g = r * granules_ + c / gguf::kGridGranule;
    gguf::GgmlBlockGrid(type_, blk, step_.data() + g, base_.data() + g);
    return OkStatus();
  }

  // static_groups: every block on the original (dead-zeroed) weights.
  Status FitAll(const at::Tensor& w) {
    std::atomic<bool> failed{false};
    const float* src = w.data_ptr<float>();
    at::parallel_for(0, rows_, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = 0; c < cols_; c += qk_)
          if (!FitBlock(r, c, src + r * cols_ + c).ok()) failed = true;
    });
    return failed ? InternalError("GPTQ: fitting ggml blocks failed") : OkStatus();
  }

  // The column loop: rows are independent within a block of columns, so
  // each thread runs the whole block on its own rows (gptq.cc's
  // IntegerBlock), then the lazy update of the later columns.
  Status Loop(at::Tensor& wt, const at::Tensor& hinv, std::vector<double>& row_loss) {
    const int64_t rows = rows_, cols = cols_;
    const int64_t bs = std::max<int64_t>(1, opt_.block_size);
    at::Tensor err = at::empty({std::min(bs, cols), rows}, at::kFloat);
    // The block's rounded values, [block column, rows].
    std::vector<float> q(std::min(bs, cols) * rows);
    const float* hi = hinv.data_ptr<float>();
    float* w = wt.data_ptr<float>();
    float* e = err.data_ptr<float>();
    std::atomic<bool> failed{false};
    for (int64_t i1 = 0; i1 < cols; i1 += bs) {
      if (StopRequested())
        return CancelledStatus("running GPTQ at column " + std::to_string(i1) + " of " +
                               std::to_string(cols));
      const int64_t i2 = std::min(i1 + bs, cols);
      at::parallel_for(0, rows, 64, [&](int64_t r0, int64_t r1) {
        std::vector<float> x(qk_);
        for (int64_t p = i1; p < i2; ++p) {
          const int64_t col = perm_[p];
          if (!opt_.static_groups && col % qk_ == 0) {
            for (int64_t r = r0; r < r1; ++r) {
              for (int64_t j = 0; j < qk_; ++j) x[j] = w[(p + j) * rows + r];
              if (!FitBlock(r, col, x.data()).ok()) failed = true;
            }
          }
          const float* wp = w + p * rows;
          float* qp = q.data() + (p - i1) * rows;
          const int64_t gcol = col / gguf::kGridGranule;
          for (int64_t r = r0; r < r1; ++r) {
            const float s = step_[r * granules_ + gcol];
            const float z = base_[r * granules_ + gcol];
            const int code = NearestCode(wp[r], s, z, range_);
            codes_[r * cols + col] = static_cast<uint8_t>(code);
            qp[r] = gguf::GgmlGridValue(s, z, code, range_.offset);
          }
          gptq_loop::SpreadColumnError(w, qp, e + (p - i1) * rows, hi, p, i2, rows, cols, r0, r1,
                                       row_loss);
        }
      });
      if (failed) return InternalError("GPTQ: fitting ggml blocks failed");
      gptq_loop::LazyUpdate(wt, hinv, err, i1, i2, cols);
    }
    return OkStatus();
  }

  StatusOr<at::Tensor> Decode() const {
    at::Tensor out = at::empty({rows_, cols_}, at::kFloat);
    QD_RETURN_IF_ERROR(gguf::DequantizeRow(type_, blocks_.data_ptr<uint8_t>(),
                                           out.data_ptr<float>(), rows_ * cols_));
    return out;
  }

  const GgmlType type_;
  const config::GptqOptions& opt_;
  const gguf::GgmlCodeRange range_;
  const int64_t qk_;
  const size_t block_bytes_;
  const int64_t rows_, cols_, granules_;
  const size_t row_bytes_;
  at::Tensor importance_;
  at::Tensor blocks_;
  std::vector<float> step_, base_;  // [rows, granules]: each granule's grid
  std::vector<uint8_t> codes_;      // [rows, cols], original column order
  std::vector<int64_t> perm_;       // loop position -> column
};

}  // namespace

Status CheckGgmlGptq(GgmlType type, int64_t cols, const config::GptqOptions& options) {
  const char* name = gguf::GetGgmlTypeTraits(type).name;
  if (!gguf::GgmlGridCodes(type))
    return InvalidArgumentError(std::string("GPTQ has no grid for GGUF type ") + name);
  const int64_t qk = gguf::GetGgmlTypeTraits(type).block_size;
  if (cols % qk != 0)
    return InvalidArgumentError("GPTQ with GGUF " + std::string(name) + ": rows of " +
                                std::to_string(cols) + " are not whole blocks of " +
                                std::to_string(qk));
  if (options.act_order && !options.static_groups)
    return InvalidArgumentError(
        std::string("GPTQ with a GGUF recipe fits each block's scales on consecutive columns "
                    "when the loop reaches it; act_order needs static_groups (every block fit "
                    "before the loop) there"));
  if (options.block_size < 1) return InvalidArgumentError("GPTQ block_size must be positive");
  if (!(options.damp_percent >= 0) || !(options.damp_retry_step >= 0))
    return InvalidArgumentError("GPTQ damping must be non-negative");
  return OkStatus();
}

StatusOr<GgmlGptqResult> GptqQuantizeGgml(const at::Tensor& weight, const at::Tensor& hessian,
                                          GgmlType type, const config::GptqOptions& options) {
  if (!weight.defined() || weight.dim() != 2)
    return InvalidArgumentError("GPTQ needs a 2-D [out, in] weight");
  const int64_t rows = weight.size(0), cols = weight.size(1);
  if (!hessian.defined() || hessian.dim() != 2 || hessian.size(0) != cols ||
      hessian.size(1) != cols)
    return InvalidArgumentError("GPTQ Hessian must be [" + std::to_string(cols) + ", " +
                                std::to_string(cols) + "] for a weight with " +
                                std::to_string(cols) + " input columns");
  QD_RETURN_IF_ERROR(CheckGgmlGptq(type, cols, options));
  try {
    GgmlGptqRun run(type, options, rows, cols);
    return run.Run(weight, hessian);
  } catch (const c10::Error& e) {
    return InternalError(std::string("GPTQ: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return InternalError(std::string("GPTQ: ") + e.what());
  }
}

}  // namespace quantd::algo
