#include "worker/pipeline/block_step.h"

#include <optional>
#include <set>
#include <utility>

#include "worker/algo/activation_quant.h"
#include "worker/common/torch_compat.h"
#include "worker/models/matmul_dtype.h"
#include "worker/pipeline/block_algorithm.h"
#include "worker/pipeline/job_metrics.h"
#include "worker/pipeline/pipeline_quantized_model.h"
#include "worker/pipeline/weight_quantizer.h"

namespace quantd::pipeline {
namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// The calibration passes' product dtype, when not the weights' own.
std::optional<at::ScalarType> CalibrationMatmulDtype(const JobOptions& opt) {
  if (opt.calibration.compute_dtype == opt.model_options.dtype) return std::nullopt;
  return opt.calibration.compute_dtype;
}

}  // namespace

Status JobCancelled() { return Status(StatusCode::kCancelled, "cancelled", "CANCELLED"); }

Status JobCancelled(const Status& from) {
  return Status(StatusCode::kCancelled, from.message(), "CANCELLED");
}

BlockWork BlockStep::Begin(int index, int n) const {
  BlockWork w;
  w.index = index;
  w.start = SteadyClock::now();
  w.stages = StageTimes(opt_.model_options.device);
  torch_compat::ResetAllocatorPeaks(opt_.model_options.device);
  w.report.block = index + 1;
  w.report.block_count = n;
  return w;
}

Status BlockStep::Transform(BlockWork& w) const {
  if (opt_.model_transform) {
    QD_RETURN_IF_ERROR(opt_.model_transform->TransformBlock(*w.block));
    w.stages.Mark("transform");
  }
  return OkStatus();
}

Status BlockStep::FloatForward(BlockWork& w, const at::Tensor& hidden) const {
  if (hidden.defined()) {
    models::MatmulDtypeScope dtype(CalibrationMatmulDtype(opt_));
    algo::ScopedHooks hooks;
    // Only calibration data makes an imatrix (without it the block metrics
    // run on evaluation windows).
    if (recipe_ && !opt_.calibration.dataset_path.empty()) ObserveImportance(w, hooks);
    w.block->TakeExpertTokenCounts();
    QD_ASSIGN_OR_RETURN(w.float_out, w.block->Forward(hidden));
    ReportExperts(w);
    w.stages.Mark("float forward");
  }
  return OkStatus();
}

// A mixture-of-experts block's routing of the calibration tokens, with a
// warning for each expert below the floor.
void BlockStep::ReportExperts(BlockWork& w) const {
  const std::vector<int64_t> counts = w.block->TakeExpertTokenCounts();
  const int64_t floor = opt_.calibration.min_expert_tokens;
  for (size_t e = 0; e < counts.size(); ++e) {
    ExpertReport r;
    r.expert = static_cast<int>(e);
    r.calibration_tokens = counts[e];
    r.below_floor = BelowExpertFloor(counts[e], floor);
    r.kept_float = r.below_floor && opt_.calibration.keep_starved_experts_float;
    if (r.below_floor) {
      obs_.OnLog(LogLevel::kWarning,
                 "block " + std::to_string(w.index + 1) + ": expert " + std::to_string(e) +
                     " was routed " + std::to_string(counts[e]) +
                     " calibration tokens, fewer than min_expert_tokens " + std::to_string(floor) +
                     (r.kept_float ? ": it stays in float"
                                   : ": GPTQ leaves its weights to round-to-nearest and its "
                                     "static activation scales are the widest of its peers'"));
    }
    w.report.experts.push_back(r);
  }
  KeepExpertsFloat(w.block->config(), w.index, w.report.experts, plans_);
}

void KeepExpertsFloat(const models::ModelConfig& config, int block,
                      const std::vector<ExpertReport>& report,
                      std::map<std::string, LayerPlan>& plans) {
  const models::MoeLayout moe = models::GetMoeLayout(config, block);
  for (const ExpertReport& r : report) {
    if (!r.kept_float || r.expert < 0 || static_cast<size_t>(r.expert) >= moe.experts.size())
      continue;
    const models::MoeLayout::Mlp& mlp = moe.experts[r.expert];
    for (const std::string* name : {&mlp.gate, &mlp.up, &mlp.down}) plans[*name] = LayerPlan{};
  }
}

