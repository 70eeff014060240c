// MinMax observers: running min / max per parameter slot (integer and FP8
// specs) and running block amax (MX specs); and the no-op observer of the
// float16 / bfloat16 casts.
#include <string>

#include "worker/quant/mx.h"
#include "worker/quant/observer_impl.h"

namespace quantd::quant::observer_impl {
namespace {

Status CheckBatch(const at::Tensor& x) {
  if (!x.defined()) return InvalidArgumentError("observed tensor is undefined");
  const at::ScalarType t = x.scalar_type();
  if (t != at::kFloat && t != at::kHalf && t != at::kBFloat16) {
    return InvalidArgumentError(std::string("observers take float32, float16 or bfloat16; got ") +
                                c10::toString(t));
  }
  return OkStatus();
}

// Combines running statistics: the new batch replaces them (dynamic specs,
// or nothing seen yet) or is folded in with `fold`; shapes must agree.
template <class Fold>
Status Accumulate(at::Tensor& state, const at::Tensor& batch, bool replace, const Fold& fold) {
  if (replace || !state.defined()) {
    state = batch;
    return OkStatus();
  }
  if (state.sizes() != batch.sizes()) {
    return InvalidArgumentError(
        "the parameter shape changed between batches: " + std::to_string(state.numel()) +
        " slots before, " + std::to_string(batch.numel()) + " now");
  }
  state = fold(state, batch);
  return OkStatus();
}

template <class Fn>
Status GuardTorch(const Fn& fn) {
  try {
    return fn();
  } catch (const c10::Error& e) {
    return InvalidArgumentError(std::string("observer: ") + e.what_without_backtrace());
  }
}

class MinMaxObserver final : public Observer {
 public:
  explicit MinMaxObserver(const QuantSpec& spec) : Observer(spec, at::kFloat) {}

  Status Observe(const at::Tensor& x) override {
    QD_RETURN_IF_ERROR(CheckBatch(x));
    return GuardTorch([&]() -> Status {
      std::pair<at::Tensor, at::Tensor> mm;
      if (x.device().is_cpu()) {
        QD_ASSIGN_OR_RETURN(mm, MinMaxFused(x.contiguous(), spec_));
      } else {
        QD_ASSIGN_OR_RETURN(mm, MinMaxComposed(x, spec_));
        mm = {mm.first.to(at::kCPU), mm.second.to(at::kCPU)};
      }
      const bool replace = spec_.is_dynamic;
      at::Tensor mn = min_;
      at::Tensor mx = max_;
      QD_RETURN_IF_ERROR(
          Accumulate(mn, mm.first, replace,
                     [](const at::Tensor& a, const at::Tensor& b) { return at::minimum(a, b); }));
      QD_RETURN_IF_ERROR(
          Accumulate(mx, mm.second, replace,
                     [](const at::Tensor& a, const at::Tensor& b) { return at::maximum(a, b); }));
      min_ = mn;
      max_ = mx;
      input_dtype_ = x.scalar_type();
      ++num_batches_;
      return OkStatus();
    });
  }

  Status Merge(const Observer& other_base) override {
    const auto* other = dynamic_cast<const MinMaxObserver*>(&other_base);
    if (other == nullptr || other->spec() != spec_) {
      return InvalidArgumentError("Merge needs an observer of the same spec and type");
    }
    if (!other->min_.defined()) return OkStatus();
    return GuardTorch([&]() -> Status {
      at::Tensor mn = min_;
      at::Tensor mx = max_;
      QD_RETURN_IF_ERROR(
          Accumulate(mn, other->min_, false,
                     [](const at::Tensor& a, const at::Tensor& b) { return at::minimum(a, b); }));
      QD_RETURN_IF_ERROR(
          Accumulate(mx, other->max_, false,
                     [](const at::Tensor& a, const at::Tensor& b) { return at::maximum(a, b); }));
      min_ = mn;
      max_ = mx;
      if (num_batches_ == 0) input_dtype_ = other->input_dtype_;
      num_batches_ += other->num_batches_;
      return OkStatus();
    });
  }

