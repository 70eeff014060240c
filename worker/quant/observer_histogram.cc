// Percentile and MSE observers (per tensor, integer and FP8 specs): two
// histograms, of the positive and of the negative values' magnitudes, over
// [0, 2^k) with a power-of-two bin count. When a larger value arrives the
// range doubles and neighbouring bins merge, so counts never depend on the
// order of the batches and Merge() adds exactly. Zeros and non-finite values
// are not counted (the reference's percentile observer skips zeros too).
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "worker/quant/float_bits.h"
#include "worker/quant/fp8.h"
#include "worker/quant/int_quant.h"
#include "worker/quant/observer_impl.h"

namespace quantd::quant::observer_impl {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Smallest k with 2^k >= a (a > 0, finite).
int CeilLog2(float a) {
  int e = 0;
  const float m = std::frexp(a, &e);
  return m == 0.5f ? e - 1 : e;
}

class HistogramObserver final : public Observer {
 public:
  HistogramObserver(const QuantSpec& spec, const ObserverOptions& options)
      : Observer(spec, at::kFloat),
        options_(options),
        bins_(options.num_bins),
        log2_bins_(CeilLog2(static_cast<float>(options.num_bins))) {
    Reset();
  }

  Status Observe(const at::Tensor& x_in) override {
    if (!x_in.defined()) return InvalidArgumentError("observed tensor is undefined");
    const at::ScalarType t = x_in.scalar_type();
    if (t != at::kFloat && t != at::kHalf && t != at::kBFloat16) {
      return InvalidArgumentError(std::string("observers take float32, float16 or bfloat16; got ") +
                                  c10::toString(t));
    }
    try {
      if (spec_.is_dynamic) Reset();
      const at::Tensor x = x_in.to(at::kCPU).to(at::kFloat).contiguous();
      std::vector<float> sample;
      const float* data = x.data_ptr<float>();
      int64_t n = x.numel();
      if (options_.max_samples_per_batch > 0 && n > options_.max_samples_per_batch) {
        // A reproducible sample: the stream depends on the seed and the
        // batch's position.
        std::mt19937_64 gen(options_.seed * 0x9E3779B97F4A7C15ull + num_batches_);
        std::uniform_int_distribution<int64_t> pick(0, n - 1);
        sample.resize(options_.max_samples_per_batch);
        for (float& v : sample) v = data[pick(gen)];
        data = sample.data();
        n = static_cast<int64_t>(sample.size());
      }
      AddValues(data, n);
      input_dtype_ = t;
      ++num_batches_;
      return OkStatus();
    } catch (const c10::Error& e) {
      return InvalidArgumentError(std::string("observer: ") + e.what_without_backtrace());
    }
  }

  Status Merge(const Observer& other_base) override {
    const auto* other = dynamic_cast<const HistogramObserver*>(&other_base);
    if (other == nullptr || other->spec() != spec_ || other->bins_ != bins_) {
      return InvalidArgumentError("Merge needs a histogram observer of the same spec and bins");
    }
    if (other->has_range_) {
      if (!has_range_) {
        log2_range_ = other->log2_range_;
        has_range_ = true;
      }
      GrowTo(std::max(log2_range_, other->log2_range_));
      std::vector<int64_t> pos = other->pos_;
      std::vector<int64_t> neg = other->neg_;
      for (int k = other->log2_range_; k < log2_range_; ++k) {
        HalveResolution(pos);
        HalveResolution(neg);
      }
      for (int i = 0; i < bins_; ++i) {
        pos_[i] += pos[i];
        neg_[i] += neg[i];
      }
    }
    min_ = std::min(min_, other->min_);
    max_ = std::max(max_, other->max_);
    if (num_batches_ == 0) input_dtype_ = other->input_dtype_;
    num_batches_ += other->num_batches_;
    return OkStatus();
  }

  StatusOr<QParams> ComputeQParams() const override {
    if (num_batches_ == 0) return FailedPreconditionError("the observer has seen no data");
    float lo = min_;
    float hi = max_;
    if (has_range_) {
      const float clip = spec_.observer == ObserverType::kPercentile ? PercentileClip() : MseClip();
      lo = std::max(min_, -clip);
      hi = std::min(max_, clip);
    }
    float scale = 1.0f;
    float zp = 0.0f;
    QParamsFromMinMaxArrays(&lo, &hi, 1, spec_, input_dtype_, &scale, &zp);
    const bool int_spec = IsIntType(spec_.dtype);
    const std::vector<float> zps = {zp};
    return MakeQParams(
        {}, {scale}, int_spec ? &zps : nullptr,
        int_spec && !spec_.symmetric && spec_.zero_point_type == ZeroPointType::kFloat32);
  }

  void Reset() override {
    pos_.assign(bins_, 0);
    neg_.assign(bins_, 0);
    has_range_ = false;
    log2_range_ = 0;
    min_ = kInf;
    max_ = -kInf;
    num_batches_ = 0;
  }

 private:
  float BinWidth() const { return std::ldexp(1.0f, log2_range_ - log2_bins_); }
  float ObservedAmax() const { return std::max(-std::min(min_, 0.0f), std::max(max_, 0.0f)); }