// llama.cpp's imatrix statistics for the recipe's weights of the block: the
// squared activations entering each, summed per column over the tokens.
void BlockStep::ObserveImportance(BlockWork& w, algo::ScopedHooks& hooks) const {
  for (models::Linear* linear : w.block->linears()) {
    if (recipe_->PlanOf(linear->name() + ".weight") == nullptr) continue;
    auto& slot = w.importance[linear->name()];  // map nodes stay put
    hooks.ObserveInput(*linear, [&slot](const at::Tensor& x) {
      const at::Tensor rows = x.reshape({-1, x.size(-1)}).to(at::kDouble);
      const at::Tensor sum2 = rows.mul(rows).sum(0);
      slot.first = slot.first.defined() ? slot.first.add(sum2) : sum2;
      slot.second += rows.size(0);
    });
  }
}

Status BlockStep::MeasureSensitivity(BlockWork& w, const at::Tensor& hidden) const {
  if (opt_.sensitivity.empty() || !hidden.defined() || !w.float_out.defined()) return OkStatus();
  models::MatmulDtypeScope dtype(CalibrationMatmulDtype(opt_));
  models::DecoderBlock& block = *w.block;
  for (models::Linear* linear : block.linears()) {
    if (!plans_.at(linear->name()).quantized()) continue;  // the job keeps it float
    std::vector<double>& errors = w.sensitivity[linear->name()];
    for (const SensitivityCandidate& c : opt_.sensitivity) {
      if (obs_.CancelRequested()) return JobCancelled();
      const std::string& target = linear->name();
      const LayerPlanner alone = [&](const std::string& name, const std::string& type) {
        return name == target ? c.planner(name, type) : LayerPlan{};
      };
      QD_ASSIGN_OR_RETURN(algo::SavedWeights saved, algo::QuantizeBlockWeights(block, alone));
      StatusOr<at::Tensor> out = [&]() -> StatusOr<at::Tensor> {
        QD_ASSIGN_OR_RETURN(algo::BlockInputQuantizers inputs,
                            algo::BlockInputQuantizers::Calibrate(block, hidden, alone));
        algo::ScopedHooks hooks;
        QD_RETURN_IF_ERROR(inputs.Install(block, hooks));
        return block.Forward(hidden);
      }();
      saved.Restore();
      if (!out.ok())
        return Status(out.status()).Prepend("sensitivity of " + target + " to " + c.name + ": ");
      errors.push_back(algo::RelativeMse(*out, w.float_out));
    }
  }
  w.stages.Mark("sensitivity");
  return OkStatus();
}

Status BlockStep::RunAlgorithms(BlockWork& w, const at::Tensor& hidden,
                                const AlgorithmProgress& progress) const {
  const int i = w.index;
  auto& block = w.block;
  BlockReport& br = w.report;
  // An expert left in float (KeepExpertsFloat) is left alone by the
  // algorithms too.
  const LayerPlanner planner = [this](const std::string& name, const std::string& type) {
    auto it = plans_.find(name);
    if (it != plans_.end() && !it->second.quantized()) return it->second;
    return opt_.planner(name, type);
  };
  BlockAlgorithmContext ctx{model_, *block, hidden, planner, obs_, {}, {}, {}, &w.stages};
  ctx.min_expert_tokens = opt_.calibration.min_expert_tokens;
  ctx.float_outputs = w.float_out;
  ctx.progress = progress;
  if (recipe_) {
    ctx.ggml_type = [this](const std::string& module) -> std::optional<gguf::GgmlType> {
      const gguf::RecipeTensorPlan* p = recipe_->PlanOf(module + ".weight");
      if (p == nullptr) return std::nullopt;
      return p->type;
    };
  }
  const auto algorithms_start = SteadyClock::now();
  models::MatmulDtypeScope dtype(CalibrationMatmulDtype(opt_));
  for (const auto& algo : opt_.block_algorithms) {
    if (obs_.CancelRequested()) return JobCancelled();
    Status s = algo->Apply(ctx);
    if (!s.ok())
      return s.code() == StatusCode::kCancelled
                 ? JobCancelled(s)
                 : s.Prepend(std::string(algo->name()) + ", block " + std::to_string(i + 1) + ": ");
  }
  if (!opt_.block_algorithms.empty()) {
    w.stages.Mark("algorithms");
    br.algorithm_seconds = SecondsSince(algorithms_start);
  }
  w.algorithm_qparams = std::move(ctx.quantized_weights);
  w.algorithm_group_index = std::move(ctx.weight_group_index);
  w.float_weights = std::move(ctx.float_weights);
  w.ggml_blocks = std::move(ctx.ggml_blocks);
  return OkStatus();
}

