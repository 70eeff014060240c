#include "worker/torchscript/script_quark_export.h"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "worker/config/quark_json.h"
#include "worker/export/export_support.h"
#include "worker/export/hf/quark_config.h"
#include "worker/export/hf/quark_tensors.h"
#include "worker/io/safetensors/safetensors_writer.h"
#include "worker/io/safetensors/tensor_io.h"
#include "worker/quant/spec.h"

namespace quantd::torchscript {
namespace {

using nlohmann::json;
using quant::QuantSpec;

// Why the weight of `l` has no layout here, or "".
std::string WeightProblem(const QuantizedLayer& l) {
  if (!l.plan.weight) return "";
  const QuantSpec s = *WithLayerAxes(l.plan.weight, l.layer.type);
  const Status held = exporter::CheckQuarkWeightSpec(s);
  if (!held.ok()) return held.message();
  if (l.float_weight.dim() <= 2) return "";
  if (exporter::IsPackedQuarkWeight(s)) {
    return "hf_quark packs only 2-D weights, so a " + l.layer.type +
           " weight is stored unpacked in its own shape: int8, uint8, fp8_e4m3, fp8_e5m2, "
           "float16 or bfloat16, not " +
           std::string(quant::DataTypeName(s.dtype));
  }
  if (s.qscheme == quant::QScheme::kPerGroup ||
      (s.qscheme == quant::QScheme::kPerChannel && quant::EffectiveChAxis(s) != 0)) {
    return "hf_quark stores a " + l.layer.type +
           " weight per tensor or per channel along axis 0 (its first dimension)";
  }
  return "";
}

std::string ActivationProblem(const quant_modules::ActivationQuantizer& q, bool input) {
  if (!q.enabled()) return "";
  const QuantSpec& s = *q.spec();
  const Status held =
      exporter::CheckExportSpec(exporter::ExportFormat::kHfQuark, s,
                                input ? quant::TensorRole::kInput : quant::TensorRole::kOutput);
  if (!held.ok()) return held.message();
  if (!s.is_dynamic && s.qscheme != quant::QScheme::kPerTensor)
    return "hf_quark stores one static activation scale per layer (per_tensor)";
  return "";
}

// The reference's module tree: a leaf (no children, or a quantized layer)
// by its tensors and quantizers; otherwise its children and own tensors.
json ModuleTree(const torch::jit::Module& m, const std::string& name,
                const std::map<std::string, const QuantizedLayer*>& layers) {
  json node = json::object();
  const auto layer = layers.find(name);
  const bool leaf = layer != layers.end() || m.named_children().size() == 0;
  if (!leaf) {
    for (const auto& child : m.named_children())
      node[child.name] = ModuleTree(child.value, name + "." + child.name, layers);
    for (const auto& p : m.named_parameters(false)) node[p.name] = name + "." + p.name;
    for (const auto& b : m.named_buffers(false)) node[b.name] = name + "." + b.name;
    return node;
  }
  node["name"] = name;
  node["type"] = ScriptModel::ShortClassName(m);
  for (const char* t : {"weight", "bias"}) {
    if (m.hasattr(t) && m.attr(t).isTensor()) node[t] = name + "." + t;
  }
  if (layer == layers.end()) return node;
  const QuantizedLayer& l = *layer->second;
  if (l.plan.weight)
    node["weight_quant"] = exporter::QuarkSpecJson(*WithLayerAxes(l.plan.weight, l.layer.type));
  if (l.input.enabled()) node["input_quant"] = exporter::QuarkSpecJson(*l.input.spec());
  if (l.output.enabled()) node["output_quant"] = exporter::QuarkSpecJson(*l.output.spec());
  return node;
}

Status Add(io::SafetensorsWriter& w, const std::string& name, const exporter::StoredTensor& t) {
  return io::AddTensor(w, name, t.tensor, t.dtype);
}

// weight (codes), weight_scale, weight_zero_point of a quantized layer.
Status AddWeight(io::SafetensorsWriter& w, const QuantizedLayer& l, const at::Tensor& value) {
  const QuantSpec spec = *WithLayerAxes(l.plan.weight, l.layer.type);
  quant::QParams qp = l.weight.qparams();
  at::Tensor matrix = value.to(at::kFloat);
  if (matrix.dim() > 2) {
    // [d0, rest]: per tensor, or per channel along axis 0 (WeightProblem).
    matrix = matrix.reshape({matrix.size(0), -1});
    if (spec.qscheme == quant::QScheme::kPerChannel) {
      qp.scale = qp.scale.reshape({-1});
      if (qp.zero_point.defined()) qp.zero_point = qp.zero_point.reshape({-1});
    }
  }
  QD_ASSIGN_OR_RETURN(exporter::QuarkStoredWeight stored,
                      exporter::EncodeQuarkWeight(matrix, spec, qp));
  if (value.dim() > 2) stored.weight.tensor = stored.weight.tensor.reshape(value.sizes());
  const std::string& n = l.layer.name;
  QD_RETURN_IF_ERROR(Add(w, n + ".weight", stored.weight));
  if (stored.scale.defined()) QD_RETURN_IF_ERROR(Add(w, n + ".weight_scale", stored.scale));
  if (stored.zero_point.defined())
    QD_RETURN_IF_ERROR(Add(w, n + ".weight_zero_point", stored.zero_point));
  return OkStatus();
}

Status AddActivation(io::SafetensorsWriter& w, const std::string& prefix,
                     const quant_modules::ActivationQuantizer& q) {
  if (!q.enabled() || q.spec()->is_dynamic) return OkStatus();
  QD_ASSIGN_OR_RETURN(exporter::QuarkStoredActivation stored,
                      exporter::EncodeQuarkActivation(*q.spec(), q.qparams()));
  QD_RETURN_IF_ERROR(Add(w, prefix + "_scale", stored.scale));
  if (stored.zero_point.defined())
    QD_RETURN_IF_ERROR(Add(w, prefix + "_zero_point", stored.zero_point));
  return OkStatus();
}

Status WriteTensors(ScriptQuantizer& quantizer, const std::string& path) {
  std::map<std::string, const QuantizedLayer*> quantized_weights;
  for (const QuantizedLayer& l : quantizer.layers())
    if (l.plan.weight) quantized_weights[l.layer.name + ".weight"] = &l;
  QD_ASSIGN_OR_RETURN(auto w, io::SafetensorsWriter::Create(path));
  std::set<std::string> written;
  auto add_module_tensor = [&](const std::string& name, const at::Tensor& t) -> Status {
    if (!written.insert(name).second) return OkStatus();
    const auto q = quantized_weights.find(name);
    if (q != quantized_weights.end()) {
      Status s = AddWeight(*w, *q->second, t.detach());
      return s.ok() ? s : Status(s).Prepend(q->second->layer.name + ": ");
    }
    return io::AddTensor(*w, name, t.detach());
  };
  for (const auto& p : quantizer.module().named_parameters(true))
    QD_RETURN_IF_ERROR(add_module_tensor(p.name, p.value));
  for (const auto& b : quantizer.module().named_buffers(true))
    QD_RETURN_IF_ERROR(add_module_tensor(b.name, b.value));
  for (const QuantizedLayer& l : quantizer.layers()) {
    QD_RETURN_IF_ERROR(AddActivation(*w, l.layer.name + ".input", l.input));
    QD_RETURN_IF_ERROR(AddActivation(*w, l.layer.name + ".output", l.output));
  }
  return w->Finish();
}

Status WriteJson(const std::string& path, const json& j) {
  std::ofstream f(path);
  f << j.dump(2) << "\n";
  if (!f) return InternalError("writing " + path + " failed");
  return OkStatus();
}

}  // namespace

Status CheckScriptQuarkExport(const ScriptQuantizer& quantizer) {
  Status bad;
  for (const QuantizedLayer& l : quantizer.layers()) {
    const std::pair<std::string, std::string> problems[] = {
        {l.layer.name + " weight", WeightProblem(l)},
        {l.layer.name + " input", ActivationProblem(l.input, true)},
        {l.layer.name + " output", ActivationProblem(l.output, false)}};
    for (const auto& [what, why] : problems) {
      if (why.empty()) continue;
      if (bad.ok()) bad = InvalidArgumentError(what + ": " + why);
      bad.AddViolation(what, why);
    }
  }
  return bad;
}

StatusOr<exporter::Artifact> ExportScriptQuark(ScriptQuantizer& quantizer,
                                               const ScriptExportOptions& options) {
  QD_RETURN_IF_ERROR(CheckScriptQuarkExport(quantizer));
  QD_ASSIGN_OR_RETURN(exporter::StagedDirectory staged,
                      exporter::StagedDirectory::Create(options.output_dir, options.overwrite,
                                                        options.output_owner));
  const std::string dir = staged.staging_path();
  try {
    QD_RETURN_IF_ERROR(quantizer.UseQuantizedWeights());
    QD_RETURN_IF_ERROR(WriteTensors(quantizer, dir + "/model.safetensors"));
    std::map<std::string, const QuantizedLayer*> layers;
    for (const QuantizedLayer& l : quantizer.layers())
      if (l.plan.weight || l.input.enabled() || l.output.enabled()) layers[l.layer.name] = &l;
    json structure = json::object();
    for (const auto& child : quantizer.module().named_children())
      structure[child.name] = ModuleTree(child.value, child.name, layers);
    QD_RETURN_IF_ERROR(
        WriteJson(dir + "/model.json", {{"config", json::object()}, {"structure", structure}}));
  } catch (const std::exception& e) {
    return InternalError("writing the hf_quark export: " + FirstLine(e));
  }
  if (options.quant_config != nullptr) {
    json q = config::QuarkJsonForExport(*options.quant_config, "real_quantized");
    q["quant_method"] = "quark";
    q["export"] = exporter::QuarkExportJson({});
    QD_RETURN_IF_ERROR(WriteJson(dir + "/quantization_config.json", q));
  }
  QD_RETURN_IF_ERROR(staged.Commit());
  return exporter::DescribeArtifact(exporter::ExportFormat::kHfQuark, staged, "model.safetensors");
}

}  // namespace quantd::torchscript