  StatusOr<QParams> ComputeQParams() const override {
    if (!min_.defined()) return FailedPreconditionError("the observer has seen no data");
    return QParamsFromMinMax(min_, max_, spec_, input_dtype_);
  }

  void Reset() override {
    min_ = at::Tensor();
    max_ = at::Tensor();
    num_batches_ = 0;
  }

 private:
  at::Tensor min_;
  at::Tensor max_;
};

class MxAmaxObserver final : public Observer {
 public:
  explicit MxAmaxObserver(const QuantSpec& spec) : Observer(spec, at::kFloat) {}

  Status Observe(const at::Tensor& x) override {
    QD_RETURN_IF_ERROR(CheckBatch(x));
    return GuardTorch([&]() -> Status {
      at::Tensor amax;
      if (x.device().is_cpu()) {
        QD_ASSIGN_OR_RETURN(amax, mx::BlockAmaxFused(x.contiguous(), spec_));
      } else {
        QD_ASSIGN_OR_RETURN(amax, mx::BlockAmaxComposed(x, spec_));
        amax = amax.to(at::kCPU);
      }
      at::Tensor state = amax_;
      QD_RETURN_IF_ERROR(
          Accumulate(state, amax, spec_.is_dynamic,
                     [](const at::Tensor& a, const at::Tensor& b) { return at::maximum(a, b); }));
      amax_ = state;
      input_dtype_ = x.scalar_type();
      ++num_batches_;
      return OkStatus();
    });
  }

  Status Merge(const Observer& other_base) override {
    const auto* other = dynamic_cast<const MxAmaxObserver*>(&other_base);
    if (other == nullptr || other->spec() != spec_) {
      return InvalidArgumentError("Merge needs an observer of the same spec and type");
    }
    if (!other->amax_.defined()) return OkStatus();
    return GuardTorch([&]() -> Status {
      at::Tensor state = amax_;
      QD_RETURN_IF_ERROR(
          Accumulate(state, other->amax_, false,
                     [](const at::Tensor& a, const at::Tensor& b) { return at::maximum(a, b); }));
      amax_ = state;
      num_batches_ += other->num_batches_;
      return OkStatus();
    });
  }

  StatusOr<QParams> ComputeQParams() const override {
    if (!amax_.defined()) return FailedPreconditionError("the observer has seen no data");
    QParams qp;
    qp.scale = mx::ScaleFromAmaxComposed(amax_, spec_);
    return qp;
  }

  void Reset() override {
    amax_ = at::Tensor();
    num_batches_ = 0;
  }

 private:
  at::Tensor amax_;
};

// Casts have no parameters; the observer only counts batches.
class CastObserver final : public Observer {
 public:
  explicit CastObserver(const QuantSpec& spec) : Observer(spec, at::kFloat) {}

  Status Observe(const at::Tensor& x) override {
    QD_RETURN_IF_ERROR(CheckBatch(x));
    ++num_batches_;
    return OkStatus();
  }
  Status Merge(const Observer& other) override {
    if (other.spec() != spec_) return InvalidArgumentError("Merge needs the same spec");
    num_batches_ += other.num_batches();
    return OkStatus();
  }
  StatusOr<QParams> ComputeQParams() const override { return QParams(); }
  void Reset() override { num_batches_ = 0; }
};

}  // namespace

std::unique_ptr<Observer> NewMinMaxObserver(const QuantSpec& spec) {
  return std::make_unique<MinMaxObserver>(spec);
}

std::unique_ptr<Observer> NewMxAmaxObserver(const QuantSpec& spec) {
  return std::make_unique<MxAmaxObserver>(spec);
}

std::unique_ptr<Observer> NewCastObserver(const QuantSpec& spec) {
  return std::make_unique<CastObserver>(spec);
}

}  // namespace quantd::quant::observer_impl
