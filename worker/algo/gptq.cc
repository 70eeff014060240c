#include "worker/algo/gptq.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>

#include "worker/algo/gptq_loop.h"
#include "worker/common/cancellation.h"
#include "worker/pipeline/stage_times.h"
#include "worker/quant/fake_quant.h"
#include "worker/quant/int_quant.h"

#if defined(QUANTD_CUDA_KERNELS)
#include "worker/algo/cuda/gptq_kernels.h"
#endif

namespace quantd::algo {

namespace {

enum class Granularity { kTensor, kChannel, kGroup };

struct WeightLayout {
  Granularity granularity = Granularity::kTensor;
  int64_t group_size = 0;  // kGroup: columns per group
  int64_t num_groups = 1;  // parameter columns: 1 unless kGroup
  bool integer = false;    // the per-row scalar fast path
};

StatusOr<WeightLayout> LayoutFor(const quant::QuantSpec& spec, int64_t rows, int64_t cols) {
  if (quant::IsCastType(spec.dtype)) {
    return UnimplementedError("GPTQ needs an integer, FP8 or MX weight spec; " +
                              quant::DescribeSpec(spec) + " is a plain cast");
  }
  if (spec.is_dynamic) {
    return UnimplementedError("GPTQ does not support dynamic weight quantization (" +
                              quant::DescribeSpec(spec) + ")");
  }
  QD_RETURN_IF_ERROR(quant::KernelShapeFor({rows, cols}, spec).status());
  WeightLayout l;
  l.integer = quant::IsIntType(spec.dtype);
  const int axis = quant::EffectiveChAxis(spec);
  if (quant::IsMxType(spec.dtype) || spec.qscheme == quant::QScheme::kPerGroup) {
    if (axis != 1 && axis != -1) {
      return InvalidArgumentError(
          "GPTQ quantizes weight groups along the input axis (ch_axis -1); got ch_axis " +
          std::to_string(axis));
    }
    l.granularity = Granularity::kGroup;
    int64_t g = quant::EffectiveGroupSize(spec);
    if (g <= 0) g = cols;  // -1: the whole row is one group
    l.group_size = g;
    l.num_groups = (cols + g - 1) / g;
    return l;
  }
  if (spec.qscheme == quant::QScheme::kPerChannel) {
    if (axis != 0 && axis != -2) {
      return InvalidArgumentError(
          "GPTQ quantizes per_channel weights along the output axis (ch_axis 0); got ch_axis " +
          std::to_string(axis));
    }
    l.granularity = Granularity::kChannel;
    return l;
  }
  l.granularity = Granularity::kTensor;
  return l;
}

// Hinv = cholesky(cholesky_inverse(cholesky(H + damp I)), upper), false when
// a factorisation fails or yields a non-finite value.
bool InverseCholesky(const at::Tensor& h, double damp, at::Tensor* hinv) {
  at::Tensor hd = h.clone();
  hd.diagonal().add_(damp);
  auto [l, info] = at::linalg_cholesky_ex(hd);
  if (info.item<int64_t>() != 0 || !at::isfinite(l).all().item<bool>()) return false;
  at::Tensor inv = at::cholesky_inverse(l);
  auto [u, info2] = at::linalg_cholesky_ex(inv, /*upper=*/true);
  if (info2.item<int64_t>() != 0 || !at::isfinite(u).all().item<bool>()) return false;
  *hinv = u.contiguous();
  return true;
}

// Per-row parameters of every group as float arrays: scale[r * G + g].
struct ParamTable {
  int64_t rows = 0;
  int64_t groups = 1;
  std::vector<float> scale;
  std::vector<float> zero_point;  // empty when the spec has none
};

// Fills the table from QParams shaped as the spec's (0-dim, [rows] or
// [rows, G]).
ParamTable TableFrom(const quant::QParams& qp, int64_t rows, int64_t groups) {
  ParamTable t;
  t.rows = rows;
  t.groups = groups;
  at::Tensor sf = qp.scale.to(at::kCPU, at::kFloat).contiguous();
  at::Tensor full = sf.dim() == 0 ? sf.expand({rows, groups}) : sf.reshape({rows, groups});
  full = full.contiguous();
  t.scale.assign(full.data_ptr<float>(), full.data_ptr<float>() + rows * groups);
  if (qp.zero_point.defined()) {
    at::Tensor z = qp.zero_point.to(at::kCPU, at::kFloat).contiguous();
    at::Tensor zf = z.dim() == 0 ? z.expand({rows, groups}) : z.reshape({rows, groups});
    zf = zf.contiguous();
    t.zero_point.assign(zf.data_ptr<float>(), zf.data_ptr<float>() + rows * groups);
  }
  return t;
}

// The elements of `t` (any device, v.size() of them) into `v`.
template <typename T>
void CopyToHost(const at::Tensor& t, std::vector<T>& v) {
  const at::Tensor host = t.cpu().contiguous();
  std::copy(host.data_ptr<T>(), host.data_ptr<T>() + v.size(), v.begin());
}

// GPTQ proper, on float32 tensors, with exceptions allowed (the public
// function catches them).
class GptqRun {
 public:
  // `device`: where the Hessian was accumulated, and where the whole job
  // runs (weight, factorisations, column loop). Integer specs take the
  // row-parallel scalar loop on the CPU (HostLoop) and the fused kernel on a
  // CUDA device when the build has it (FusedLoop: one kernel per block of
  // columns); FP8, MX and the rest round and propagate each column with
  // tensor ops (TensorLoop: a dozen small kernels per column).
  // `tensor_ops` forces TensorLoop: each of the other loops gives its bits
  // on the same device, and the tests hold them together.
  GptqRun(const quant::QuantSpec& spec, const GptqOptions& opt, const WeightLayout& layout,
          const at::Device& device, bool tensor_ops)
      : spec_(spec), opt_(opt), layout_(layout), device_(device), loop_(ChooseLoop(tensor_ops)) {}

