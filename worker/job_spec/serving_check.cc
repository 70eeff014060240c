#include "worker/job_spec/serving_check.h"

#include <algorithm>
#include <string>
#include <utility>

#include "worker/config/presets.h"
#include "worker/export/module_names.h"
#include "worker/export/serving_target.h"
#include "worker/job_spec/config_proto.h"

namespace quantd::job_spec {

namespace {

namespace pb = quantd::v1;
using exporter::ServedLinear;

std::string SourceField(const pb::QuantizationSettings& q) {
  switch (q.source_case()) {
    case pb::QuantizationSettings::kConfig:
      return "spec.quantization.config";
    case pb::QuantizationSettings::kQuarkJson:
      return "spec.quantization.quark_json";
    default:
      return "spec.quantization.scheme";
  }
}

// Without the model's shapes: each config entry as one layer of its own.
std::vector<ServedLinear> ServedEntries(const config::QuantConfig& c) {
  std::vector<ServedLinear> out;
  auto add = [&out](const std::string& name, const config::LayerQuantConfig& l, bool kv) {
    if (l.empty()) return;
    ServedLinear s;
    s.specs = {name, l.weight, l.bias, l.input_tensors, l.output_tensors};
    s.kv_cache_output = kv && l.output_tensors.has_value();
    out.push_back(std::move(s));
  };
  add("global_quant_config", c.global_quant_config, false);
  for (const auto& t : c.layer_type_quant_config)
    add("layer_type_quant_config." + t.layer_type, t.config, false);
  // A reference config keeps its KV cache in layer_quant_config too (on
  // the kv_cache_quant_config globs, or on k/v projections when it has no
  // kv_cache_quant_config).
  for (const auto& n : c.layer_quant_config) {
    const bool kv_glob =
        c.kv_cache_quant_config.empty()
            ? exporter::EndsWith(n.pattern, "k_proj") || exporter::EndsWith(n.pattern, "v_proj")
            : std::any_of(c.kv_cache_quant_config.begin(), c.kv_cache_quant_config.end(),
                          [&](const auto& kv) { return kv.pattern == n.pattern; });
    add("layer_quant_config." + n.pattern, n.config, kv_glob);
  }
  for (const auto& n : c.kv_cache_quant_config)
    add("kv_cache_quant_config." + n.pattern, n.config, true);
  return out;
}

std::vector<ServedLinear> Served(const config::QuantConfig& c,
                                 const std::optional<std::vector<config::LayerInfo>>& layers) {
  return layers ? exporter::ServedLinearsOf(c, *layers) : ServedEntries(c);
}

// The presets vLLM serves as hf_quark for this model with the job's other
// quantization settings (group size, excludes, FP8 KV cache).
std::string ServedPresets(exporter::ExportFormat format, const pb::QuantizationSettings& q,
                          const std::optional<std::vector<config::LayerInfo>>& layers,
                          const Deadline& deadline) {
  std::string out;
  bool stopped = false;
  for (const std::string& name : config::PresetNames()) {
    if (deadline.Expired()) {
      stopped = true;
      break;
    }
    pb::QuantizationSettings s = q;
    s.clear_algorithms();
    s.set_scheme(name);
    StatusOr<config::QuantConfig> c = config::ResolveQuantizationSettings(s);
    if (!c.ok()) continue;
    if (!exporter::VllmRefusals(format, Served(*c, layers)).empty()) continue;
    out += (out.empty() ? "" : ", ") + name;
  }
  const std::string as = std::string(" as ") + exporter::ExportFormatName(format);
  if (stopped)
    return "trying the presets for this model stopped at the check's budget of " +
           std::to_string(deadline.budget_ms()) + " ms" +
           (out.empty() ? "" : "; presets vLLM serves" + as + ": " + out);
  return out.empty() ? "no preset serves this model in vLLM" + as
                     : "presets vLLM serves for this model" + as + ": " + out;
}

}  // namespace

std::string FormatNotServed(exporter::ExportFormat format) {
  return "target vllm: " + exporter::VllmRefusals(format, {}).front();
}

std::vector<FieldViolation> CheckServingTarget(
    const pb::JobSpec& spec, const config::QuantConfig& resolved,
    const std::vector<exporter::ExportFormat>& formats,
    const std::optional<std::vector<config::LayerInfo>>& layers, const Deadline& deadline) {
  std::vector<FieldViolation> out;
  if (spec.export_().target() != pb::SERVING_TARGET_VLLM) return out;
  if (spec.export_().formats().empty())
    out.push_back({"spec.export.formats",
                   "target vllm: the default export is hf_fake_quantized, which vLLM does not "
                   "serve; ask for hf_quark or compressed_tensors"});
  const std::vector<ServedLinear> served = Served(resolved, layers);
  for (exporter::ExportFormat format : formats) {
    const std::vector<std::string> refusals = exporter::VllmRefusals(format, served);
    if (refusals.empty()) continue;
    std::string why = std::string("target vllm: vLLM cannot serve this as ") +
                      exporter::ExportFormatName(format) + ": ";
    for (size_t i = 0; i < refusals.size(); ++i) why += (i ? "; " : "") + refusals[i];
    out.push_back({SourceField(spec.quantization()),
                   why + ". " + ServedPresets(format, spec.quantization(), layers, deadline)});
  }
  return out;
}

}  // namespace quantd::job_spec