Status BlockStep::RoundWeights(BlockWork& w) const {
  NamedTensors& changed = w.tensors;
  for (models::Linear* linear : w.block->linears()) {
    const std::string weight_name = linear->name() + ".weight";
    if (const gguf::RecipeTensorPlan* rp = recipe_ ? recipe_->PlanOf(weight_name) : nullptr) {
      at::Tensor sum2, importance;
      float count = 0;
      if (auto it = w.importance.find(linear->name());
          it != w.importance.end() && it->second.second > 0) {
        sum2 = it->second.first.to(at::kCPU).to(at::kFloat);
        count = static_cast<float>(it->second.second);
        importance = gguf::ImportanceFromSums(sum2, count);
      }
      LayerReport lr;
      if (auto b = w.ggml_blocks.find(linear->name()); b != w.ggml_blocks.end()) {
        // GPTQ wrote the blocks (and rounded the weight to them).
        lr = DescribeGgufLayer(*linear, *rp, "gptq", w.float_weights.at(linear->name()));
        changed.emplace_back(GgmlBlocksKey(linear->name()), b->second);
      } else {
        QD_ASSIGN_OR_RETURN(lr, ApplyGgufRecipe(*linear, *recipe_, *rp, importance));
      }
      changed.emplace_back(weight_name, linear->weight());
      if (sum2.defined()) {
        changed.emplace_back(ImportanceSumKey(linear->name()), sum2);
        changed.emplace_back(ImportanceCountKey(linear->name()), at::full({1}, count, at::kFloat));
      }
      w.report.layers.push_back(std::move(lr));
      continue;
    }
    const LayerPlan& plan = plans_.at(linear->name());
    quant::QParams qp;
    LayerReport lr;
    const StoredLayerParams* kept = stored_ ? stored_->Find(linear->name()) : nullptr;
    at::Tensor group_index;
    if (kept != nullptr && kept->weight) {
      qp = *kept->weight;
      group_index = kept->weight_group_index;
      QD_ASSIGN_OR_RETURN(lr, QuantizeLinearWeightsWith(*linear, plan, qp, group_index));
    } else if (auto it = w.algorithm_qparams.find(linear->name());
               it != w.algorithm_qparams.end()) {
      qp = it->second;
      auto ref = w.float_weights.find(linear->name());
      lr = DescribeQuantizedLayer(*linear, plan,
                                  ref == w.float_weights.end() ? at::Tensor() : ref->second);
    } else {
      QD_ASSIGN_OR_RETURN(lr, QuantizeLinearWeights(*linear, plan, &qp));
    }
    if (plan.weight) {
      const auto float_bytes =
          static_cast<int64_t>(model_.weights().Find(linear->name() + ".weight")->nbytes);
      w.bytes_delta += RecordQuantizedWeight(linear->name(), linear->weight(), *plan.weight, qp,
                                             /*with_weight=*/true, float_bytes, changed);
      if (auto g = w.algorithm_group_index.find(linear->name());
          g != w.algorithm_group_index.end() && g->second.defined())
        group_index = g->second;
      if (group_index.defined())
        changed.emplace_back(WeightGroupIndexKey(linear->name()), group_index.to(at::kFloat));
    }
    if (plan.bias && linear->bias().defined())
      changed.emplace_back(linear->name() + ".bias", linear->bias());
    if (auto s = w.sensitivity.find(linear->name()); s != w.sensitivity.end())
      lr.sensitivity_relative_mse = s->second;
    w.report.layers.push_back(std::move(lr));
  }
  w.stages.Mark("round");
  if (opt_.model_transform || !opt_.block_algorithms.empty()) {
    // Transforms and algorithms may change any tensor of the block (norms
    // absorb scales), so the whole block is kept.
    std::set<std::string> seen;
    for (const auto& [name, t] : changed) seen.insert(name);
    for (auto& [name, t] : w.block->NamedTensors())
      if (!seen.count(name)) changed.emplace_back(name, *t);
  }
  return OkStatus();
}

