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
#include "worker/qat/adam.h"
#include "worker/qat/trainable_weight.h"
#include "worker/quant/spec.h"

namespace quantd::torchscript {
namespace {

namespace fs = std::filesystem;
using Loss = pipeline::QatOptions::Loss;
using Clock = std::chrono::steady_clock;

constexpr char kCheckpointFile[] = "qat_checkpoint.safetensors";
constexpr char kCheckpointVersion[] = "1";
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
  qat::TrainableWeight weight;
  at::Tensor bias;  // trained bias, or undefined
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
      const double lr = qat::CosineLearningRate(qat_.learning_rate, step, qat_.steps);
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
      const quant::QuantSpec spec = *WithLayerAxes(l.plan.weight, l.layer.type);
      auto w = qat::TrainableWeight::Create(l.float_weight, spec, l.weight.qparams(),
                                            qat_.learn_scales, l.layer.name);
      if (!w.ok()) {
        refused.push_back(l.layer.name + " (" + quant::DescribeSpec(spec) + ")");
        continue;
      }
      TrainedLayer t{i, *std::move(w), at::Tensor()};
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
      for (const at::Tensor& p : t.weight.Parameters()) params.push_back(p);
      if (t.bias.defined()) params.push_back(t.bias);
    }
    adam_ = std::make_unique<qat::Adam>(std::move(params));
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
      QD_ASSIGN_OR_RETURN(weights[t.slot], t.weight.Forward());
      biases[t.slot] = t.bias;
    }
    QD_ASSIGN_OR_RETURN(at::Tensor out, q_.ForwardTraining(weights, biases, inputs));
    QD_ASSIGN_OR_RETURN(at::Tensor loss, LossOf(out, reference));
    const double value = loss.item<double>();
    if (!std::isfinite(value)) {
      return QatError(
          StatusCode::kFailedPrecondition, "spec.qat.learning_rate",
          "the loss is no longer finite (" + std::to_string(value) +
              "): training diverged (lower the learning rate) or the data holds NaN or infinity");
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
      QD_ASSIGN_OR_RETURN(at::Tensor fake, t.weight.Final());
      QD_RETURN_IF_ERROR(q_.SetFittedWeight(t.slot, fake, t.weight.FinalQParams()));
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
  std::unique_ptr<qat::Adam> adam_;
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
