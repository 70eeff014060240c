#include "worker/runner/job_translation.h"

#include "worker/job_spec/export_format.h"

namespace quantd::worker {
namespace {

quantd::v1::Stage StageToProto(pipeline::Stage s) {
  switch (s) {
    case pipeline::Stage::kLoad:
      return quantd::v1::LOAD;
    case pipeline::Stage::kCalibrate:
      return quantd::v1::CALIBRATE;
    case pipeline::Stage::kAlgorithms:
      return quantd::v1::ALGORITHMS;
    case pipeline::Stage::kTrain:
      return quantd::v1::TRAIN;
    case pipeline::Stage::kQuantize:
      return quantd::v1::QUANTIZE;
    case pipeline::Stage::kEvaluate:
      return quantd::v1::EVALUATE;
    case pipeline::Stage::kExport:
      return quantd::v1::EXPORT;
  }
  return quantd::v1::STAGE_UNSPECIFIED;
}

void PerplexityToProto(const eval::PerplexityResult& p, const std::string& dataset_uri,
                       quantd::v1::PerplexityResult* out) {
  out->set_perplexity(p.ppl);
  out->set_mean_nll(p.tokens > 0 ? p.nll_sum / p.tokens : 0);
  auto* proto = out->mutable_protocol();
  proto->set_dataset_uri(dataset_uri);
  proto->set_n_ctx(static_cast<int32_t>(p.n_ctx));
  proto->set_windows(static_cast<int32_t>(p.windows));
  proto->set_tokens(p.tokens);
  proto->set_description(p.protocol);
}

}  // namespace

quantd::v1::Progress ToProto(const pipeline::ProgressInfo& p) {
  quantd::v1::Progress out;
  out.set_stage(StageToProto(p.stage));
  out.set_block(p.block);
  out.set_block_count(p.block_count);
  out.set_percent(p.percent);
  out.set_message(p.message);
  if (p.training) {
    auto* t = out.mutable_training();
    t->set_step(p.training->step);
    t->set_steps(p.training->steps);
    t->set_loss(p.training->loss);
    t->set_learning_rate(p.training->learning_rate);
  }
  return out;
}

quantd::v1::BlockMetrics ToProto(const pipeline::BlockReport& b) {
  quantd::v1::BlockMetrics out;
  out.set_block(b.block);
  out.set_block_count(b.block_count);
  if (b.output_rel_mse) out.set_output_rel_mse(*b.output_rel_mse);
  out.set_seconds(b.seconds);
  out.set_algorithm_seconds(b.algorithm_seconds);
  out.set_device_peak_allocated_bytes(b.device_peak_allocated_bytes);
  out.set_device_peak_reserved_bytes(b.device_peak_reserved_bytes);
  for (const auto& l : b.layers) {
    auto* lm = out.add_layers();
    lm->set_name(l.name);
    lm->set_weight_format(l.weight_format);
    lm->set_input_format(l.input_format);
    lm->set_output_format(l.output_format);
    lm->set_weight_sqnr_db(l.weight_sqnr_db);
    lm->set_excluded(l.excluded);
    lm->set_input_min(l.input_min);
    lm->set_input_max(l.input_max);
    for (double e : l.sensitivity_relative_mse) lm->add_sensitivity_relative_mse(e);
  }
  for (const auto& e : b.experts) {
    auto* em = out.add_experts();
    em->set_expert(e.expert);
    em->set_calibration_tokens(e.calibration_tokens);
    em->set_below_floor(e.below_floor);
    em->set_kept_float(e.kept_float);
  }
  return out;
}

namespace {

void TensorEvaluationToProto(const pipeline::TensorEvaluation& t, quantd::v1::Metrics& m) {
  m.set_evaluation_samples(t.samples);
  if (t.float_top1_accuracy) m.set_float_top1_accuracy(*t.float_top1_accuracy);
  if (t.quantized_top1_accuracy) m.set_quantized_top1_accuracy(*t.quantized_top1_accuracy);
  m.set_output_sqnr_db(t.output_sqnr_db);
  m.set_output_relative_mse(t.output_relative_mse);
  if (t.float_target_mse) m.set_float_target_mse(*t.float_target_mse);
  if (t.quantized_target_mse) m.set_quantized_target_mse(*t.quantized_target_mse);
  for (const pipeline::BucketReport& b : t.buckets) {
    auto* pb = m.add_buckets();
    pb->set_bucket(b.bucket);
    pb->set_samples(b.samples);
    pb->set_output_sqnr_db(b.output_sqnr_db);
    pb->set_output_relative_mse(b.output_relative_mse);
    if (b.float_target_mse) pb->set_float_target_mse(*b.float_target_mse);
    if (b.quantized_target_mse) pb->set_quantized_target_mse(*b.quantized_target_mse);
  }
}

void AutoPrecisionToProto(const pipeline::AutoPrecisionReport& r,
                          quantd::v1::AutoPrecisionResult& out) {
  for (const std::string& c : r.candidates) out.add_candidates(c);
  for (const pipeline::AutoPrecisionRound& round : r.rounds) {
    auto* p = out.add_rounds();
    p->set_round(round.round);
    p->set_weight_bytes(round.weight_bytes);
    p->set_bits_per_weight(round.bits_per_weight);
    if (round.predicted_perplexity_increase)
      p->set_predicted_perplexity_increase(*round.predicted_perplexity_increase);
    if (round.predicted_kl_divergence)
      p->set_predicted_kl_divergence(*round.predicted_kl_divergence);
    p->set_perplexity(round.perplexity);
    p->set_perplexity_increase(round.perplexity_increase);
    if (round.kl_divergence_mean) p->set_kl_divergence_mean(*round.kl_divergence_mean);
    p->set_meets_budget(round.meets_budget);
    p->set_pareto(round.pareto);
    for (int n : round.layers_per_candidate) p->add_layers_per_candidate(n);
    if (round.cost) p->set_cost(*round.cost);
    if (round.predicted_accuracy_drop)
      p->set_predicted_accuracy_drop(*round.predicted_accuracy_drop);
    if (round.top1_accuracy) p->set_top1_accuracy(*round.top1_accuracy);
    if (round.accuracy_drop) p->set_accuracy_drop(*round.accuracy_drop);
  }
  out.set_chosen_round(r.chosen_round);
  out.set_budget_met(r.budget_met);
  out.set_float_perplexity(r.float_perplexity);
  if (r.float_top1_accuracy) out.set_float_top1_accuracy(*r.float_top1_accuracy);
  for (const auto& [layer, candidate] : r.layers) {
    auto* l = out.add_layers();
    l->set_layer(layer);
    l->set_candidate(candidate);
  }
  out.set_from_cache(r.from_cache);
  out.set_quark_json(r.quark_json);
}

}  // namespace

quantd::v1::JobResult ToProto(const pipeline::JobReport& r, const quantd::v1::JobSpec& spec) {
  quantd::v1::JobResult out;
  auto* m = out.mutable_metrics();
  const std::string& eval_uri = spec.evaluation().dataset_uri();
  if (r.float_perplexity)
    PerplexityToProto(*r.float_perplexity, eval_uri, m->mutable_float_perplexity());
  if (r.quantized_perplexity)
    PerplexityToProto(*r.quantized_perplexity, eval_uri, m->mutable_quantized_perplexity());
  if (r.kl_mean) m->set_kl_divergence_mean(*r.kl_mean);
  if (r.kl_high) m->set_kl_divergence_p99(*r.kl_high);
  if (r.top1_agreement) m->set_top1_agreement(*r.top1_agreement);
  for (const auto& b : r.blocks) *m->add_blocks() = ToProto(b);
  if (r.tensor_evaluation) TensorEvaluationToProto(*r.tensor_evaluation, *m);
  if (r.training) {
    auto* t = m->mutable_training();
    t->set_steps(r.training->steps);
    t->set_first_loss(r.training->first_loss);
    t->set_final_loss(r.training->final_loss);
    t->set_resumed_after_step(r.training->resumed_after_step);
    t->set_loss(r.training->loss);
  }
  m->set_float_model_bytes(r.float_model_bytes);
  m->set_quantized_model_bytes(r.quantized_model_bytes);
  m->set_frozen_linear_float_bytes(r.frozen_linear_float_bytes);
  m->set_frozen_linear_bytes(r.frozen_linear_bytes);
  for (const auto& t : r.stage_timings) {
    auto* st = m->add_stage_timings();
    st->set_stage(StageToProto(t.stage));
    st->set_seconds(t.seconds);
  }
  if (r.auto_precision) AutoPrecisionToProto(*r.auto_precision, *out.mutable_auto_precision());
  for (const auto& a : r.artifacts) {
    auto* pa = out.add_artifacts();
    pa->set_format(job_spec::ExportFormatToProto(a.format));
    pa->set_uri("file://" + a.path);
    pa->set_bytes(a.bytes);
    pa->set_sha256(a.sha256);
    pa->set_accepted(a.accepted);
    for (const std::string& c : a.consumers) pa->add_consumers(c);
    for (const auto& f : a.files) {
      auto* pf = pa->add_files();
      pf->set_path(f.path);
      pf->set_bytes(f.bytes);
      pf->set_sha256(f.sha256);
    }
  }
  return out;
}

}  // namespace quantd::worker
