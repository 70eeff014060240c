#include "worker/algo/block_qat.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "worker/qat/adam.h"
#include "worker/qat/trainable_weight.h"
#include "worker/quant/fake_quant.h"

namespace quantd::algo {
namespace {

struct TrainedLinear {
  models::Linear* linear = nullptr;
  at::Tensor float_weight;
  at::Tensor float_bias;
  qat::TrainableWeight weight;
  at::Tensor bias;  // trained bias, or undefined
};

Status QatError(StatusCode code, const std::string& field, const std::string& why) {
  return Status(code, field + ": " + why, "INVALID_QAT").AddViolation(field, why);
}

// The samples of step `t` (0-based): each epoch draws every sample once, in
// an order that depends on the seed, the block and the epoch only.
at::Tensor BatchIndices(uint64_t seed, int64_t block, int64_t t, int64_t batch, int64_t n) {
  const int64_t per_epoch = (n + batch - 1) / batch;
  const int64_t epoch = t / per_epoch;
  const int64_t k = t % per_epoch;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(
      seed * 1000003ULL + static_cast<uint64_t>(block) * 65537ULL + static_cast<uint64_t>(epoch));
  const at::Tensor perm = at::randperm(n, gen, at::TensorOptions().dtype(at::kLong));
  return perm.slice(0, k * batch, std::min(n, (k + 1) * batch));
}

}  // namespace

Status BlockQat::Apply(pipeline::BlockAlgorithmContext& ctx) {
  models::DecoderBlock& block = ctx.block;
  if (!ctx.inputs.defined() || !ctx.float_outputs.defined() || ctx.inputs.size(0) == 0) {
    return QatError(StatusCode::kFailedPrecondition, "spec.calibration.dataset_uri",
                    "quantization-aware training of a language model trains on the calibration "
                    "samples");
  }
  std::vector<TrainedLinear> trained;
  std::vector<std::string> refused;
  for (models::Linear* linear : block.linears()) {
    const pipeline::LayerPlan plan = ctx.planner(linear->name(), linear->info().type);
    if (!plan.weight) continue;
    const at::Tensor w = linear->weight();
    QD_ASSIGN_OR_RETURN(quant::QParams qp, quant::ComputeQParams(w, *plan.weight));
    auto tw = qat::TrainableWeight::Create(w, *plan.weight, std::move(qp), options_.learn_scales,
                                           linear->name());
    if (!tw.ok()) {
      refused.push_back(linear->name() + " (" + quant::DescribeSpec(*plan.weight) + ")");
      continue;
    }
    TrainedLinear t{linear, w, linear->bias(), *std::move(tw), at::Tensor()};
    if (options_.train_biases && linear->bias().defined() && !plan.bias) {
      t.bias = linear->bias().detach().clone().set_requires_grad(true);
    }
    trained.push_back(std::move(t));
  }
  if (!refused.empty()) {
    std::string list;
    for (const auto& r : refused) list += (list.empty() ? "" : ", ") + r;
    return QatError(StatusCode::kInvalidArgument, "spec.qat.learn_scales",
                    "learned scales need integer per-tensor or per-channel weights; not " + list);
  }
  if (trained.empty()) return OkStatus();

  std::vector<at::Tensor> params;
  for (const TrainedLinear& t : trained) {
    for (const at::Tensor& p : t.weight.Parameters()) params.push_back(p);
    if (t.bias.defined()) params.push_back(t.bias);
  }
  qat::Adam adam(std::move(params));
  const int64_t n = ctx.inputs.size(0);
  const int64_t batch = std::min<int64_t>(std::max(1, options_.batch_size), n);
  const int steps = options_.steps;
  double first = 0, last_sum = 0;
  int last_count = 0;
  const int tail = std::max(1, steps / 10);
  for (int step = 1; step <= steps; ++step) {
    if (ctx.observer.CancelRequested()) return CancelledError("cancelled");
    const at::Tensor idx =
        BatchIndices(options_.seed, block.index(), step - 1, batch, n).to(ctx.inputs.device());
    const at::Tensor x = ctx.inputs.index_select(0, idx);
    const at::Tensor ref = ctx.float_outputs.index_select(0, idx).to(at::kFloat).detach();
    for (TrainedLinear& t : trained) {
      QD_ASSIGN_OR_RETURN(t.linear->weight(), t.weight.Forward());
      if (t.bias.defined()) t.linear->bias() = t.bias;
    }
    at::Tensor loss;
    {
      at::AutoGradMode grad(true);
      QD_ASSIGN_OR_RETURN(at::Tensor y, block.Forward(x));
      const at::Tensor d = y.to(at::kFloat) - ref;
      loss = d.pow(2).sum() / ref.pow(2).sum().clamp_min(1e-30);
    }
    const double value = loss.item<double>();
    if (!std::isfinite(value)) {
      return QatError(
          StatusCode::kFailedPrecondition, "spec.qat.learning_rate",
          "the loss is no longer finite (" + std::to_string(value) +
              "): training diverged (lower the learning rate) or the data holds NaN or infinity");
    }
    const double lr = qat::CosineLearningRate(options_.learning_rate, step, steps);
    adam.ZeroGrad();
    {
      at::AutoGradMode grad(true);
      loss.backward();
    }
    adam.Step(lr);
    if (step == 1) first = value;
    if (step > steps - tail) {
      last_sum += value;
      ++last_count;
    }
    if (ctx.progress) {
      char msg[160];
      std::snprintf(msg, sizeof(msg), "qat block %lld: step %d of %d: loss %.5g, lr %.3g",
                    static_cast<long long>(block.index() + 1), step, steps, value, lr);
      ctx.progress(static_cast<double>(step) / steps, msg,
                   pipeline::TrainingStepInfo{step, steps, value, lr});
    }
  }
  for (TrainedLinear& t : trained) {
    const std::string& name = t.linear->name();
    QD_ASSIGN_OR_RETURN(at::Tensor fake, t.weight.Final());
    t.linear->weight() = fake.detach();
    if (t.bias.defined()) {
      t.linear->bias() = t.bias.detach();
    } else if (t.float_bias.defined()) {
      t.linear->bias() = t.float_bias;
    }
    ctx.quantized_weights[name] = t.weight.FinalQParams();
    ctx.float_weights[name] = t.float_weight;
  }
  char line[200];
  std::snprintf(line, sizeof(line),
                "qat block %lld: %d steps, block output relative squared error %.4g at the first "
                "step, %.4g over the last tenth",
                static_cast<long long>(block.index() + 1), steps, first, last_sum / last_count);
  ctx.observer.OnLog(pipeline::LogLevel::kInfo, line);
  return OkStatus();
}

}  // namespace quantd::algo