  static void HalveResolution(std::vector<int64_t>& h) {
    const size_t n = h.size();
    for (size_t i = 0; i < n / 2; ++i) h[i] = h[2 * i] + h[2 * i + 1];
    std::fill(h.begin() + n / 2, h.end(), 0);
  }

  void GrowTo(int log2_range) {
    while (log2_range_ < log2_range) {
      HalveResolution(pos_);
      HalveResolution(neg_);
      ++log2_range_;
    }
  }

  void AddValues(const float* data, int64_t n) {
    // Pass 1: range of the finite values.
    float mn = kInf;
    float mx = -kInf;
    for (int64_t i = 0; i < n; ++i) {
      const float v = data[i];
      if (!std::isfinite(v)) continue;
      mn = std::min(mn, v);
      mx = std::max(mx, v);
    }
    min_ = std::min(min_, mn);
    max_ = std::max(max_, mx);
    const float amax = std::max(-std::min(mn, 0.0f), std::max(mx, 0.0f));
    if (!(amax > 0.0f)) return;  // nothing to count
    const int needed = CeilLog2(amax);
    if (!has_range_) {
      log2_range_ = needed;
      has_range_ = true;
    }
    GrowTo(needed);
    // Pass 2: counts; per-task histograms added under a lock (integer sums
    // do not depend on the order).
    const float to_bin = std::ldexp(1.0f, log2_bins_ - log2_range_);  // exact power of two
    std::mutex mu;
    at::parallel_for(0, n, 1 << 16, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> pos(bins_, 0);
      std::vector<int64_t> neg(bins_, 0);
      for (int64_t i = begin; i < end; ++i) {
        const float v = data[i];
        if (!std::isfinite(v) || v == 0.0f) continue;
        const int bin = std::min(static_cast<int>(std::fabs(v) * to_bin), bins_ - 1);
        (v > 0 ? pos : neg)[bin] += 1;
      }
      std::lock_guard<std::mutex> lock(mu);
      for (int b = 0; b < bins_; ++b) {
        pos_[b] += pos[b];
        neg_[b] += neg[b];
      }
    });
  }

  // The upper edge of the bin where the cumulative count of |x| reaches the
  // percentile, at most the observed amax.
  float PercentileClip() const {
    int64_t total = 0;
    for (int b = 0; b < bins_; ++b) total += pos_[b] + neg_[b];
    const float amax = ObservedAmax();
    if (total == 0) return amax;
    const double target = EffectivePercentile(spec_) / 100.0 * static_cast<double>(total);
    int64_t cumulative = 0;
    for (int b = 0; b < bins_; ++b) {
      cumulative += pos_[b] + neg_[b];
      if (static_cast<double>(cumulative) >= target) {
        return std::min(static_cast<float>(b + 1) * BinWidth(), amax);
      }
    }
    return amax;
  }

  // The clipping bound, among the bin edges up to the observed amax, whose
  // fake quantization of the histogram (bin centres, both signs) has the
  // least squared error.
  float MseClip() const {
    const float width = BinWidth();
    const float amax = ObservedAmax();
    std::vector<int> used;
    for (int b = 0; b < bins_; ++b) {
      if (pos_[b] + neg_[b] > 0) used.push_back(b);
    }
    float best_clip = amax;
    double best_err = std::numeric_limits<double>::infinity();
    for (int i = 0; i < bins_; ++i) {
      const float clip = std::min(static_cast<float>(i + 1) * width, amax);
      const double err = ErrorWithClip(clip, used, width);
      if (err < best_err) {
        best_err = err;
        best_clip = clip;
      }
      if (clip >= amax) break;
    }
    return best_clip;
  }

  double ErrorWithClip(float clip, const std::vector<int>& used, float width) const {
    float lo = std::max(min_, -clip);
    float hi = std::min(max_, clip);
    float scale = 1.0f;
    float zp = 0.0f;
    QParamsFromMinMaxArrays(&lo, &hi, 1, spec_, input_dtype_, &scale, &zp);
    const bool is_int = IsIntType(spec_.dtype);
    double err = 0.0;
    for (int b : used) {
      const float c = (static_cast<float>(b) + 0.5f) * width;
      for (int sign : {1, -1}) {
        const int64_t count = sign > 0 ? pos_[b] : neg_[b];
        if (count == 0) continue;
        const float v = sign * c;
        const float q = is_int ? int_quant::FakeQuantScalar(v, scale, zp, spec_)
                               : fp8::FakeQuantScalar(v, scale, spec_);
        const double d = static_cast<double>(q) - v;
        err += d * d * static_cast<double>(count);
      }
    }
    return err;
  }

  ObserverOptions options_;
  int bins_;
  int log2_bins_;
  std::vector<int64_t> pos_;
  std::vector<int64_t> neg_;
  bool has_range_ = false;
  int log2_range_ = 0;  // the histograms cover [0, 2^log2_range_)
  float min_ = kInf;
  float max_ = -kInf;
};

}  // namespace

std::unique_ptr<Observer> NewHistogramObserver(const QuantSpec& spec,
                                               const ObserverOptions& options) {
  return std::make_unique<HistogramObserver>(spec, options);
}

}  // namespace quantd::quant::observer_impl