  StatusOr<GptqResult> Run(const at::Tensor& weight, const at::Tensor& hessian) {
    const int64_t rows = weight.size(0), cols = weight.size(1);
    rows_ = rows;
    cols_ = cols;
    at::Tensor w = weight.to(at::kFloat).contiguous().clone();
    at::Tensor h = hessian.to(at::kFloat).contiguous().clone();

    // Dead columns: inputs that were always zero carry no information.
    at::Tensor dead = h.diagonal() == 0;
    if (dead.any().item<bool>()) {
      h.diagonal().masked_fill_(dead, 1.0);
      w.index_put_({at::indexing::Slice(), dead}, 0.0);
    }

    // Parameters fit before the loop: per tensor / per channel on the whole
    // weight, static groups on the original columns.
    const bool fit_in_loop = layout_.granularity == Granularity::kGroup && !opt_.static_groups;
    QD_ASSIGN_OR_RETURN(quant::QParams initial, quant::ComputeQParams(w, spec_));
    template_ = initial;
    // With groups fit in the loop, the table is overwritten group by group.
    table_ = TableFrom(initial, rows, layout_.num_groups);

    if (opt_.act_order) {
      perm_ = at::argsort(h.diagonal(), /*dim=*/0, /*descending=*/true);
      w = w.index_select(1, perm_);
      h = h.index_select(0, perm_).index_select(1, perm_);
    }
    perm_host_.resize(cols);
    if (perm_.defined()) {
      at::Tensor p = perm_.to(at::kCPU, at::kLong).contiguous();
      std::copy(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + cols, perm_host_.begin());
    } else {
      for (int64_t c = 0; c < cols; ++c) perm_host_[c] = c;
    }

    GptqResult result;
    auto clock = std::chrono::steady_clock::now();
    const auto lap = [&clock, this] {
      pipeline::WaitForDevice(device_);
      const auto now = std::chrono::steady_clock::now();
      const double s = std::chrono::duration<double>(now - clock).count();
      clock = now;
      return s;
    };
    DampedInverse factored = FactorDampedHessian(h, opt_);
    result.factor_seconds = lap();
    result.damp_percent = factored.damp_percent;
    result.damp_retries = factored.damp_retries;
    if (!factored.hinv.defined()) {
      QD_ASSIGN_OR_RETURN(quant::QParams qp, quant::ComputeQParams(weight.to(at::kFloat), spec_));
      QD_ASSIGN_OR_RETURN(at::Tensor q, quant::FakeQuantize(weight.to(at::kFloat), spec_, qp));
      result.weight = q.to(weight.scalar_type());
      result.qparams = qp;
      result.rtn_fallback = true;
      result.fallback_reason = factored.failure;
      return result;
    }
    const at::Tensor& hinv = factored.hinv;

    // Columns as rows: column c of W is the contiguous row c of wt.
    at::Tensor wt = w.t().contiguous();
    std::vector<double> row_loss(rows, 0.0);
    at::Tensor qt;
    if (loop_ == Loop::kHost) {
      qt = at::empty_like(wt);
      QD_RETURN_IF_ERROR(HostLoop(wt, qt, hinv, row_loss));
    } else if (loop_ == Loop::kFused) {
      QD_ASSIGN_OR_RETURN(qt, FusedLoop(wt, hinv, row_loss));
    } else {
      QD_ASSIGN_OR_RETURN(qt, TensorLoop(wt, hinv, row_loss));
    }
    result.loop_seconds = lap();

    at::Tensor q = qt.t();
    if (perm_.defined()) q = q.index_select(1, at::argsort(perm_));
    result.weight = q.contiguous().to(weight.scalar_type());
    for (double l : row_loss) result.loss += l;
    result.qparams = FinalQParams();
    if (perm_.defined() && fit_in_loop) {
      at::Tensor gidx = at::empty({cols}, at::kInt);
      int32_t* g = gidx.data_ptr<int32_t>();
      for (int64_t p = 0; p < cols; ++p)
        g[perm_host_[p]] = static_cast<int32_t>(p / layout_.group_size);
      result.group_index = gidx;
    }
    return result;
  }

