// Which quantization schemes each export format can express, decided from
// the specs alone (torch-free), so quantd refuses a job at CreateJob instead
// of failing it at its last stage. The exporters run the same checks.
//
//   hf_fake_quantized  everything (the weights are written as values).
//   hf_quark           weights: int8 / uint8 / int4 / uint4 (per_tensor,
//                      per_channel on the output axis, per_group on the input
//                      axis), fp8_e4m3 / fp8_e5m2, mxfp4, mxfp6_e2m3 /
//                      mxfp6_e3m2, mxfp8_e4m3 / mxfp8_e5m2, float16 / bfloat16;
//                      activations: dynamic ones, and static per_tensor ones;
//                      no bias quantization.
//   gguf               weights: integer specs (written with the job's codes
//                      when they are a ggml block format, else requantized),
//                      fp8 (requantized to Q8_0), float16 / bfloat16; no MX
//                      format (GGUF has no E8M0 block type quantd writes), no
//                      activation or KV-cache quantizers (llama.cpp quantizes
//                      activations its own way) and no bias quantization.
//   onnx_qdq           weights: integer (as for hf_quark, plus int8 / uint8
//                      per_group), fp8, float16 / bfloat16; no MX format;
//                      activations: static per_tensor integer or fp8 with
//                      round half to even (QuantizeLinear's rounding); no
//                      dynamic quantizers and no bias quantization.
//   compressed_tensors what vLLM's compressed_tensors loader has a scheme
//                      for: int4 / uint4 / int8 / uint8 weights per channel
//                      or per group without activation quantization
//                      (W4A16 / W8A16); symmetric int8 / uint8 weights per
//                      tensor or channel with int8 / uint8 inputs, static per
//                      tensor or dynamic per token (W8A8); fp8_e4m3 weights
//                      per tensor or channel, alone or with fp8_e4m3 inputs
//                      (static per tensor, dynamic per tensor or per token);
//                      output quantizers only as the FP8 KV cache (static
//                      per-tensor fp8_e4m3 on k_proj / v_proj); integer zero
//                      points only; no MX, casts, fp8_e5m2 or biases.
#ifndef QUANTD_WORKER_EXPORT_EXPORT_SUPPORT_H_
#define QUANTD_WORKER_EXPORT_EXPORT_SUPPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/export/artifact.h"
#include "worker/io/gguf/ggml_types.h"
#include "worker/models/model_config.h"
#include "worker/quant/spec.h"

namespace quantd::exporter {

// What one layer (or one config entry, e.g. "global_quant_config") asks for.
struct ExportLayerSpecs {
  std::string name;
  std::optional<quant::QuantSpec> weight;
  std::optional<quant::QuantSpec> bias;
  std::optional<quant::QuantSpec> input;
  std::optional<quant::QuantSpec> output;
};

// OK, or INVALID_ARGUMENT (reason EXPORT_FORMAT_UNSUPPORTED) whose message
// names the format and why, e.g. "gguf cannot express mxfp6_e2m3 weights:
// GGUF has no E8M0-scaled block format ...".
Status CheckExportSpec(ExportFormat format, const quant::QuantSpec& spec, quant::TensorRole role);

// Every spec of every layer; the first refusal names the layer and the
// tensor ("model.layers.0.mlp.down_proj weight: ..."), and every refused
// one is listed as a field violation (field "<name>.<role>").
Status CheckExportSupport(ExportFormat format, const std::vector<ExportLayerSpecs>& layers);

// Why llama.cpp's gemma2 / gemma3 would compute this Gemma config
// differently from transformers (empty when it would not): its query scale,
// soft-caps, tied output (gemma2) and sliding-layer period.
std::string LlamaCppGemmaProblem(const models::ModelConfig& config);

// Why llama.cpp's llama (Mixtral), qwen2moe, qwen3moe or olmoe would compute
// this mixture-of-experts config differently from transformers (empty when
// it would not): dense layers, the renormalisation of the chosen experts'
// weights, Qwen2-MoE's shared expert and output head, OLMoE's clip_qkv,
// attention biases, tied output and grouped-query attention.
std::string LlamaCppMoeProblem(const models::ModelConfig& config);

// OK, or INVALID_ARGUMENT (reason EXPORT_FORMAT_UNSUPPORTED) naming the
// format and why it cannot hold a model of this architecture: GPT-2's Conv1D
// weights have no hf_quark or compressed_tensors layout; onnx_qdq writes
// dense Llama-family decoders without q/k norms (not Qwen3) nor a rotary table that
// depends on the sequence length (dynamic, longrope rope scaling); gguf maps
// Llama, Mistral, Qwen2, Qwen3, Mixtral / Qwen2-MoE / Qwen3-MoE (as
// LlamaCppMoeProblem allows), Phi-3 (heads * head_dim == hidden_size),
// Gemma 2 / Gemma 3 (as LlamaCppGemmaProblem allows) and GPT-2 (not OPT)
// with linear, llama3 or yarn rope scaling (yarn as llama.cpp computes it:
// default betas and attention factor). Checked at CreateJob when the
// model's config is readable there, and by the worker before it quantizes.
Status CheckArchitectureSupport(ExportFormat format, const models::ModelConfig& config);

// Why `spec`'s codes cannot be written as `type` (Q8_0, Q4_0 or Q4_1)
// blocks, or "" when they can (see gguf.h for the rules).
std::string GgufCodesMismatch(const quant::QuantSpec& spec, gguf::GgmlType type);

// The GGUF type for a job's quantized weights: the block format that keeps
// every weight's codes (tried in the order Q4_0, Q4_1, Q8_0); else Q8_0 when
// some weight has more than 4 bits and Q4_1 otherwise; F16 when the weights
// are float16 / bfloat16 casts; F32 when no weight is quantized.
gguf::GgmlType DefaultGgufWeightType(const std::vector<ExportLayerSpecs>& layers);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_EXPORT_SUPPORT_H_
