#include "worker/export/architecture_table.h"

#include <utility>
#include <vector>

#include "worker/algo/algorithm_support.h"
#include "worker/export/export_support.h"
#include "worker/models/model_config.h"

namespace quantd::exporter {
namespace {

// A small config.json of each architecture with the keys its checks read;
// the shapes are Llama-3-8B's (Qwen3-8B's head_dim; the MoE configs' own
// default experts), Phi-3-mini's, GPT-2's, OPT-125m's, OLMoE-1B-7B's.
std::string ConfigJson(const std::string& architecture) {
  const std::string arch = "{\"architectures\": [\"" + architecture + "\"], ";
  if (architecture == "GPT2LMHeadModel")
    return arch + R"("n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257})";
  if (architecture == "OlmoeForCausalLM")  // OLMoE-1B-7B-0924
    return arch + R"("hidden_size": 2048, "intermediate_size": 1024, "num_hidden_layers": 16,
      "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 50304,
      "num_experts": 64, "num_experts_per_tok": 8, "clip_qkv": null})";
  if (architecture == "OPTForCausalLM")
    return arch + R"("hidden_size": 768, "ffn_dim": 3072, "num_hidden_layers": 12,
      "num_attention_heads": 12, "vocab_size": 50272, "max_position_embeddings": 2048})";
  std::string extra;
  if (architecture == "Qwen3ForCausalLM") extra = R"(, "head_dim": 128)";
  // Qwen3-30B-A3B renormalises its experts' weights.
  if (architecture == "Qwen3MoeForCausalLM") extra = R"(, "head_dim": 128, "norm_topk_prob": true)";
  if (architecture == "Phi3ForCausalLM") extra = R"(, "original_max_position_embeddings": 4096)";
  return arch + R"("hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256)" +
         extra + "}";
}

std::string Row(const std::string& label, const models::ModelConfig& c) {
  static const ExportFormat kFormats[] = {ExportFormat::kHfFakeQuantized, ExportFormat::kHfQuark,
                                          ExportFormat::kCompressedTensors, ExportFormat::kGguf,
                                          ExportFormat::kOnnxQdq};
  std::string row = "| " + label + " |";
  for (ExportFormat f : kFormats) row += CheckArchitectureSupport(f, c).ok() ? " yes |" : " no |";
  row += algo::RotationArchitectureProblem(c).empty() ? " yes |\n" : " no |\n";
  return row;
}

}  // namespace

std::string ArchitectureTableMarkdown() {
  std::string md =
      "| architecture | hf | hf_quark | compressed_tensors | gguf | onnx_qdq | rotation |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const std::string& a : models::SupportedArchitectures()) {
    auto c = models::ParseModelConfig(ConfigJson(a), a);
    md += c.ok() ? Row(a, *c) : "| " + a + " | " + c.status().message() + " |\n";
  }
  const std::vector<std::pair<std::string, std::string>> ropes = {
      {"linear", R"({"rope_type": "linear", "factor": 2.0})"},
      {"llama3", R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"},
      {"yarn", R"({"rope_type": "yarn", "factor": 4.0,
        "original_max_position_embeddings": 32768})"},
      {"dynamic", R"({"rope_type": "dynamic", "factor": 2.0})"},
      {"longrope", R"({"rope_type": "longrope", "factor": 4.0, "short_factor": [)" +
                       [] {
                         std::string ones;
                         for (int i = 0; i < 64; ++i) ones += i ? ", 1" : "1";
                         return ones;
                       }() +
                       "], \"long_factor\": [" +
                       [] {
                         std::string twos;
                         for (int i = 0; i < 64; ++i) twos += i ? ", 2" : "2";
                         return twos;
                       }() +
                       "]}"},
  };
  for (const auto& [type, scaling] : ropes) {
    std::string json = ConfigJson("LlamaForCausalLM");
    json.insert(json.size() - 1, ", \"rope_scaling\": " + scaling);
    auto c = models::ParseModelConfig(json, type);
    const std::string label = "LlamaForCausalLM, rope_scaling " + type;
    md += c.ok() ? Row(label, *c) : "| " + label + " | " + c.status().message() + " |\n";
  }
  return md;
}

}  // namespace quantd::exporter