 private:
  enum class Loop { kHost, kFused, kTensor };

  Loop ChooseLoop(bool tensor_ops) const {
    if (tensor_ops || !layout_.integer) return Loop::kTensor;
    if (device_.is_cpu()) return Loop::kHost;
#if defined(QUANTD_CUDA_KERNELS)
    // The kernel fits group parameters with float32 scales only, and keeps
    // a block of columns in shared memory.
    const bool fits_in_loop = layout_.granularity == Granularity::kGroup && !opt_.static_groups;
    if (device_.is_cuda() && opt_.block_size <= cuda::kMaxBlockColumns &&
        (!fits_in_loop ||
         quant::IntConstsFor(spec_, at::kFloat).rounding == quant::ScaleRounding::kNone)) {
      return Loop::kFused;
    }
#endif
    return Loop::kTensor;
  }

  // Index into the parameter table of the column at permuted position p.
  int64_t GroupOf(int64_t p) const {
    if (layout_.granularity != Granularity::kGroup) return 0;
    if (opt_.static_groups) return perm_host_[p] / layout_.group_size;
    return p / layout_.group_size;
  }
  bool FitsHere(int64_t p) const {
    return layout_.granularity == Granularity::kGroup && !opt_.static_groups &&
           p % layout_.group_size == 0;
  }

  // Integer specs on the CPU: blocks of columns through IntegerBlock, each
  // followed by the lazy batch update of every later column.
  Status HostLoop(at::Tensor& wt, at::Tensor& qt, const at::Tensor& hinv,
                  std::vector<double>& row_loss) {
    const int64_t rows = rows_, cols = cols_;
    const int64_t bs = std::max<int64_t>(1, opt_.block_size);
    at::Tensor err = at::empty({std::min(bs, cols), rows}, at::kFloat);
    const float* hi = hinv.data_ptr<float>();
    float* w = wt.data_ptr<float>();
    float* q = qt.data_ptr<float>();
    float* e = err.data_ptr<float>();
    for (int64_t i1 = 0; i1 < cols; i1 += bs) {
      if (StopRequested()) return StoppedAt(i1);
      const int64_t i2 = std::min(i1 + bs, cols);
      IntegerBlock(w, q, e, hi, i1, i2, row_loss);
      LazyUpdate(wt, hinv, err, i1, i2);
    }
    return OkStatus();
  }

