#include "worker/export/serving_table.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "worker/config/presets.h"
#include "worker/export/export_support.h"
#include "worker/export/serving_target.h"

namespace quantd::exporter {

namespace {

// The Linears of a Llama-family model: stories260K (what the suite exports)
// and Llama-3-8B (the widths of today's models).
std::vector<config::LayerInfo> Llama(int64_t hidden, int64_t inter, int64_t kv) {
  const std::string p = "model.layers.0.";
  return {{p + "self_attn.q_proj", "Linear", hidden, hidden},
          {p + "self_attn.k_proj", "Linear", kv, hidden},
          {p + "self_attn.v_proj", "Linear", kv, hidden},
          {p + "self_attn.o_proj", "Linear", hidden, hidden},
          {p + "mlp.gate_proj", "Linear", inter, hidden},
          {p + "mlp.up_proj", "Linear", inter, hidden},
          {p + "mlp.down_proj", "Linear", hidden, inter},
          {"lm_head", "Linear", 32000, hidden}};
}

std::vector<ExportLayerSpecs> Specs(const std::vector<ServedLinear>& served) {
  std::vector<ExportLayerSpecs> out;
  for (const ServedLinear& l : served) out.push_back(l.specs);
  return out;
}

// "yes", "no", or "-" when the format cannot hold the scheme at all.
std::string Cell(ExportFormat format, const std::vector<ServedLinear>& served,
                 const std::string& consumer) {
  if (!CheckExportSupport(format, Specs(served)).ok()) return "-";
  const std::vector<std::string> c = ArtifactConsumers(format, served);
  return std::find(c.begin(), c.end(), consumer) != c.end() ? "yes" : "no";
}

// The refusal without the layer it names.
std::string Reason(const std::string& refusal) {
  const size_t colon = refusal.find(": ");
  return colon == std::string::npos ? refusal : refusal.substr(colon + 2);
}

}  // namespace

std::string ServingTableMarkdown() {
  const auto stories = Llama(64, 172, 32);
  const auto llama8b = Llama(4096, 14336, 1024);
  std::string table =
      "| preset | vLLM, hf_quark (stories260K) | vLLM, hf_quark (Llama-3-8B shapes) | "
      "vLLM, compressed_tensors (stories260K) | vLLM, compressed_tensors (Llama-3-8B shapes) | "
      "llama.cpp, gguf | onnxruntime, onnx_qdq |\n|---|---|---|---|---|---|---|\n";
  std::string reasons;
  for (const std::string& name : config::PresetNames()) {
    // Per-group presets at group 4 on stories260K (every width divides),
    // the default 128 at 8B.
    const bool grouped = name.find("per_group") != std::string::npos;
    auto small = config::PresetConfig(name, grouped ? std::optional<int>(4) : std::nullopt);
    auto large = config::PresetConfig(name);
    if (!small.ok() || !large.ok()) continue;
    const auto s = ServedLinearsOf(*small, stories);
    const auto l = ServedLinearsOf(*large, llama8b);
    table += "| " + name + " | " + Cell(ExportFormat::kHfQuark, s, "vllm") + " | " +
             Cell(ExportFormat::kHfQuark, l, "vllm") + " | " +
             Cell(ExportFormat::kCompressedTensors, s, "vllm") + " | " +
             Cell(ExportFormat::kCompressedTensors, l, "vllm") + " | " +
             Cell(ExportFormat::kGguf, l, "llama.cpp") + " | " +
             Cell(ExportFormat::kOnnxQdq, l, "onnxruntime") + " |\n";
    if (!CheckExportSupport(ExportFormat::kHfQuark, Specs(l)).ok()) continue;
    const std::vector<std::string> refused = VllmRefusals(ExportFormat::kHfQuark, l);
    if (!refused.empty()) reasons += "- `" + name + "`: " + Reason(refused.front()) + "\n";
  }
  return table + "\nWhy vLLM refuses a preset as hf_quark at Llama-3-8B's shapes:\n\n" + reasons;
}

}  // namespace quantd::exporter
