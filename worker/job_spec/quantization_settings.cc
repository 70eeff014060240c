#include "worker/job_spec/quantization_settings.h"

#include <memory>
#include <utility>

#include "worker/config/quark_json.h"
#include "worker/job_spec/config_proto.h"

namespace quantd::job_spec {

pipeline::LayerPlanner PlannerFor(config::QuantConfig c) {
  auto shared = std::make_shared<const config::QuantConfig>(std::move(c));
  return [shared](const std::string& name, const std::string& type) {
    pipeline::LayerPlan plan;
    const config::ResolvedLayer r = config::ResolveLayer(*shared, name, type);
    if (!r.quantized) return plan;
    plan.weight = r.config.weight;
    plan.bias = r.config.bias;
    plan.input = r.config.input_tensors;
    plan.output = r.config.output_tensors;
    return plan;
  };
}

StatusOr<ResolvedQuantization> ResolveQuantization(const quantd::v1::QuantizationSettings& s) {
  QD_ASSIGN_OR_RETURN(config::QuantConfig c, config::ResolveQuantizationSettings(s));
  return ResolveQuantization(s, std::move(c));
}

ResolvedQuantization ResolveQuantization(const quantd::v1::QuantizationSettings& s,
                                         config::QuantConfig c) {
  ResolvedQuantization r;
  r.description = config::DescribeSettings(s, c);
  for (const auto& kv : c.kv_cache_quant_config) {
    if (!kv.config.output_tensors) continue;
    if (!r.kv_cache) {
      r.kv_cache = kv.config.output_tensors;
    } else if (*r.kv_cache != *kv.config.output_tensors) {
      // Different specs per glob: the planner applies each to its layers.
      r.kv_cache.reset();
      break;
    }
  }
  if (s.fp8_kv_cache()) {
    // Static per-tensor FP8 e4m3 on the k/v projection outputs, as the
    // reference's FP8 KV-cache config.
    quant::QuantSpec kv;
    kv.dtype = quant::DataType::kFp8E4M3;
    kv.qscheme = quant::QScheme::kPerTensor;
    r.kv_cache = kv;
  }
  r.min_kv_scale = static_cast<float>(c.min_kv_scale);
  r.planner = PlannerFor(c);
  r.config = std::move(c);
  return r;
}

}  // namespace quantd::job_spec