Status BlockStep::QuantizedForward(BlockWork& w, at::Tensor& hidden) const {
  if (!hidden.defined()) return OkStatus();
  models::DecoderBlock& block = *w.block;
  models::MatmulDtypeScope dtype(CalibrationMatmulDtype(opt_));
  if (opt_.model_transform) QD_RETURN_IF_ERROR(opt_.model_transform->InstallOnline(block));
  // The block's static activation quantizers (inputs, outputs, KV cache),
  // calibrated on the quantized path, and what each layer observed.
  QD_ASSIGN_OR_RETURN(
      ActivationParams p,
      CalibrateBlockActivations(block, hidden, plans_, kv_, opt_.calibration.min_expert_tokens));
  // Scales a quantized checkpoint stored are kept (act_params_ has them).
  for (auto& [name, qp] : p.inputs) {
    const StoredLayerParams* kept = stored_ ? stored_->Find(name) : nullptr;
    if (kept == nullptr || !kept->input) act_params_.inputs[name] = qp;
  }
  for (auto& [name, qp] : p.outputs) {
    const StoredLayerParams* kept = stored_ ? stored_->Find(name) : nullptr;
    if (kept == nullptr || !kept->output) act_params_.outputs[name] = qp;
  }
  for (auto& lr : w.report.layers) {
    auto it = p.input_ranges.find(lr.name);
    if (it == p.input_ranges.end()) continue;
    lr.input_min = it->second.first;
    lr.input_max = it->second.second;
  }
  auto act_error = std::make_shared<Status>();
  QD_RETURN_IF_ERROR(InstallActivationQuantizers(block, plans_, act_params_, act_error));
  // The block's input is not read again: its output may take its place.
  QD_ASSIGN_OR_RETURN(at::Tensor quant_out, block.ForwardInPlace(hidden));
  if (!act_error->ok()) return *act_error;
  w.report.output_rel_mse = OutputRelMse(quant_out, w.float_out);
  w.stages.Mark("quantized forward");
  hidden = opt_.calibration.on_float_outputs ? w.float_out : quant_out;
  return OkStatus();
}

Status BlockStep::Persist(BlockWork& w) const {
  // The scratch store overlays the checkpoint, so a weight the checkpoint
  // stores transposed (GPT-2's Conv1D, [in, out]) is kept that way: the
  // quantized model and the exporters read it as they read the checkpoint.
  std::set<std::string> transposed;
  for (models::Linear* linear : w.block->linears()) {
    AddActivationParams(linear->name(), act_params_, w.tensors);
    if (linear->info().transposed_in_checkpoint) transposed.insert(linear->name() + ".weight");
  }
  for (auto& [name, t] : w.tensors)
    if (transposed.count(name) && t.dim() == 2) t = t.t().contiguous();
  // Written while the next block computes (ScratchStore::PutAsync).
  QD_RETURN_IF_ERROR(scratch_.PutAsync(BlockFileName(w.index), w.tensors));
  w.stages.Mark("scratch");
  return OkStatus();
}

void BlockStep::Finish(BlockWork& w) const {
  w.report.seconds = SecondsSince(w.start);
  if (auto a = torch_compat::DeviceAllocatorStats(opt_.model_options.device)) {
    w.report.device_peak_allocated_bytes = a->peak_allocated;
    w.report.device_peak_reserved_bytes = a->peak_reserved;
  }
}

}  // namespace quantd::pipeline