  // The lazy batch update after the block of columns [i1, i2): every later
  // column takes the block's scaled errors times its rows of the inverse.
  void LazyUpdate(at::Tensor& wt, const at::Tensor& hinv, const at::Tensor& err, int64_t i1,
                  int64_t i2) const {
    gptq_loop::LazyUpdate(wt, hinv, err, i1, i2, cols_);
  }

  // A device loop's parameters and loss, back in table_ and row_loss.
  void TakeBack(const at::Tensor& scale_tab, const at::Tensor& zp_tab, const at::Tensor& loss,
                std::vector<double>& row_loss) {
    CopyToHost(scale_tab, table_.scale);
    if (zp_tab.defined()) CopyToHost(zp_tab, table_.zero_point);
    CopyToHost(loss, row_loss);
  }

  // A large layer's column loop takes long on a CPU: a job's cancel or lost
  // lease stops it between column blocks.
  Status StoppedAt(int64_t column) const {
    return CancelledStatus("running GPTQ at column " + std::to_string(column) + " of " +
                           std::to_string(cols_));
  }

  // Integer specs: rows are independent, so each thread runs the whole block
  // on its own rows; parameters and codes follow int_quant's scalar
  // reference, bit for bit the fused kernels'.
  void IntegerBlock(float* w, float* q, float* e, const float* hi, int64_t i1, int64_t i2,
                    std::vector<double>& row_loss) {
    const int64_t rows = rows_, cols = cols_;
    const quant::IntQParamConsts consts = quant::IntConstsFor(spec_, at::kFloat);
    const int64_t groups = table_.groups;
    const bool has_zp = !table_.zero_point.empty();
    at::parallel_for(0, rows, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t p = i1; p < i2; ++p) {
        const int64_t g = GroupOf(p);
        if (FitsHere(p)) {
          const int64_t end = std::min(p + layout_.group_size, cols);
          for (int64_t r = r0; r < r1; ++r) {
            float mn = w[p * rows + r], mx = mn;
            for (int64_t c = p + 1; c < end; ++c) {
              const float v = w[c * rows + r];
              mn = std::min(mn, v);
              mx = std::max(mx, v);
            }
            const quant::ScaleZeroPoint sz = quant::IntQParamsFromMinMax(mn, mx, consts);
            table_.scale[r * groups + g] = sz.scale;
            if (has_zp) table_.zero_point[r * groups + g] = sz.zero_point;
          }
        }
        const float* wp = w + p * rows;
        float* qp = q + p * rows;
        for (int64_t r = r0; r < r1; ++r) {
          const float s = table_.scale[r * groups + g];
          const float z = has_zp ? table_.zero_point[r * groups + g] : 0.0f;
          qp[r] = quant::int_quant::FakeQuantScalar(wp[r], s, z, spec_);
        }
        gptq_loop::SpreadColumnError(w, qp, e + (p - i1) * rows, hi, p, i2, rows, cols, r0, r1,
                                     row_loss);
      }
    });
  }

