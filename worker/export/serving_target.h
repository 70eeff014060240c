// Which consumers serve an export, decided from the specs and shapes of the
// layers it holds (torch-free): quantd's CreateJob check under
// `spec.export.target`, and the `consumers` each artifact of a job reports.
//
// vLLM's rules are those of its Quark loader (quark.py: _get_scheme_from_config
// and the scheme classes; utils.py: should_ignore_layer), as
// tests/peers/vllm_quark_check.py follows them file by file, and of its
// compressed_tensors loader (tests/peers/vllm_ct_check.py); each checker is
// run on every export of its format the suite makes, and every export this
// file says vLLM serves must pass it (tests/peers/vllm_*_peer_test.sh).
// docs/export.md lists the upstream files and commits.
#ifndef QUANTD_WORKER_EXPORT_SERVING_TARGET_H_
#define QUANTD_WORKER_EXPORT_SERVING_TARGET_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "worker/config/quant_config.h"
#include "worker/export/artifact.h"
#include "worker/export/export_support.h"

namespace quantd::exporter {

enum class ServingTarget {
  kAny,   // export what the formats hold; report who loads each artifact
  kVllm,  // refuse what vLLM cannot load or would decode differently
};
const char* ServingTargetName(ServingTarget t);

// One Linear of the model as served: its specs, its shape (0 when unknown,
// e.g. a config entry checked before the model is read), and whether its
// output spec is the KV cache's (kv_cache_quant_config) rather than a
// quantized output.
struct ServedLinear {
  ExportLayerSpecs specs;
  int64_t out_features = 0;
  int64_t in_features = 0;
  bool kv_cache_output = false;
  bool excluded = false;  // left in float by an exclude entry
};

// Each of the model's Linears as `config` resolves it (config::ResolveLayer).
// A KV-cache output is one set by kv_cache_quant_config, or, in a reference
// config without one, by a layer_quant_config entry on a k/v projection
// (where the reference keeps its KV cache).
std::vector<ServedLinear> ServedLinearsOf(const config::QuantConfig& config,
                                          const std::vector<config::LayerInfo>& layers);

// hf_quark (vLLM's Quark loader) and compressed_tensors (its
// compressed_tensors loader).
bool IsVllmFormat(ExportFormat format);

// Why vLLM cannot serve an artifact of `format` holding `layers`, one line
// per distinct problem, each naming the first layer it affects and how many
// more ("model.layers.0.mlp.down_proj (and 4 more): ..."). Empty: it serves
// it. Formats vLLM does not read (gguf, onnx_qdq, hf_fake_quantized) get one
// line saying which formats it reads. compressed_tensors holds only what
// vLLM serves (export_support.h), so its lines are the support check's
// refusal or the shapes its WNA16 scheme cannot pack.
std::vector<std::string> VllmRefusals(ExportFormat format, const std::vector<ServedLinear>& layers);

// Why quantd does not claim vLLM for a model of this architecture, or "":
// the suite's vLLM checkers follow vLLM's Llama-family loaders
// (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,
// Phi3ForCausalLM) and no other, so CreateJob refuses `--target vllm` and
// the artifacts name no vLLM consumer for the rest.
std::string VllmArchitectureProblem(const models::ModelConfig& config);

// The consumers that load an artifact of `format` holding `layers`:
// "vllm" (hf_quark or compressed_tensors, VllmRefusals empty), "llama.cpp" (gguf), "onnxruntime"
// (onnx_qdq). Only consumers the suite checks are named.
std::vector<std::string> ArtifactConsumers(ExportFormat format,
                                           const std::vector<ServedLinear>& layers);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_SERVING_TARGET_H_
