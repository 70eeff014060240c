#include "worker/torchscript/script_qat.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#include "worker/common/cancellation.h"
#include "worker/io/safetensors/safetensors_source.h"
#include "worker/io/safetensors/tensor_io.h"
#include "worker/quant/fake_quant.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::torchscript {
namespace {

namespace fs = std::filesystem;
using Loss = pipeline::QatOptions::Loss;
using Clock = std::chrono::steady_clock;

constexpr char kCheckpointFile[] = "qat_checkpoint.safetensors";
constexpr char kCheckpointVersion[] = "1";
// The smallest scale quantd's observers produce (qparams.h).
constexpr double kMinScale = 1.1920928955078125e-07;  // 2^-23
// Checkpoints: at most this many per run (a resumed job redoes at most
// 1 / kCheckpoints of the steps), and no more often than kCostShare of the
// time goes to them.
constexpr int kCheckpoints = 20;
constexpr double kCostShare = 0.1;

const char* LossName(Loss l) {
  switch (l) {
    case Loss::kCrossEntropy:
      return "cross_entropy";
    case Loss::kMse:
      return "mse";
    case Loss::kDistillation:
    case Loss::kAuto:
      break;
  }
  return "distillation";
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One quantized layer's training state.
struct TrainedLayer {
  size_t slot = 0;
  std::string name;
  quant::QuantSpec spec;
  quant::QParams qparams;  // the observer's; with learned scales, where they start
  at::Tensor weight;       // latent weight (requires grad)
  at::Tensor scale;        // learned scale (requires grad), or undefined
  at::Tensor zero_point;   // as float, for the learned-scale forward
  int64_t axis = 0;        // the scale's axis (per channel)
  double grad_scale = 1;   // LSQ's gradient scale
  float qmin = 0;
  float qmax = 0;
  at::Tensor bias;  // trained bias, or undefined
};

// A per-channel parameter shaped to broadcast along `axis` of a
// `dim`-dimensional weight; a per-tensor one as it is.
at::Tensor AlongAxis(const at::Tensor& p, int64_t dim, int64_t axis) {
  if (p.dim() == 0) return p;
  std::vector<int64_t> shape(dim, 1);
  shape[axis] = p.numel();
  return p.reshape(shape);
}

// LSQ: (clamp(round(w / s + z), qmin, qmax) - z) * s, rounding with a
// straight-through gradient, the scale's gradient multiplied by grad_scale.
at::Tensor LearnedScaleFakeQuant(const TrainedLayer& t) {
  const int64_t dim = t.weight.dim();
  at::Tensor s = AlongAxis(t.scale.clamp_min(kMinScale), dim, t.axis);
  s = s * t.grad_scale + (s - s * t.grad_scale).detach();
  const at::Tensor z = AlongAxis(t.zero_point, dim, t.axis);
  const at::Tensor v = t.weight / s + z;
  const at::Tensor r = v + (v.round() - v).detach();
  return (r.clamp(t.qmin, t.qmax) - z) * s;
}

// The weight the training forward uses: the fake-quantized latent weight,
// with the straight-through gradient.
StatusOr<at::Tensor> TrainingWeight(const TrainedLayer& t) {
  if (t.scale.defined()) return LearnedScaleFakeQuant(t);
  QD_ASSIGN_OR_RETURN(at::Tensor fq, quant::FakeQuantize(t.weight.detach(), t.spec, t.qparams));
  return t.weight + (fq - t.weight).detach();
}

// The parameters the trained weight is quantized with at the end.
quant::QParams FinalQParams(const TrainedLayer& t) {
  if (!t.scale.defined()) return t.qparams;
  quant::QParams qp = t.qparams;
  at::Tensor s = t.scale.detach().clamp_min(kMinScale).to(at::kFloat).contiguous().clone();
  const quant::ScaleRounding r = quant::ScaleRoundingFor(t.spec, t.weight.scalar_type());
  if (r != quant::ScaleRounding::kNone) {
    float* p = s.data_ptr<float>();
    for (int64_t i = 0; i < s.numel(); ++i) p[i] = quant::RoundScale(p[i], r);
  }
  qp.scale = s.reshape(t.qparams.scale.sizes());
  return qp;
}

// Adam (Kingma & Ba; PyTorch's defaults: betas 0.9 / 0.999, eps 1e-8, no
// weight decay), its state kept where a checkpoint can save it.
class Adam {
 public:
  static constexpr double kBeta1 = 0.9;
  static constexpr double kBeta2 = 0.999;
  static constexpr double kEps = 1e-8;

  explicit Adam(std::vector<at::Tensor> params) : params_(std::move(params)) {
    for (const at::Tensor& p : params_) {
      m_.push_back(at::zeros_like(p).detach());
      v_.push_back(at::zeros_like(p).detach());
    }
  }
  void ZeroGrad() {
    for (at::Tensor& p : params_) {
      if (p.grad().defined()) p.mutable_grad() = at::Tensor();
    }
  }
  void Step(double lr) {
    torch::NoGradGuard no_grad;
    ++steps_;
    const double c1 = 1 - std::pow(kBeta1, steps_);
    const double c2 = 1 - std::pow(kBeta2, steps_);
    for (size_t i = 0; i < params_.size(); ++i) {
      const at::Tensor g = params_[i].grad();
      if (!g.defined()) continue;
      m_[i].mul_(kBeta1).add_(g, 1 - kBeta1);
      v_[i].mul_(kBeta2).addcmul_(g, g, 1 - kBeta2);
      const at::Tensor denom = (v_[i].sqrt() / std::sqrt(c2)).add_(kEps);
      params_[i].addcdiv_(m_[i], denom, -lr / c1);
    }
  }
  int64_t steps() const { return steps_; }
  std::vector<at::Tensor>& params() { return params_; }
  std::vector<at::Tensor>& m() { return m_; }
  std::vector<at::Tensor>& v() { return v_; }
  void set_steps(int64_t s) { steps_ = s; }

 private:
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> m_;
  std::vector<at::Tensor> v_;
  int64_t steps_ = 0;
};

Status QatError(StatusCode code, const std::string& field, const std::string& why) {
  return Status(code, field + ": " + why, "INVALID_QAT").AddViolation(field, why);
}

class Trainer {
 public:
  Trainer(ScriptQuantizer& q, const TensorDataset& data, const ScriptQatOptions& o)
      : q_(q), data_(data), o_(o), qat_(o.qat) {}

  StatusOr<pipeline::JobReport::Training> Run() {
    QD_RETURN_IF_ERROR(ChooseLoss());
    QD_RETURN_IF_ERROR(PrepareLayers());
    MakeOptimizer();
    Resume();
    // The same graphs in every attempt: the executor's optimizations would
    // differ between a fresh process and one that has run longer.
    torch::jit::GraphOptimizerEnabledGuard unoptimized(false);
    const int64_t n = data_.size();
    const int64_t batch = std::min<int64_t>(std::max(1, qat_.batch_size), n);
    const int64_t per_epoch = (n + batch - 1) / batch;
    const int interval = std::max(1, qat_.steps / kCheckpoints);
    auto last_checkpoint = Clock::now();
    double checkpoint_cost = 0;
    for (int step = start_ + 1; step <= qat_.steps; ++step) {
      if (StopRequested()) return CancelledStatus("training");
      const int64_t t = step - 1;
      const at::Tensor idx = BatchIndices(t / per_epoch, t % per_epoch, batch, n);
      const double lr = LearningRate(step);
      QD_ASSIGN_OR_RETURN(double loss, Step(idx, lr));
      losses_.push_back(loss);
      if (o_.on_step) o_.on_step({step, qat_.steps, loss, lr});
      const bool due_by_steps = step % interval == 0 || step == qat_.steps;
      const bool affordable =
          Seconds(Clock::now() - last_checkpoint) * kCostShare >= checkpoint_cost;
      if (!o_.checkpoint_dir.empty() && due_by_steps && (affordable || step == qat_.steps)) {
        const auto begin = Clock::now();
        QD_RETURN_IF_ERROR(SaveCheckpoint(step));
        last_checkpoint = Clock::now();
        checkpoint_cost = Seconds(last_checkpoint - begin);
      }
    }
    QD_RETURN_IF_ERROR(Install());
    pipeline::JobReport::Training report;
    report.steps = qat_.steps;
    report.first_loss = losses_.empty() ? 0 : losses_.front();
    const size_t tail = std::max<size_t>(1, losses_.size() / 10);
    double sum = 0;
    for (size_t i = losses_.size() - std::min(tail, losses_.size()); i < losses_.size(); ++i) {
      sum += losses_[i];
    }
    report.final_loss = losses_.empty() ? 0 : sum / std::min(tail, losses_.size());
    report.resumed_after_step = start_;
    report.loss = LossName(loss_);
    return report;
  }

 private:
  void Log(pipeline::LogLevel level, const std::string& msg) {
    if (o_.log) o_.log(level, msg);
  }

  Status ChooseLoss() {
    loss_ = qat_.loss;
    if (loss_ == Loss::kAuto) {
      loss_ = data_.label.defined()    ? Loss::kCrossEntropy
              : data_.target.defined() ? Loss::kMse
                                       : Loss::kDistillation;
    }
    if (loss_ == Loss::kCrossEntropy && !data_.label.defined()) {
      return QatError(StatusCode::kFailedPrecondition, "spec.qat.loss",
                      "cross-entropy needs a `label` tensor in the training dataset");
    }
    if (loss_ == Loss::kMse && !data_.target.defined()) {
      return QatError(StatusCode::kFailedPrecondition, "spec.qat.loss",
                      "mse needs a `target` tensor in the training dataset");
    }
    if (data_.size() == 0) {
      return QatError(StatusCode::kFailedPrecondition, "spec.qat.dataset_uri",
                      "the training dataset has no samples");
    }
    return OkStatus();
  }

  Status PrepareLayers() {
    const auto& layers = q_.layers();
    std::vector<std::string> refused;
    for (size_t i = 0; i < layers.size(); ++i) {
      const QuantizedLayer& l = layers[i];
      if (!l.plan.weight) continue;
      TrainedLayer t;
      t.slot = i;
      t.name = l.layer.name;
      t.spec = *WithLayerAxes(l.plan.weight, l.layer.type);
      t.qparams = l.weight.qparams();
      t.weight = l.float_weight.detach().clone().set_requires_grad(true);
      if (qat_.learn_scales) {
        const bool int_type = quant::IsIntType(t.spec.dtype);
        const bool granular = t.spec.qscheme == quant::QScheme::kPerTensor ||
                              t.spec.qscheme == quant::QScheme::kPerChannel;
        if (!int_type || !granular || !t.qparams.scale.defined()) {
          refused.push_back(t.name + " (" + quant::DescribeSpec(t.spec) + ")");
          continue;
        }
        const quant::IntQParamConsts c = quant::IntConstsFor(t.spec, t.weight.scalar_type());
        t.qmin = c.qmin;
        t.qmax = c.qmax;
        const int64_t dim = t.weight.dim();
        int64_t axis = t.spec.ch_axis.value_or(0);
        if (axis < 0) axis += dim;
        t.axis = axis;
        t.scale = t.qparams.scale.detach().to(at::kFloat).clone().set_requires_grad(true);
        t.zero_point = t.qparams.zero_point.defined() ? t.qparams.zero_point.to(at::kFloat)
                                                      : at::zeros_like(t.scale).detach();
        const double per_scale = static_cast<double>(t.weight.numel()) / t.scale.numel();
        t.grad_scale = 1.0 / std::sqrt(per_scale * std::max(1.0f, c.qmax));
      }
      const bool float_bias = l.float_bias.isTensor() && !l.bias.quantized();
      if (qat_.train_biases && float_bias) {
        t.bias = l.float_bias.toTensor().detach().clone().set_requires_grad(true);
      }
      layers_.push_back(std::move(t));
    }
    if (!refused.empty()) {
      std::string list;
      for (const auto& r : refused) list += (list.empty() ? "" : ", ") + r;
      return QatError(StatusCode::kInvalidArgument, "spec.qat.learn_scales",
                      "learned scales need integer per-tensor or per-channel weights; not " + list);
    }
    if (layers_.empty()) {
      return QatError(StatusCode::kFailedPrecondition, "spec.qat",
                      "no layer has a quantized weight to train");
    }
    return OkStatus();
  }

  void MakeOptimizer() {
    std::vector<at::Tensor> params;
    for (const TrainedLayer& t : layers_) {
      params.push_back(t.weight);
      if (t.bias.defined()) params.push_back(t.bias);
      if (t.scale.defined()) params.push_back(t.scale);
    }
    adam_ = std::make_unique<Adam>(std::move(params));
  }

  // Cosine decay from learning_rate (step 1) towards 0.
  double LearningRate(int step) const {
    const double progress = static_cast<double>(step - 1) / qat_.steps;
    return qat_.learning_rate * 0.5 * (1 + std::cos(M_PI * progress));
  }

  // Batch `k` of epoch `epoch`: each epoch draws every sample once, in an
  // order that depends on the seed and the epoch only.
  at::Tensor BatchIndices(int64_t epoch, int64_t k, int64_t batch, int64_t n) const {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(qat_.seed * 1000003ULL +
                                                        static_cast<uint64_t>(epoch));
    const at::Tensor perm = at::randperm(n, gen, at::TensorOptions().dtype(at::kLong));
    return perm.slice(0, k * batch, std::min(n, (k + 1) * batch));
  }

  StatusOr<double> Step(const at::Tensor& idx, double lr) {
    std::vector<at::Tensor> inputs;
    for (const at::Tensor& x : data_.inputs) inputs.push_back(x.index_select(0, idx));
    at::Tensor reference;
    if (loss_ == Loss::kDistillation) {
      QD_ASSIGN_OR_RETURN(reference, q_.Forward(ScriptQuantizer::Mode::kFloat, inputs));
    } else if (loss_ == Loss::kCrossEntropy) {
      reference = data_.label.index_select(0, idx);
    } else {
      reference = data_.target.index_select(0, idx);
    }
    std::vector<at::Tensor> weights(q_.layers().size());
    std::vector<at::Tensor> biases(q_.layers().size());
    for (const TrainedLayer& t : layers_) {
      QD_ASSIGN_OR_RETURN(weights[t.slot], TrainingWeight(t));
      biases[t.slot] = t.bias;
    }
    QD_ASSIGN_OR_RETURN(at::Tensor out, q_.ForwardTraining(weights, biases, inputs));
    QD_ASSIGN_OR_RETURN(at::Tensor loss, LossOf(out, reference));
    const double value = loss.item<double>();
    if (!std::isfinite(value)) {
      return QatError(StatusCode::kFailedPrecondition, "spec.qat.learning_rate",
                      "the loss is no longer finite (" + std::to_string(value) +
                          "): training diverged; lower the learning rate");
    }
    adam_->ZeroGrad();
    {
      torch::AutoGradMode grad(true);
      loss.backward();
    }
    adam_->Step(lr);
    return value;
  }

  StatusOr<at::Tensor> LossOf(const at::Tensor& out, const at::Tensor& reference) const {
    torch::AutoGradMode grad(true);
    if (!out.requires_grad()) {
      return InternalError("the training forward recorded no gradient");
    }
    if (loss_ == Loss::kCrossEntropy) {
      if (out.dim() != 2 || out.size(0) != reference.size(0)) {
        return QatError(StatusCode::kInvalidArgument, "spec.qat.loss",
                        "cross-entropy needs [batch, classes] outputs; the model returned " +
                            std::to_string(out.dim()) + "-d outputs");
      }
      if (reference.max().item<int64_t>() >= out.size(1) || reference.min().item<int64_t>() < 0) {
        return QatError(
            StatusCode::kInvalidArgument, "spec.qat.dataset_uri",
            "a label is outside the model's " + std::to_string(out.size(1)) + " classes");
      }
      return at::nll_loss(at::log_softmax(out.to(at::kFloat), 1), reference);
    }
    if (out.sizes() != reference.sizes()) {
      const std::string what = loss_ == Loss::kMse ? "the dataset's target" : "the float outputs";
      return QatError(StatusCode::kInvalidArgument, "spec.qat.loss",
                      "the model's outputs do not have the shape of " + what);
    }
    return at::mse_loss(out.to(at::kFloat), reference.to(at::kFloat).detach());
  }

  std::string CheckpointPath() const {
    return (fs::path(o_.checkpoint_dir) / kCheckpointFile).string();
  }

  // One safetensors file: Adam's parameters ("param.N") and moments
  // ("m.N", "v.N"), the losses so far; the step, version and fingerprint in
  // its metadata. The writer renames it into place when complete.
  Status SaveCheckpoint(int step) {
    std::error_code ec;
    fs::create_directories(o_.checkpoint_dir, ec);
    if (ec) {
      return InternalError("creating the scratch directory " + o_.checkpoint_dir + ": " +
                           ec.message());
    }
    QD_ASSIGN_OR_RETURN(auto w, io::SafetensorsWriter::Create(CheckpointPath()));
    for (size_t i = 0; i < adam_->params().size(); ++i) {
      const std::string n = std::to_string(i);
      QD_RETURN_IF_ERROR(io::AddTensor(*w, "param." + n, adam_->params()[i].detach()));
      QD_RETURN_IF_ERROR(io::AddTensor(*w, "m." + n, adam_->m()[i]));
      QD_RETURN_IF_ERROR(io::AddTensor(*w, "v." + n, adam_->v()[i]));
    }
    QD_RETURN_IF_ERROR(io::AddTensor(*w, "losses", at::tensor(losses_, at::kDouble)));
    w->SetMetadata("quantd_qat_version", kCheckpointVersion);
    w->SetMetadata("fingerprint", o_.fingerprint);
    w->SetMetadata("step", std::to_string(step));
    w->SetMetadata("adam_steps", std::to_string(adam_->steps()));
    return w->Finish();
  }

  // Continues after the checkpoint of an earlier attempt of this job, when
  // there is one made for the same options; otherwise starts at step 1.
  void Resume() {
    if (o_.checkpoint_dir.empty()) return;
    std::error_code ec;
    if (!fs::exists(CheckpointPath(), ec)) return;
    Status s = LoadCheckpoint();
    if (s.ok()) {
      Log(pipeline::LogLevel::kInfo, "resuming training after step " + std::to_string(start_) +
                                         " of " + std::to_string(qat_.steps) +
                                         " (an earlier attempt's checkpoint)");
      return;
    }
    start_ = 0;
    losses_.clear();
    MakeOptimizer();
    Log(pipeline::LogLevel::kWarning,
        "training starts over: the checkpoint of an earlier attempt " + s.message());
  }

  Status LoadCheckpoint() {
    QD_ASSIGN_OR_RETURN(auto src, io::SafetensorsSource::Open(CheckpointPath()));
    const auto meta = src->Metadata();
    auto get = [&meta](const std::string& key) {
      auto it = meta.find(key);
      return it == meta.end() ? std::string() : it->second;
    };
    if (get("quantd_qat_version") != kCheckpointVersion || get("fingerprint") != o_.fingerprint) {
      return FailedPreconditionError("was made for other options");
    }
    const int64_t step = std::atoll(get("step").c_str());
    const int64_t adam_steps = std::atoll(get("adam_steps").c_str());
    if (step < 1 || step > qat_.steps || adam_steps != step) {
      return DataLossError("names step " + get("step"));
    }
    QD_ASSIGN_OR_RETURN(at::Tensor losses, src->Load("losses", at::kDouble));
    if (losses.numel() != step) return DataLossError("holds the wrong number of losses");
    std::vector<at::Tensor> loaded;
    for (size_t i = 0; i < adam_->params().size(); ++i) {
      for (const char* what : {"param.", "m.", "v."}) {
        QD_ASSIGN_OR_RETURN(at::Tensor t, src->Load(what + std::to_string(i)));
        if (!t.sizes().equals(adam_->params()[i].sizes())) {
          return DataLossError("holds a tensor of another shape");
        }
        loaded.push_back(std::move(t));
      }
    }
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < adam_->params().size(); ++i) {
      adam_->params()[i].copy_(loaded[3 * i]);
      adam_->m()[i].copy_(loaded[3 * i + 1]);
      adam_->v()[i].copy_(loaded[3 * i + 2]);
    }
    adam_->set_steps(adam_steps);
    const at::Tensor l = losses.to(at::kDouble).contiguous();
    losses_.assign(l.data_ptr<double>(), l.data_ptr<double>() + step);
    start_ = static_cast<int>(step);
    return OkStatus();
  }

  // The trained weights (and biases) into the quantizer.
  Status Install() {
    for (const TrainedLayer& t : layers_) {
      const quant::QParams qp = FinalQParams(t);
      const at::Tensor w = t.weight.detach();
      QD_ASSIGN_OR_RETURN(at::Tensor fake, quant::FakeQuantize(w, t.spec, qp));
      QD_RETURN_IF_ERROR(q_.SetFittedWeight(t.slot, fake, qp));
      if (t.bias.defined()) QD_RETURN_IF_ERROR(q_.SetTrainedBias(t.slot, t.bias.detach()));
    }
    return OkStatus();
  }

  ScriptQuantizer& q_;
  const TensorDataset& data_;
  const ScriptQatOptions& o_;
  const pipeline::QatOptions& qat_;
  Loss loss_ = Loss::kAuto;
  std::vector<TrainedLayer> layers_;
  std::unique_ptr<Adam> adam_;
  std::vector<double> losses_;
  int start_ = 0;
};

}  // namespace

StatusOr<pipeline::JobReport::Training> RunScriptQat(ScriptQuantizer& quantizer,
                                                     const TensorDataset& data,
                                                     const ScriptQatOptions& options) {
  if (options.qat.steps < 1) {
    return QatError(StatusCode::kInvalidArgument, "spec.qat.steps", "must be at least 1");
  }
  Trainer trainer(quantizer, data, options);
  return trainer.Run();
}

}  // namespace quantd::torchscript
