// Names of a model's modules as the exporters and the serving check read
// them: the module a tensor belongs to, the k/v projections (where a KV
// cache is quantized), and the Linears vLLM loads fused. Torch-free.
#ifndef QUANTD_WORKER_EXPORT_MODULE_NAMES_H_
#define QUANTD_WORKER_EXPORT_MODULE_NAMES_H_

#include <string>
#include <string_view>

namespace quantd::exporter {

inline bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The module a tensor belongs to ("a.b.weight" -> "a.b"), or "" for none.
inline std::string ModuleOf(const std::string& tensor, std::string_view suffix) {
  return EndsWith(tensor, suffix) ? tensor.substr(0, tensor.size() - suffix.size()) : "";
}

inline bool IsKvProjection(std::string_view module) {
  return EndsWith(module, ".k_proj") || EndsWith(module, ".v_proj");
}

// The module vLLM loads `module` into, by the packed_modules_mapping of its
// Llama-family models: "<block>.self_attn.qkv_proj" for q/k/v_proj,
// "<block>.mlp.gate_up_proj" for gate/up_proj; "" for a Linear loaded alone.
// One fused module takes one scheme.
inline std::string FusedModuleOf(const std::string& module) {
  for (const char* s : {".q_proj", ".k_proj", ".v_proj"})
    if (EndsWith(module, s)) return ModuleOf(module, s) + ".qkv_proj";
  for (const char* s : {".gate_proj", ".up_proj"})
    if (EndsWith(module, s)) return ModuleOf(module, s) + ".gate_up_proj";
  return "";
}

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_MODULE_NAMES_H_