  // Every spec, on any device: each column through the public fake-quant
  // entry points, with tensor ops that round as IntegerBlock's scalar code
  // does (the error divides by a 0-dim tensor, not a host scalar, so CUDA
  // does not turn it into a multiplication by the reciprocal; the updates
  // multiply, then subtract). wt: [cols, rows] on the device, consumed.
  // Returns the codes' values [cols, rows] on the host, and leaves the
  // parameters in table_ and the loss in row_loss.
  StatusOr<at::Tensor> TensorLoop(at::Tensor wt, const at::Tensor& hinv,
                                  std::vector<double>& row_loss) {
    const int64_t rows = rows_, cols = cols_;
    const int64_t bs = std::max<int64_t>(1, opt_.block_size);
    const int64_t groups = table_.groups;
    const bool mx = quant::IsMxType(spec_.dtype);
    const bool per_tensor = layout_.granularity == Granularity::kTensor && !mx;
    quant::QuantSpec col_spec = spec_;
    if (!mx && layout_.granularity != Granularity::kTensor) {
      col_spec.qscheme = quant::QScheme::kPerChannel;
      col_spec.ch_axis = 0;
      col_spec.group_size.reset();
    }
    const auto host_table = [&](std::vector<float>& v) {
      return at::from_blob(v.data(), {rows, groups}, at::kFloat)
          .to(device_, at::kFloat, /*non_blocking=*/false, /*copy=*/true);
    };
    at::Tensor scale_tab = host_table(table_.scale);
    at::Tensor zp_tab = table_.zero_point.empty() ? at::Tensor() : host_table(table_.zero_point);
    const at::ScalarType zp_type =
        template_.zero_point.defined() ? template_.zero_point.scalar_type() : at::kFloat;
    at::Tensor qt = at::empty_like(wt);
    at::Tensor err = at::empty({std::min(bs, cols), rows}, wt.options());
    at::Tensor loss = at::zeros({rows}, wt.options().dtype(at::kDouble));
    const at::Tensor diag = hinv.diagonal().contiguous();
    const at::Tensor diag_sq = diag.to(at::kDouble).square();
    for (int64_t i1 = 0; i1 < cols; i1 += bs) {
      if (StopRequested()) return StoppedAt(i1);
      const int64_t i2 = std::min(i1 + bs, cols);
      for (int64_t p = i1; p < i2; ++p) {
        const int64_t g = GroupOf(p);
        if (FitsHere(p)) {
          // The group's parameters on its columns as updated so far, by
          // min / max as the reference's quantizer fits them.
          const int64_t end = std::min(p + layout_.group_size, cols);
          quant::QuantSpec fit_spec = spec_;
          if (!mx) {
            fit_spec.group_size = static_cast<int>(end - p);
            fit_spec.observer = quant::ObserverType::kMinMax;
          }
          QD_ASSIGN_OR_RETURN(
              quant::QParams qp,
              quant::ComputeQParams(wt.narrow(0, p, end - p).t().contiguous(), fit_spec));
          scale_tab.select(1, g).copy_(qp.scale.reshape({rows}));
          if (zp_tab.defined()) zp_tab.select(1, g).copy_(qp.zero_point.reshape({rows}));
        }
        quant::QParams col_qp;
        const at::Tensor s = scale_tab.select(1, g);
        if (per_tensor) {
          col_qp.scale = s[0].clone();
          if (zp_tab.defined()) col_qp.zero_point = zp_tab.select(1, g)[0].to(zp_type);
        } else {
          col_qp.scale = mx ? s.reshape({rows, 1}) : s.contiguous();
          if (zp_tab.defined()) col_qp.zero_point = zp_tab.select(1, g).to(zp_type).contiguous();
        }
        QD_ASSIGN_OR_RETURN(at::Tensor xq,
                            quant::FakeQuantize(wt[p].view({rows, 1}), col_spec, col_qp));
        qt[p].copy_(xq.view({rows}));
        const at::Tensor diff = wt[p] - qt[p];
        at::Tensor ep = err[p - i1];
        at::div_out(ep, diff, diag[p]);
        loss.add_(diff.to(at::kDouble).square().div_(diag_sq[p]).div_(2));
        if (p + 1 < i2) {
          wt.narrow(0, p + 1, i2 - p - 1)
              .sub_(hinv[p].narrow(0, p + 1, i2 - p - 1).unsqueeze(1) * ep.unsqueeze(0));
        }
      }
      LazyUpdate(wt, hinv, err, i1, i2);
    }
    TakeBack(scale_tab, zp_tab, loss, row_loss);
    return qt;
  }

