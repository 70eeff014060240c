#include "worker/export/hf/hf_quark.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "worker/common/cancellation.h"
#include "worker/config/quant_config.h"
#include "worker/config/quark_json.h"
#include "worker/export/export_support.h"
#include "worker/export/hf/hf_files.h"
#include "worker/export/hf/quantized_safetensors.h"
#include "worker/export/hf/quark_config.h"
#include "worker/export/hf/quark_tensors.h"
#include "worker/export/module_names.h"
#include "worker/io/safetensors/tensor_io.h"
#include "worker/models/layer_shapes.h"

namespace quantd::exporter {

namespace fs = std::filesystem;
using nlohmann::json;
using quant::QuantSpec;

namespace {

Status Unsupported(const std::string& msg) {
  return Status(StatusCode::kUnimplemented, "hf_quark: " + msg, "FEATURE_NOT_BUILT");
}

Status CheckLayers(const QuantizedModel& model) {
  QD_RETURN_IF_ERROR(CheckExportSupport(ExportFormat::kHfQuark, ExportLayerSpecsOf(model)));
  std::set<std::string> conv1d;
  for (const auto& l : models::ListLinearLayers(model.config()))
    if (l.transposed_in_checkpoint) conv1d.insert(l.name);
  for (const QuantizedLayer& layer : model.layers()) {
    if (layer.weight && conv1d.count(layer.name))
      return Unsupported(layer.name + ": GPT-2 Conv1D weights have no quark layout");
    for (const auto* a : {&layer.input, &layer.output}) {
      if (*a && !(*a)->spec.is_dynamic &&
          (!(*a)->static_qparams || !(*a)->static_qparams->scale.defined()))
        return InternalError("hf_quark: " + layer.name +
                             " has a static activation quantizer without a calibrated scale");
    }
  }
  return OkStatus();
}

Status Write(ShardedSafetensorsWriter& w, const std::string& name, const StoredTensor& t) {
  return WriteTensor(w, "hf_quark: ", name, t.tensor, t.dtype);
}

// input_scale / output_scale (+ zero point for integers) of one quantizer.
Status WriteActivation(ShardedSafetensorsWriter& w, const std::string& prefix,
                       const ActivationQuantizer& a, double min_scale) {
  auto stored = EncodeQuarkActivation(a.spec, *a.static_qparams, min_scale);
  if (!stored.ok()) return Status(stored.status()).Prepend("hf_quark: " + prefix + ": ");
  QD_RETURN_IF_ERROR(Write(w, prefix + "_scale", stored->scale));
  if (!stored->zero_point.defined()) return OkStatus();
  return Write(w, prefix + "_zero_point", stored->zero_point);
}

// The job's config as it is written into the export: the reference
// toolkit's layout, which is also what vLLM's Quark loader reads
// (docs/export.md, "hf-quark in vLLM"):
//  - each kv_cache_quant_config glob is also a layer_quant_config entry
//    holding the k/v layers' whole config (vLLM finds the KV-cache spec
//    there and refuses a kv_cache_group it cannot find); one entry per
//    layer name where the layers of a glob differ;
//  - `exclude` names each Linear left in float exactly (vLLM compares names,
//    it does not expand globs or prefixes); "re:" entries stay as they are.
//    A Linear the config quantizes but the job left in float (an expert kept
//    float, CalibrationOptions::keep_starved_experts_float) is named too.
config::QuantConfig ExportedConfig(const QuantizedModel& model) {
  config::QuantConfig c = model.quant_config();
  std::vector<config::NamedLayerQuantConfig> kv_entries;
  for (const config::NamedLayerQuantConfig& kv : c.kv_cache_quant_config) {
    std::vector<config::NamedLayerQuantConfig> matched;
    for (const QuantizedLayer& l : model.layers()) {
      if (!l.output || !config::GlobMatch(kv.pattern, l.name)) continue;
      config::LayerQuantConfig lc;
      lc.weight = l.weight;
      lc.bias = l.bias;
      if (l.input) lc.input_tensors = l.input->spec;
      lc.output_tensors = l.output->spec;
      matched.push_back({l.name, lc});
    }
    if (matched.empty()) continue;
    const bool uniform = std::all_of(matched.begin(), matched.end(), [&](const auto& m) {
      return m.config == matched.front().config;
    });
    if (uniform) {
      kv_entries.push_back({kv.pattern, matched.front().config});
    } else {
      kv_entries.insert(kv_entries.end(), matched.begin(), matched.end());
    }
  }
  // The KV entries first: the first matching glob wins, in quantd and vLLM.
  for (const auto& e : c.layer_quant_config) {
    const bool replaced = std::any_of(kv_entries.begin(), kv_entries.end(),
                                      [&](const auto& k) { return k.pattern == e.pattern; });
    if (!replaced) kv_entries.push_back(e);
  }
  c.layer_quant_config = std::move(kv_entries);

  std::vector<std::string> exclude;
  for (const std::string& e : c.exclude)
    if (e.rfind("re:", 0) == 0) exclude.push_back(e);
  for (const models::LinearLayerInfo& info : models::ListLinearLayers(model.config())) {
    const bool excluded = std::any_of(c.exclude.begin(), c.exclude.end(), [&](const auto& e) {
      return e.rfind("re:", 0) != 0 && config::ExcludeMatch(e, info.name);
    });
    const bool kept_float = model.FindLayer(info.name) == nullptr &&
                            config::ResolveLayer(c, info.name, info.type).quantized;
    if (excluded || kept_float) exclude.push_back(info.name);
  }
  c.exclude = std::move(exclude);
  return c;
}

// The KV-cache globs, as the reference writes them: kv_cache_quant_config's,
// or for a reference config that keeps its KV cache in layer_quant_config,
// the entries there with a static output spec on k/v projections. An output
// quantizer on every Linear (the o_fp8 schemes) is no KV cache.
std::vector<std::string> KvCacheGroup(const QuantizedModel& model,
                                      const config::QuantConfig& exported) {
  std::vector<std::string> kv;
  for (const auto& e : exported.kv_cache_quant_config) kv.push_back(e.pattern);
  if (!kv.empty()) return kv;
  for (const auto& e : exported.layer_quant_config) {
    if (!e.config.output_tensors || e.config.output_tensors->is_dynamic) continue;
    const bool on_kv = std::any_of(model.layers().begin(), model.layers().end(), [&](const auto& l) {
      return IsKvProjection(l.name) && config::GlobMatch(e.pattern, l.name);
    });
    if (on_kv) kv.push_back(e.pattern);
  }
  return kv;
}

json QuarkQuantizationConfig(const QuantizedModel& model, const HfQuarkExportOptions& opt) {
  const config::QuantConfig exported = ExportedConfig(model);
  json q = config::QuarkJsonForExport(exported, "real_quantized");
  q["quant_method"] = "quark";
  QuarkExportSection section;
  section.kv_cache_group = KvCacheGroup(model, exported);
  section.min_kv_scale = opt.min_kv_scale;
  q["export"] = QuarkExportJson(section);
  return q;
}

}  // namespace

StatusOr<Artifact> ExportHfQuark(const QuantizedModel& model, const HfQuarkExportOptions& opt,
                                 const ExportProgress& progress) {
  QD_RETURN_IF_ERROR(CheckLayers(model));
  QuantizedSafetensorsLayout layout;
  layout.format = ExportFormat::kHfQuark;
  layout.who = "hf_quark: ";
  layout.quantization_config = QuarkQuantizationConfig(model, opt);
  layout.write_weight = [&model](ShardedSafetensorsWriter& writer, const std::string& module,
                                 const at::Tensor& value, const QuantizedLayer& layer) -> Status {
    QD_ASSIGN_OR_RETURN(quant::QParams qp, model.WeightQParams(module));
    auto stored = EncodeQuarkWeight(value, *layer.weight, qp);
    if (!stored.ok()) return Status(stored.status()).Prepend(module + ": ");
    QD_RETURN_IF_ERROR(Write(writer, module + ".weight", stored->weight));
    if (stored->scale.defined())
      QD_RETURN_IF_ERROR(Write(writer, module + ".weight_scale", stored->scale));
    if (stored->zero_point.defined())
      QD_RETURN_IF_ERROR(Write(writer, module + ".weight_zero_point", stored->zero_point));
    return OkStatus();
  };
  layout.write_module_extras = [&opt](ShardedSafetensorsWriter& writer, const std::string& module,
                                      const QuantizedLayer& layer) -> Status {
    if (layer.input && !layer.input->spec.is_dynamic)
      QD_RETURN_IF_ERROR(WriteActivation(writer, module + ".input", *layer.input, 0.0));
    if (layer.output && !layer.output->spec.is_dynamic) {
      const double floor = IsKvProjection(module) ? opt.min_kv_scale : 0.0;
      QD_RETURN_IF_ERROR(WriteActivation(writer, module + ".output", *layer.output, floor));
    }
    return OkStatus();
  };
  return ExportQuantizedSafetensors(
      model, layout, {opt.output_dir, opt.overwrite, opt.output_owner, opt.max_shard_bytes},
      progress);
}

StatusOr<Artifact> ExportHfFakeQuantized(const QuantizedModel& model,
                                         const HfFakeQuantExportOptions& options,
                                         const ExportProgress& progress) {
  HfFakeQuantExportOptions o = options;
  if (o.model_dir.empty()) o.model_dir = model.model_dir();
  if (o.quantization_config.is_null())
    o.quantization_config = config::QuarkJsonForExport(model.quant_config(), "fake_quantized");
  if (!o.tie_word_embeddings) o.tie_word_embeddings = model.config().tie_word_embeddings;
  return ExportHfFakeQuantized(
      model.original(), [&model](const std::string& name) { return model.Load(name); }, o,
      progress);
}

}  // namespace quantd::exporter
