#include "worker/export/export_support.h"

#include <cmath>

#include "worker/io/gguf/hf_mapping.h"

namespace quantd::exporter {

using gguf::GgmlType;
using quant::QScheme;
using quant::QuantSpec;
using quant::TensorRole;

namespace {

const char* RoleWords(TensorRole role) {
  switch (role) {
    case TensorRole::kWeight:
      return "weights";
    case TensorRole::kBias:
      return "biases";
    case TensorRole::kInput:
      return "input activations";
    case TensorRole::kOutput:
      return "output activations";
  }
  return "tensors";
}

Status Refuse(ExportFormat f, const QuantSpec& s, TensorRole role, const std::string& why) {
  return Status(StatusCode::kInvalidArgument,
                std::string(ExportFormatName(f)) + " cannot express " + quant::DescribeSpec(s) +
                    " " + RoleWords(role) + ": " + why,
                "EXPORT_FORMAT_UNSUPPORTED");
}

bool AlongInputAxis(const QuantSpec& s) {
  const int axis = quant::EffectiveChAxis(s);
  return axis == 1 || axis == -1;
}

bool AlongOutputAxis(const QuantSpec& s) {
  const int axis = quant::EffectiveChAxis(s);
  return axis == 0 || axis == -2;
}

// The granularity rules shared by the formats that store codes with
// per-row / per-group parameters.
std::string WeightAxisProblem(const QuantSpec& s) {
  if (quant::IsMxType(s.dtype) || s.qscheme == QScheme::kPerGroup) {
    if (!AlongInputAxis(s)) return "groups must run along the input axis (ch_axis -1 or 1)";
  } else if (s.qscheme == QScheme::kPerChannel && !AlongOutputAxis(s)) {
    return "per_channel weights must keep one scale per output channel (ch_axis 0)";
  }
  return "";
}

Status CheckHfQuark(const QuantSpec& s, TensorRole role) {
  const ExportFormat f = ExportFormat::kHfQuark;
  if (role == TensorRole::kWeight) {
    if (quant::IsCastType(s.dtype)) return OkStatus();
    if (s.is_dynamic) return Refuse(f, s, role, "a weight quantizer cannot be dynamic");
    if (quant::IsIntType(s.dtype) && quant::BitWidth(s.dtype) != 8 && quant::BitWidth(s.dtype) != 4)
      return Refuse(f, s, role,
                    "the reference's real_quantized format packs 8- and 4-bit integers only");
    if (s.dtype == quant::DataType::kMxInt8)
      return Refuse(f, s, role, "the reference's format defines no real_quantized MXINT8 layout");
    const std::string axis = WeightAxisProblem(s);
    if (!axis.empty()) return Refuse(f, s, role, axis);
    return OkStatus();
  }
  if (s.is_dynamic) return OkStatus();
  if (s.qscheme != QScheme::kPerTensor || quant::IsMxType(s.dtype))
    return Refuse(f, s, role,
                  "static activation scales are stored per tensor (input_scale / output_scale)");
  if (quant::IsCastType(s.dtype))
    return Refuse(f, s, role, "a float16 / bfloat16 cast of activations has no quark form");
  return OkStatus();
}

Status CheckGguf(const QuantSpec& s, TensorRole role) {
  const ExportFormat f = ExportFormat::kGguf;
  if (role != TensorRole::kWeight)
    return Refuse(f, s, role,
                  "a GGUF file holds weights only and llama.cpp quantizes activations and its KV "
                  "cache its own way; use a weight-only scheme");
  if (quant::IsMxType(s.dtype) && s.dtype != quant::DataType::kMxFp4)
    return Refuse(f, s, role,
                  "ggml's one block format with shared E8M0 scales is MXFP4, and requantizing "
                  "these MX elements would change the model");
  if (s.dtype == quant::DataType::kMxFp4 && !AlongInputAxis(s))
    return Refuse(f, s, role, "ggml's MXFP4 blocks run along the input axis");
  if (s.is_dynamic) return Refuse(f, s, role, "a weight quantizer cannot be dynamic");
  return OkStatus();
}

Status CheckOnnx(const QuantSpec& s, TensorRole role) {
  const ExportFormat f = ExportFormat::kOnnxQdq;
  if (quant::IsMxType(s.dtype))
    return Refuse(f, s, role,
                  "ONNX has no QuantizeLinear / DequantizeLinear form of MX block scales");
  if (s.is_dynamic)
    return Refuse(f, s, role,
                  "dynamic quantization has no static QuantizeLinear / DequantizeLinear form");
  if (quant::IsIntType(s.dtype) && quant::BitWidth(s.dtype) != 8 && quant::BitWidth(s.dtype) != 4)
    return Refuse(f, s, role, "ONNX has 8- and 4-bit integer types only");
  if (quant::IsIntType(s.dtype) && s.zero_point_type == quant::ZeroPointType::kFloat32)
    return Refuse(f, s, role, "QuantizeLinear zero points are integers");
  if (role == TensorRole::kWeight) {
    if (quant::IsCastType(s.dtype)) return OkStatus();
    const std::string axis = WeightAxisProblem(s);
    if (!axis.empty()) return Refuse(f, s, role, axis);
    return OkStatus();
  }
  if (quant::IsCastType(s.dtype))
    return Refuse(f, s, role, "a float16 / bfloat16 cast of activations is not exported");
  if (s.qscheme != QScheme::kPerTensor)
    return Refuse(f, s, role, "static activation quantizers are exported per tensor");
  if (s.round_method != quant::RoundMethod::kHalfEven)
    return Refuse(f, s, role,
                  std::string("QuantizeLinear rounds half to even, not '") +
                      std::string(quant::RoundMethodName(s.round_method)) + "'");
  return OkStatus();
}

// TorchScript (worker/torchscript/script_export.h): weights are stored as
// their fake-quantized values, so any spec; activation quantizers become
// PyTorch's fake_quantize_per_tensor_affine / _per_channel_affine, which
// take static integer parameters, round half to even and add an integer
// zero point.
Status CheckTorchScript(const QuantSpec& s, TensorRole role) {
  const ExportFormat f = ExportFormat::kTorchScript;
  if (role == TensorRole::kWeight || role == TensorRole::kBias) return OkStatus();
  if (!quant::IsIntType(s.dtype))
    return Refuse(f, s, role, "PyTorch's fake_quantize operators take integer formats only");
  if (s.is_dynamic)
    return Refuse(f, s, role, "PyTorch's fake_quantize operators take static parameters");
  if (s.qscheme != QScheme::kPerTensor && s.qscheme != QScheme::kPerChannel)
    return Refuse(f, s, role, "PyTorch's fake_quantize operators are per tensor or per channel");
  if (s.zero_point_type == quant::ZeroPointType::kFloat32)
    return Refuse(f, s, role, "quantd adds a float zero point after rounding, PyTorch before");
  if (s.round_method != quant::RoundMethod::kHalfEven)
    return Refuse(f, s, role, "PyTorch's fake_quantize operators round half to even");
  return OkStatus();
}

// compressed-tensors as vLLM's compressed_tensors loader selects a scheme
// (compressed_tensors.py, _get_scheme_from_parts): W4A16 / W8A16 integer
// weights per channel or group, W8A8 int8 (symmetric per-tensor / channel
// weights, static per-tensor or dynamic per-token inputs), FP8 e4m3 weights
// per tensor / channel with static per-tensor or dynamic inputs, and the FP8
// KV cache as the k/v projections' output quantizer.
Status CheckCompressedTensors(const QuantSpec& s, TensorRole role) {
  const ExportFormat f = ExportFormat::kCompressedTensors;
  if (quant::IsCastType(s.dtype))
    return Refuse(f, s, role,
                  "compressed-tensors has no float16 / bfloat16 cast scheme; export hf");
  if (quant::IsMxType(s.dtype))
    return Refuse(f, s, role, "quantd writes no compressed-tensors MX layout; export hf-quark");
  if (s.dtype == quant::DataType::kFp8E5M2)
    return Refuse(f, s, role, "compressed-tensors' float type with 8 bits is FP8 e4m3 only");
  if (quant::IsIntType(s.dtype) && s.zero_point_type == quant::ZeroPointType::kFloat32)
    return Refuse(f, s, role, "compressed-tensors zero points are integers");
  const bool int8 = quant::IsIntType(s.dtype) && quant::BitWidth(s.dtype) == 8;
  if (role == TensorRole::kWeight) {
    if (s.is_dynamic) return Refuse(f, s, role, "a weight quantizer cannot be dynamic");
    if (quant::IsIntType(s.dtype) && quant::BitWidth(s.dtype) != 8 && quant::BitWidth(s.dtype) != 4)
      return Refuse(f, s, role, "vLLM's WNA16 kernels take 4- and 8-bit integers only");
    const std::string axis = WeightAxisProblem(s);
    if (!axis.empty()) return Refuse(f, s, role, axis);
    if (quant::IsFp8Type(s.dtype) && s.qscheme == QScheme::kPerGroup)
      return Refuse(f, s, role, "vLLM's FP8 schemes take per-tensor or per-channel weights");
    return OkStatus();
  }
  if (role == TensorRole::kOutput) {
    if (s.dtype != quant::DataType::kFp8E4M3 || s.is_dynamic || s.qscheme != QScheme::kPerTensor)
      return Refuse(f, s, role,
                    "the only output quantizer vLLM applies is the FP8 KV cache (static per "
                    "tensor fp8_e4m3 on k_proj / v_proj)");
    return OkStatus();
  }
  if (!int8 && s.dtype != quant::DataType::kFp8E4M3)
    return Refuse(f, s, role, "vLLM quantizes activations to int8 or FP8 e4m3 only");
  const bool per_token = s.qscheme == QScheme::kPerChannel && quant::EffectiveChAxis(s) == 1;
  if (s.is_dynamic) {
    if (per_token || (s.dtype == quant::DataType::kFp8E4M3 && s.qscheme == QScheme::kPerTensor))
      return OkStatus();
    return Refuse(f, s, role,
                  int8 ? "vLLM's int8 kernels quantize dynamic inputs per token only"
                       : "dynamic FP8 inputs are per tensor or per token");
  }
  if (s.qscheme != QScheme::kPerTensor)
    return Refuse(f, s, role, "static input scales are per tensor (input_scale)");
  if (int8 && s.round_method != quant::RoundMethod::kHalfEven)
    return Refuse(f, s, role, "vLLM's int8 input quantization rounds half to even");
  return OkStatus();
}

bool EndsWith(const std::string& s, const char* suffix) {
  const std::string x(suffix);
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

// The combinations of weight, input and output quantizers that vLLM's
// compressed_tensors loader has a scheme for (each spec is already known to
// be expressible on its own).
std::string CompressedTensorsLayerProblem(const ExportLayerSpecs& l) {
  if (l.output && !EndsWith(l.name, "k_proj") && !EndsWith(l.name, "v_proj"))
    return "output activations: only k_proj / v_proj outputs (the FP8 KV cache) are "
           "quantized by vLLM";
  if (!l.weight) {
    if (l.input) return "input activations without weight quantization have no vLLM scheme";
    return "";
  }
  const QuantSpec& w = *l.weight;
  const bool w_int = quant::IsIntType(w.dtype);
  if (!l.input) {
    if (w_int && w.qscheme == QScheme::kPerTensor)
      return "weights: vLLM's W4A16 / W8A16 kernels need per-channel or per-group scales, "
             "not " +
             quant::DescribeSpec(w);
    return "";
  }
  const QuantSpec& a = *l.input;
  if (w_int) {
    if (!quant::IsIntType(a.dtype)) return "integer weights with FP8 inputs have no vLLM scheme";
    if (quant::BitWidth(w.dtype) != 8)
      return "weights: " + quant::DescribeSpec(w) +
             " with quantized inputs has no vLLM compressed-tensors scheme (W4A16 is weight-only)";
    if (!w.symmetric || w.qscheme == QScheme::kPerGroup)
      return "weights: vLLM's W8A8 int8 scheme needs symmetric per-tensor or per-channel "
             "weights, not " +
             quant::DescribeSpec(w);
    return "";
  }
  if (quant::IsIntType(a.dtype)) return "FP8 weights with integer inputs have no vLLM scheme";
  return "";
}

}  // namespace

Status CheckExportSpec(ExportFormat format, const QuantSpec& spec, TensorRole role) {
  if (format == ExportFormat::kHfFakeQuantized) return OkStatus();
  if (format == ExportFormat::kTorchScript) return CheckTorchScript(spec, role);
  if (role == TensorRole::kBias)
    return Refuse(format, spec, role, "quantized biases are not exported in this format");
  switch (format) {
    case ExportFormat::kHfQuark:
      return CheckHfQuark(spec, role);
    case ExportFormat::kGguf:
      return CheckGguf(spec, role);
    case ExportFormat::kOnnxQdq:
      return CheckOnnx(spec, role);
    case ExportFormat::kCompressedTensors:
      return CheckCompressedTensors(spec, role);
    case ExportFormat::kTorchScript:
      return CheckTorchScript(spec, role);
    case ExportFormat::kHfFakeQuantized:
      break;
  }
  return OkStatus();
}

namespace {

// llama.cpp's rope_yarn (ggml) with only rope.scaling.type / factor /
// original_context_length in the file: the ramp over floor / ceil of the
// beta 32 / 1 correction dimensions and mscale 1 + 0.1 ln(factor), as
// transformers computes YaRN by default.
bool LlamaCppComputesYarn(const models::RopeScaling& s) {
  const double mscale = 1.0 + 0.1 * std::log(s.factor);
  return s.beta_fast == 32.0 && s.beta_slow == 1.0 && s.truncate && s.factor >= 1.0 &&
         std::fabs(s.attention_factor - mscale) <= 1e-12 * mscale;
}

}  // namespace

std::string LlamaCppGemmaProblem(const models::ModelConfig& config) {
  const bool gemma2 = config.model_type == "gemma2";
  const std::string arch = gemma2 ? "gemma2" : "gemma3";
  // src/models/gemma2.cpp / gemma3.cpp: queries scaled by head_dim^-0.5, or
  // (hidden / heads)^-0.5 for the 27B models, known by their layer count.
  const bool is_27b = config.num_hidden_layers == (gemma2 ? 46 : 62);
  const double llama_scalar =
      is_27b ? static_cast<double>(config.hidden_size / config.num_attention_heads)
             : static_cast<double>(config.head_dim);
  const double scalar =
      config.query_pre_attn_scalar > 0 ? config.query_pre_attn_scalar : config.head_dim;
  if (scalar != llama_scalar) {
    return "llama.cpp's " + arch + " scales attention by " +
           std::to_string(static_cast<int64_t>(llama_scalar)) +
           "^-0.5 for this model, and query_pre_attn_scalar is " + std::to_string(scalar);
  }
  if (gemma2 && (config.attn_logit_softcapping <= 0 || config.final_logit_softcapping <= 0)) {
    return "llama.cpp's gemma2 always soft-caps the attention scores and the logits, and this "
           "config leaves one of attn_logit_softcapping / final_logit_softcapping unset";
  }
  if (!gemma2 && config.attn_logit_softcapping > 0) {
    return "llama.cpp's gemma3 has no attention soft-capping (attn_logit_softcapping)";
  }
  if (gemma2 && !config.tie_word_embeddings) {
    return "llama.cpp's gemma2 reads the output from the embedding (tie_word_embeddings)";
  }
  std::vector<bool> sliding;
  for (int64_t il = 0; il < config.num_hidden_layers; ++il)
    sliding.push_back(models::SlidingWindowAt(config, il) > 0);
  if (!gguf::LlamaCppSlidingPeriod(sliding)) {
    return "llama.cpp slides every layer but each period-th, and this config's layer_types "
           "follow no such period";
  }
  return "";
}

std::string LlamaCppMoeProblem(const models::ModelConfig& config) {
  // llama.cpp (src/models/llama.cpp, qwen2moe.cpp, qwen3moe.cpp, olmoe.cpp)
  // makes every layer sparse, renormalises the chosen weights for llama and
  // qwen3moe but not qwen2moe or olmoe, and needs Qwen2-MoE's shared expert.
  // Its olmoe has no clip_qkv, no attention biases and no tied output, and
  // its k_norm is hidden_size wide (no grouped-query attention).
  for (bool sparse : config.moe_layers) {
    if (!sparse)
      return "llama.cpp makes every layer a mixture of experts; this config has dense ones";
  }
  const bool qwen2 = config.architecture == "Qwen2MoeForCausalLM";
  const bool olmoe = config.architecture == "OlmoeForCausalLM";
  if (olmoe) {
    if (config.clip_qkv > 0) return "llama.cpp's olmoe does not clamp q, k and v (clip_qkv)";
    if (config.qkv_bias || config.o_bias) return "llama.cpp's olmoe has no attention biases";
    if (config.tie_word_embeddings) return "llama.cpp's olmoe needs its own output head";
    if (config.num_key_value_heads != config.num_attention_heads)
      return "llama.cpp's olmoe needs num_key_value_heads == num_attention_heads";
  }
  const bool renormalises = !qwen2 && !olmoe;
  if (config.norm_topk_prob != renormalises) {
    return std::string("llama.cpp's ") +
           (qwen2   ? "qwen2moe"
            : olmoe ? "olmoe"
                    : "qwen3moe") +
           (renormalises ? " renormalises" : " does not renormalise") +
           " the chosen experts' weights, and norm_topk_prob says otherwise";
  }
  if (qwen2 && config.shared_expert_intermediate_size == 0)
    return "llama.cpp's qwen2moe needs the shared expert";
  if (qwen2 && config.tie_word_embeddings) return "llama.cpp's qwen2moe needs its own output head";
  return "";
}

Status CheckArchitectureSupport(ExportFormat format, const models::ModelConfig& config) {
  const std::string name = ExportFormatName(format);
  const std::string& arch = config.architecture;
  const std::string rope = config.rope_scaling ? config.rope_scaling->type : "";
  std::string why;
  switch (format) {
    case ExportFormat::kHfQuark:
    case ExportFormat::kCompressedTensors:
      if (config.family == models::ArchitectureFamily::kGpt2)
        why = "GPT-2's Conv1D weights (stored [in, out]) have no " + name +
              " layout; export hf or gguf";
      break;
    case ExportFormat::kOnnxQdq:
      if (config.family != models::ArchitectureFamily::kLlama || config.num_experts > 0) {
        why =
            "onnx_qdq writes dense Llama-family decoders (LlamaForCausalLM, MistralForCausalLM, "
            "Qwen2ForCausalLM)";
      } else if (config.qk_norm) {
        why =
            "onnx_qdq does not write per-head q/k norms; export gguf, hf, hf_quark or "
            "compressed_tensors";
      } else if (rope == "dynamic" || rope == "longrope") {
        why = "onnx_qdq bakes one rotary table into the graph, and " + rope +
              " rope scaling changes it with the sequence length; export hf, hf_quark or "
              "compressed_tensors";
      }
      break;
    case ExportFormat::kGguf:
      if (config.family == models::ArchitectureFamily::kOpt) {
        why =
            "llama.cpp has no OPT architecture; gguf maps LlamaForCausalLM, MistralForCausalLM, "
            "Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, Gemma2ForCausalLM, "
            "Gemma3ForCausalLM, GPT2LMHeadModel";
      } else if (config.num_experts > 0) {
        why = LlamaCppMoeProblem(config);
        if (!why.empty()) why += "; export hf, hf_quark or compressed_tensors";
      } else if (config.family == models::ArchitectureFamily::kGemma) {
        why = LlamaCppGemmaProblem(config);
        if (!why.empty()) why += "; export hf, hf_quark or compressed_tensors";
      } else if (config.family == models::ArchitectureFamily::kPhi3 &&
                 config.num_attention_heads * config.head_dim != config.hidden_size) {
        why = "llama.cpp's phi3 needs num_attention_heads * head_dim == hidden_size";
      } else if (!rope.empty() && rope != "linear" && rope != "llama3" &&
                 !(rope == "yarn" && LlamaCppComputesYarn(*config.rope_scaling))) {
        why = rope == "yarn"
                  ? "llama.cpp's YaRN takes beta_fast 32, beta_slow 1, truncated correction "
                    "dimensions, factor >= 1 and the attention factor 0.1 ln(factor) + 1; this "
                    "config sets others; export hf, hf_quark or compressed_tensors"
                  : "quantd writes llama.cpp's rope scaling for linear, llama3 and yarn only, "
                    "not " +
                        rope + "; export hf, hf_quark or compressed_tensors";
      }
      break;
    case ExportFormat::kTorchScript:
      why =
          "torchscript is the export of TorchScript models (a .pt model file); export hf, "
          "hf_quark, compressed_tensors, gguf or onnx_qdq";
      break;
    case ExportFormat::kHfFakeQuantized:
      break;
  }
  if (why.empty()) return OkStatus();
  return Status(StatusCode::kInvalidArgument, name + " cannot hold " + arch + ": " + why,
                "EXPORT_FORMAT_UNSUPPORTED");
}

Status CheckExportSupport(ExportFormat format, const std::vector<ExportLayerSpecs>& layers) {
  Status first;
  std::vector<FieldViolation> violations;
  for (const ExportLayerSpecs& l : layers) {
    const size_t refused_before = violations.size();
    for (const auto& [spec, role] :
         {std::make_pair(&l.weight, TensorRole::kWeight),
          std::make_pair(&l.bias, TensorRole::kBias), std::make_pair(&l.input, TensorRole::kInput),
          std::make_pair(&l.output, TensorRole::kOutput)}) {
      if (!*spec) continue;
      Status s = CheckExportSpec(format, **spec, role);
      if (s.ok()) continue;
      violations.push_back({l.name + "." + std::string(quant::TensorRoleName(role)), s.message()});
      if (first.ok()) first = s.Prepend(l.name + " " + RoleWords(role) + ": ");
    }
    if (format != ExportFormat::kCompressedTensors || violations.size() != refused_before) continue;
    const std::string problem = CompressedTensorsLayerProblem(l);
    if (problem.empty()) continue;
    violations.push_back({l.name, problem});
    if (first.ok())
      first = Status(
          StatusCode::kInvalidArgument,
          l.name + ": compressed_tensors cannot express this layer's quantization: " + problem,
          "EXPORT_FORMAT_UNSUPPORTED");
  }
  if (first.ok()) return first;
  for (auto& v : violations) first.AddViolation(v.field, v.description);
  return first;
}

std::string GgufCodesMismatch(const QuantSpec& spec, GgmlType type) {
  if (type == GgmlType::kMXFP4 || spec.dtype == quant::DataType::kMxFp4) {
    if (type != GgmlType::kMXFP4 || spec.dtype != quant::DataType::kMxFp4)
      return "only MXFP4 weights are MXFP4 blocks";
    return AlongInputAxis(spec) ? "" : "MX blocks along the output axis";
  }
  if (!quant::IsIntType(spec.dtype))
    return quant::DescribeSpec(spec) + " is not an integer code set";
  if (spec.zero_point_type == quant::ZeroPointType::kFloat32)
    return "float zero points have no block form";
  if (spec.qscheme == QScheme::kPerGroup) {
    const int gs = quant::EffectiveGroupSize(spec);
    if (!AlongInputAxis(spec) || gs <= 0 || gs % 32 != 0)
      return "group size " + std::to_string(gs) + " is not a multiple of 32 along the input axis";
  } else if (spec.qscheme == QScheme::kPerChannel && !AlongOutputAxis(spec)) {
    return "per_channel along the input axis";
  }
  const int bits = quant::BitWidth(spec.dtype);
  switch (type) {
    case GgmlType::kQ8_0:
      if (!spec.symmetric && bits > 7)
        return "asymmetric 8-bit codes minus their zero point overflow int8";
      return "";
    case GgmlType::kQ4_0:
      if (bits > 4) return std::to_string(bits) + "-bit codes do not fit 4 bits";
      if (!spec.symmetric) return "Q4_0 has no zero point";
      return "";
    case GgmlType::kQ4_1:
      if (bits > 4) return std::to_string(bits) + "-bit codes do not fit 4 bits";
      return "";
    default:
      return std::string(gguf::GetGgmlTypeTraits(type).name) + " is not a block type quantd writes";
  }
}

GgmlType DefaultGgufWeightType(const std::vector<ExportLayerSpecs>& layers) {
  std::vector<QuantSpec> weights;
  for (const auto& l : layers)
    if (l.weight) weights.push_back(*l.weight);
  if (weights.empty()) return GgmlType::kF32;
  bool all_casts = true;
  for (const auto& w : weights) all_casts &= quant::IsCastType(w.dtype);
  if (all_casts) return GgmlType::kF16;
  // MXFP4 weights are written as MXFP4 blocks whatever the file's type
  // (gguf.h); the integer weights choose it.
  std::vector<QuantSpec> ints;
  for (const auto& w : weights)
    if (w.dtype != quant::DataType::kMxFp4) ints.push_back(w);
  if (ints.empty()) return GgmlType::kMXFP4;
  weights = std::move(ints);
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0}) {
    bool fits = true;
    for (const auto& w : weights) fits &= GgufCodesMismatch(w, t).empty();
    if (fits) return t;
  }
  for (const auto& w : weights)
    if (quant::BitWidth(w.dtype) > 4) return GgmlType::kQ8_0;
  return GgmlType::kQ4_1;
}

}  // namespace quantd::exporter