  // Integer specs on a CUDA device: each block of columns is one kernel
  // (cuda/gptq_kernels.cu, IntegerBlock's arithmetic) and its lazy update
  // one matmul; nothing waits on the host until the layer is done. Returns
  // the codes' values [cols, rows] on the device.
  StatusOr<at::Tensor> FusedLoop(at::Tensor& wt, const at::Tensor& hinv,
                                 std::vector<double>& row_loss) {
#if defined(QUANTD_CUDA_KERNELS)
    const int64_t rows = rows_, cols = cols_;
    const int64_t bs = std::max<int64_t>(1, opt_.block_size);
    const auto on_device = [&](std::vector<float>& v) {
      return at::from_blob(v.data(), {rows, table_.groups}, at::kFloat).to(device_);
    };
    at::Tensor scale_tab = on_device(table_.scale);
    at::Tensor zp_tab = table_.zero_point.empty() ? at::Tensor() : on_device(table_.zero_point);
    at::Tensor perm = at::from_blob(perm_host_.data(), {cols}, at::kLong).to(device_);
    at::Tensor qt = at::empty_like(wt);
    at::Tensor err = at::empty({std::min(bs, cols), rows}, wt.options());
    at::Tensor loss = at::zeros({rows}, wt.options().dtype(at::kDouble));
    const at::Tensor h = hinv.contiguous();
    const quant::IntQParamConsts consts = quant::IntConstsFor(spec_, at::kFloat);
    cuda::IntegerBlockArgs a;
    a.w = wt.data_ptr<float>();
    a.q = qt.data_ptr<float>();
    a.err = err.data_ptr<float>();
    a.hinv = h.data_ptr<float>();
    a.scale = scale_tab.data_ptr<float>();
    a.zero_point = zp_tab.defined() ? zp_tab.data_ptr<float>() : nullptr;
    a.loss = loss.data_ptr<double>();
    a.perm = perm.data_ptr<int64_t>();
    a.rows = rows;
    a.cols = cols;
    a.groups = table_.groups;
    a.group_mode = layout_.granularity != Granularity::kGroup ? 0 : opt_.static_groups ? 2 : 1;
    a.group_size = layout_.group_size;
    a.qmin = consts.qmin;
    a.qmax = consts.qmax;
    a.symmetric = consts.symmetric;
    a.float_zero_point = consts.float_zero_point;
    a.symmetric_zero_point = consts.symmetric_zero_point;
    a.round = spec_.round_method;
    for (int64_t i1 = 0; i1 < cols; i1 += bs) {
      if (StopRequested()) return StoppedAt(i1);
      const int64_t i2 = std::min(i1 + bs, cols);
      a.i1 = i1;
      a.i2 = i2;
      if (const char* e = cuda::LaunchIntegerBlock(a, wt.get_device())) {
        return InternalError(std::string("GPTQ column kernel: ") + e);
      }
      LazyUpdate(wt, h, err, i1, i2);
    }
    TakeBack(scale_tab, zp_tab, loss, row_loss);
    return qt;
#else
    (void)wt, (void)hinv, (void)row_loss;
    return InternalError("GPTQ: this build has no CUDA column kernel");
#endif
  }

  // The table in the spec's QParams shapes and dtypes.
  quant::QParams FinalQParams() const {
    quant::QParams qp;
    const std::vector<int64_t> sizes = template_.scale.sizes().vec();
    qp.scale =
        at::from_blob(const_cast<float*>(table_.scale.data()), {rows_, table_.groups}, at::kFloat)
            .clone();
    if (layout_.granularity == Granularity::kTensor) {
      qp.scale = qp.scale[0][0].clone().reshape(sizes);
    } else {
      qp.scale = qp.scale.reshape(sizes).contiguous();
    }
    if (template_.zero_point.defined()) {
      at::Tensor z = at::from_blob(const_cast<float*>(table_.zero_point.data()),
                                   {rows_, table_.groups}, at::kFloat)
                         .clone();
      if (layout_.granularity == Granularity::kTensor) z = z[0][0].clone();
      qp.zero_point = z.reshape(template_.zero_point.sizes().vec())
                          .to(template_.zero_point.scalar_type())
                          .contiguous();
    }
    return qp;
  }

  const quant::QuantSpec& spec_;
  const GptqOptions& opt_;
  WeightLayout layout_;
  at::Device device_;
  Loop loop_;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  at::Tensor perm_;
  std::vector<int64_t> perm_host_;
  quant::QParams template_;
  ParamTable table_;
};

StatusOr<GptqResult> QuantizeWeight(const at::Tensor& weight, const at::Tensor& hessian,
                                    const quant::QuantSpec& spec, const GptqOptions& options,
                                    bool tensor_ops) {
  if (!weight.defined() || weight.dim() != 2) {
    return InvalidArgumentError("GPTQ needs a 2-D [out, in] weight");
  }
  const int64_t rows = weight.size(0), cols = weight.size(1);
  if (!hessian.defined() || hessian.dim() != 2 || hessian.size(0) != cols ||
      hessian.size(1) != cols) {
    return InvalidArgumentError("GPTQ Hessian must be [" + std::to_string(cols) + ", " +
                                std::to_string(cols) + "] for a weight with " +
                                std::to_string(cols) + " input columns");
  }
  if (options.block_size < 1) return InvalidArgumentError("GPTQ block_size must be positive");
  if (!(options.damp_percent >= 0) || !(options.damp_retry_step >= 0)) {
    return InvalidArgumentError("GPTQ damping must be non-negative");
  }
  const at::ScalarType t = weight.scalar_type();
  if (t != at::kFloat && t != at::kHalf && t != at::kBFloat16 && t != at::kDouble) {
    return InvalidArgumentError("GPTQ weight must be a float tensor");
  }
  QD_ASSIGN_OR_RETURN(WeightLayout layout, LayoutFor(spec, rows, cols));
  try {
    // The whole job runs where the Hessian was accumulated.
    GptqRun run(spec, options, layout, hessian.device(), tensor_ops);
    QD_ASSIGN_OR_RETURN(GptqResult r, run.Run(weight.to(hessian.device()), hessian));
    if (!weight.device().is_cpu()) {
      r.weight = r.weight.to(weight.device());
    }
    return r;
  } catch (const c10::Error& e) {
    return InternalError(std::string("GPTQ: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return InternalError(std::string("GPTQ: ") + e.what());
  }
}

}  // namespace

DampedInverse FactorDampedHessian(const at::Tensor& h, const GptqOptions& options) {
  DampedInverse out;
  const double mean_diag = h.diagonal().mean().item<double>();
  out.failure = "the Hessian is not finite";
  if (std::isfinite(mean_diag)) {
    out.failure = "the damped Hessian is not positive definite";
    for (int k = 0; k <= std::max(0, options.max_damp_retries); ++k) {
      const double percent = options.damp_percent + k * options.damp_retry_step;
      if (InverseCholesky(h, percent * mean_diag, &out.hinv)) {
        out.damp_percent = percent;
        out.damp_retries = k;
        out.failure.clear();
        return out;
      }
    }
  }
  char buf[160];
  std::snprintf(
      buf, sizeof(buf), "%s at damping up to %.3f of mean(diag H)", out.failure.c_str(),
      options.damp_percent + std::max(0, options.max_damp_retries) * options.damp_retry_step);
  out.failure = buf;
  out.hinv = at::Tensor();
  return out;
}

Status CheckGptqWeightSpec(const quant::QuantSpec& spec, int64_t rows, int64_t cols) {
  return LayoutFor(spec, rows, cols).status();
}

StatusOr<GptqResult> GptqQuantizeWeight(const at::Tensor& weight, const at::Tensor& hessian,
                                        const quant::QuantSpec& spec, const GptqOptions& options) {
  return QuantizeWeight(weight, hessian, spec, options, /*tensor_ops=*/false);
}

StatusOr<GptqResult> GptqQuantizeWeightWithTensorOps(const at::Tensor& weight,
                                                     const at::Tensor& hessian,
                                                     const quant::QuantSpec& spec,
                                                     const GptqOptions& options) {
  return QuantizeWeight(weight, hessian, spec, options, /*tensor_ops=*/true);
}

}  // namespace quantd::algo
