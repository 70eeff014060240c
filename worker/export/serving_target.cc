#include "worker/export/serving_target.h"

#include <algorithm>
#include <map>
#include <utility>

#include "worker/export/compressed_tensors/ct_config.h"
#include "worker/export/module_names.h"
#include "worker/quant/spec.h"

namespace quantd::exporter {

namespace {

using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

std::string Name(DataType t) { return std::string(quant::DataTypeName(t)); }

// vLLM's FP8 W8A8 scheme (QuarkW8A8Fp8): static per_tensor / per_channel
// fp8_e4m3 weights with fp8_e4m3 inputs, dynamic or static per_tensor.
std::string Fp8Problem(const QuantSpec& w, const std::optional<QuantSpec>& in) {
  if (w.is_dynamic || w.qscheme == QScheme::kPerGroup)
    return "vLLM takes fp8_e4m3 weights static per_tensor or per_channel, not " +
           quant::DescribeSpec(w);
  if (!in)
    return "vLLM's Quark loader has no FP8 weight-only scheme: quantize the inputs to fp8_e4m3 "
           "as well (w_fp8_a_fp8)";
  if (in->dtype != DataType::kFp8E4M3)
    return "vLLM takes fp8_e4m3 weights with fp8_e4m3 inputs, not " + Name(in->dtype);
  if (!in->is_dynamic && in->qscheme != QScheme::kPerTensor)
    return "vLLM takes static fp8_e4m3 inputs per_tensor only";
  return "";
}

// QuarkW8A8Int8: symmetric static per_tensor / per_channel int8 weights with
// static per_tensor or dynamic per-token int8 inputs.
std::string Int8Problem(const QuantSpec& w, const std::optional<QuantSpec>& in) {
  if (!w.symmetric) return "vLLM takes int8 weights symmetric only";
  if (w.is_dynamic || w.qscheme == QScheme::kPerGroup)
    return "vLLM takes int8 weights static per_tensor or per_channel, not per_group";
  if (!in)
    return "vLLM's Quark loader has no int8 weight-only scheme: quantize the inputs to int8 as "
           "well (w_int8_a_int8_per_tensor_sym, w_int8_a_int8_per_token_dynamic)";
  if (in->dtype != DataType::kInt8)
    return "vLLM takes int8 weights with int8 inputs, not " + Name(in->dtype);
  const bool static_tensor = !in->is_dynamic && in->qscheme == QScheme::kPerTensor;
  const bool dynamic_token = in->is_dynamic && in->qscheme == QScheme::kPerChannel;
  if (!static_tensor && !dynamic_token)
    return "vLLM takes int8 inputs static per_tensor or dynamic per-token, not " +
           quant::DescribeSpec(*in);
  return "";
}

// QuarkW4A16Int4: static per_group int4 / uint4 weights, float inputs. Its
// weight loader XORs the codes with 8 by `symmetric` alone and packs 8
// codes per int32 along the output axis.
std::string W4a16Problem(const ServedLinear& l, const QuantSpec& w,
                         const std::optional<QuantSpec>& in) {
  if (in) return "vLLM has no scheme for 4-bit integer weights with quantized inputs";
  if (w.qscheme != QScheme::kPerGroup || w.is_dynamic || !w.group_size || *w.group_size <= 0)
    return "vLLM takes 4-bit integer weights static per_group only (W4A16), not " +
           quant::DescribeSpec(w);
  if (w.dtype == DataType::kInt4 && !w.symmetric)
    return "vLLM decodes int4 by `symmetric` alone, so asymmetric int4 would decode wrong: use "
           "uint4 asymmetric (w_uint4_per_group_asym) or int4 symmetric";
  if (w.dtype == DataType::kUInt4 && w.symmetric)
    return "vLLM decodes uint4 by `symmetric` alone, so symmetric uint4 would decode wrong: use "
           "int4 symmetric (w_int4_per_group_sym) or uint4 asymmetric";
  if (l.in_features > 0 && l.in_features % *w.group_size != 0)
    return "in_features " + std::to_string(l.in_features) + " is not a multiple of group_size " +
           std::to_string(*w.group_size) + " (vLLM's W4A16 needs whole groups)";
  if (l.out_features > 0 && l.out_features % 8 != 0)
    return "out_features " + std::to_string(l.out_features) +
           " is not a multiple of 8 (vLLM packs 8 codes per int32 word along the outputs)";
  return "";
}

// QuarkOCP_MX: MXFP4 / MXFP6 weights with dynamically quantized inputs; one
// E8M0 scale per whole block of 32 inputs.
std::string OcpMxProblem(const ServedLinear& l, const std::optional<QuantSpec>& in) {
  if (!in)
    return "vLLM's OCP MX scheme has no weight-only form: quantize the inputs as well "
           "(w_mxfp4_a_mxfp4)";
  if (!in->is_dynamic) return "vLLM's OCP MX scheme takes dynamic inputs only, not static scales";
  if (l.in_features > 0 && l.in_features % 32 != 0)
    return "in_features " + std::to_string(l.in_features) +
           " is not a multiple of 32 (vLLM allocates one scale per whole block of 32)";
  return "";
}

// Why vLLM's Quark loader serves no scheme for this layer, "" when it does.
std::string QuarkLayerProblem(const ServedLinear& l) {
  const ExportLayerSpecs& s = l.specs;
  if (l.excluded) return "";
  if (EndsWith(s.name, "lm_head") && (s.weight || s.input))
    return "vLLM loads lm_head in float (its ParallelLMHead takes no Quark scheme)";
  if (s.bias) return "vLLM's Quark loader has no kernel for a quantized bias";
  if (s.output && !l.kv_cache_output)
    return "vLLM's Quark loader has no kernel for quantized Linear outputs (the FP8 KV cache on "
           "the k/v projections is the one output it takes)";
  if (s.output && (s.output->dtype != DataType::kFp8E4M3 ||
                   s.output->qscheme != QScheme::kPerTensor || s.output->is_dynamic))
    return "vLLM's KV cache is static per_tensor fp8_e4m3, not " + quant::DescribeSpec(*s.output);
  if (!s.weight)
    return s.input ? "vLLM's Quark loader has no scheme for quantized inputs with float weights"
                   : "";
  const QuantSpec& w = *s.weight;
  // vLLM's schemes by weight dtype, as _get_scheme_from_config tries them.
  if (w.dtype == DataType::kFp8E4M3) return Fp8Problem(w, s.input);
  if (w.dtype == DataType::kInt8) return Int8Problem(w, s.input);
  if (w.dtype == DataType::kInt4 || w.dtype == DataType::kUInt4) return W4a16Problem(l, w, s.input);
  if (w.dtype == DataType::kMxFp4 || w.dtype == DataType::kMxFp6E3M2 ||
      w.dtype == DataType::kMxFp6E2M3)
    return OcpMxProblem(l, s.input);
  return "vLLM's Quark loader has no scheme for " + Name(w.dtype) + " weights";
}

// Phi-3 keeps qkv_proj / gate_up_proj fused on disk, and vLLM's fused
// module loads each tensor without a shard id (linear.py weight_loader_v2):
// a per-tensor scale goes into shard 0 only and the other shards keep what
// create_weights put there. QuarkW8A8Fp8 fills them with float32 min and
// requantize_with_max_scale then takes the loaded scale for every row;
// QuarkW8A8Int8 (and CompressedTensorsW8A8Int8) leave them torch.empty and
// use them per shard. tests/peers/vllm_quark_check.py and vllm_ct_check.py
// follow this.
std::string FusedOnDiskProblem(ExportFormat format, const ServedLinear& l) {
  const bool fused_on_disk =
      EndsWith(l.specs.name, ".qkv_proj") || EndsWith(l.specs.name, ".gate_up_proj");
  if (!fused_on_disk || l.excluded || !l.specs.weight) return "";
  const QuantSpec& w = *l.specs.weight;
  if (w.dtype == DataType::kInt8 && w.qscheme == QScheme::kPerTensor)
    return std::string(
               "vLLM loads the one per_tensor int8 weight_scale of a Linear fused on "
               "disk (Phi-3's qkv_proj / gate_up_proj) into its first shard and leaves "
               "the other shards' scales uninitialized (") +
           (format == ExportFormat::kHfQuark ? "QuarkW8A8Int8" : "CompressedTensorsW8A8Int8") +
           "); use per_channel int8 weights or fp8";
  return "";
}

// vLLM fuses q/k/v into qkv_proj and gate/up into gate_up_proj and gives a
// fused module one scheme: its shards must be excluded together and
// quantized alike (the KV cache's output spec aside).
std::vector<std::pair<std::string, std::string>> FusedShardProblems(
    const std::vector<ServedLinear>& layers) {
  std::vector<std::pair<std::string, std::vector<const ServedLinear*>>> fused;  // model order
  std::map<std::string, size_t> index;
  for (const ServedLinear& l : layers) {
    const std::string module = FusedModuleOf(l.specs.name);
    if (module.empty()) continue;
    auto [it, added] = index.emplace(module, fused.size());
    if (added) fused.push_back({module, {}});
    fused[it->second].second.push_back(&l);
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [module, shards] : fused) {
    const ServedLinear& first = *shards.front();
    const bool alike = std::all_of(shards.begin(), shards.end(), [&](const ServedLinear* o) {
      return o->excluded == first.excluded && o->specs.weight == first.specs.weight &&
             o->specs.input == first.specs.input && o->specs.bias == first.specs.bias;
    });
    if (alike) continue;
    std::string names;
    for (const ServedLinear* s : shards)
      names += (names.empty() ? "" : ", ") + s->specs.name.substr(s->specs.name.rfind('.') + 1);
    out.push_back({first.specs.name, names + " must be excluded together and quantized alike: "
                                             "vLLM loads them as one " +
                                             module.substr(module.rfind('.') + 1)});
  }
  return out;
}

// vLLM's compressed_tensors loader: the schemes the format holds are the
// ones it serves (export_support.h); what it adds are the packed widths of
// its WNA16 scheme and one kv_cache_scheme for every attention layer (the
// exporter, worker/export/compressed_tensors/ct_export.cc, checks the same).
std::string CtLayerProblem(const ServedLinear& l) {
  const ExportLayerSpecs& s = l.specs;
  if (l.excluded || !s.weight) return "";
  const std::optional<QuantSpec> in = s.input;
  if (!CtFormatIsPacked(CtFormatFor(s.weight, in))) return "";
  const int per_word = 32 / quant::BitWidth(s.weight->dtype);
  if (l.in_features > 0 && l.in_features % per_word != 0)
    return "in_features " + std::to_string(l.in_features) + " is not a multiple of " +
           std::to_string(per_word) + " (vLLM's WNA16 scheme allocates whole packed words per row)";
  if (!s.weight->symmetric && l.out_features > 0 && l.out_features % per_word != 0)
    return "out_features " + std::to_string(l.out_features) + " is not a multiple of " +
           std::to_string(per_word) + " (vLLM packs asymmetric zero points along the outputs)";
  return "";
}

std::string CtKvProblem(const std::vector<ServedLinear>& layers) {
  int projections = 0, quantized = 0;
  for (const ServedLinear& l : layers) {
    if (!IsKvProjection(l.specs.name)) continue;
    ++projections;
    if (l.specs.output) ++quantized;
  }
  if (quantized == 0 || quantized == projections) return "";
  return "vLLM's kv_cache_scheme applies to every attention layer, but only " +
         std::to_string(quantized) + " of " + std::to_string(projections) +
         " k/v projections quantize their output";
}

}  // namespace

std::vector<ServedLinear> ServedLinearsOf(const config::QuantConfig& config,
                                          const std::vector<config::LayerInfo>& layers) {
  using Origin = config::ResolvedLayer::Origin;
  std::vector<ServedLinear> out;
  for (const config::LayerInfo& info : layers) {
    const config::ResolvedLayer r = config::ResolveLayer(config, info.name, info.type);
    ServedLinear l;
    l.specs.name = info.name;
    l.out_features = info.out_features;
    l.in_features = info.in_features;
    l.excluded = r.origin == Origin::kExcluded;
    if (r.quantized) {
      l.specs.weight = r.config.weight;
      l.specs.bias = r.config.bias;
      l.specs.input = r.config.input_tensors;
      l.specs.output = r.config.output_tensors;
    }
    const bool static_output = l.specs.output && !l.specs.output->is_dynamic;
    l.kv_cache_output =
        static_output && (r.kv_cache_index >= 0 ||
                          (config.kv_cache_quant_config.empty() &&
                           r.origin == Origin::kLayerName && IsKvProjection(info.name)));
    out.push_back(std::move(l));
  }
  return out;
}

bool IsVllmFormat(ExportFormat format) {
  return format == ExportFormat::kHfQuark || format == ExportFormat::kCompressedTensors;
}

const char* ServingTargetName(ServingTarget t) {
  switch (t) {
    case ServingTarget::kAny:
      return "any";
    case ServingTarget::kVllm:
      return "vllm";
  }
  return "?";
}

std::vector<std::string> VllmRefusals(ExportFormat format,
                                      const std::vector<ServedLinear>& layers) {
  if (!IsVllmFormat(format))
    return {std::string("vLLM serves hf_quark and compressed_tensors exports; ") +
            ExportFormatName(format) +
            (format == ExportFormat::kGguf       ? " is for llama.cpp"
             : format == ExportFormat::kOnnxQdq ? " is for onnxruntime"
                                                : " holds float weights under a quark "
                                                  "quantization_config, which vLLM reads as "
                                                  "quantized tensors")};
  std::vector<std::pair<std::string, std::string>> problems;  // layer, why
  if (format == ExportFormat::kCompressedTensors) {
    std::vector<ExportLayerSpecs> specs;
    for (const ServedLinear& l : layers)
      if (!l.excluded) specs.push_back(l.specs);
    const Status held = CheckExportSupport(format, specs);
    if (!held.ok()) return {held.message()};
    const std::string kv = CtKvProblem(layers);
    if (!kv.empty()) problems.push_back({"kv_cache", kv});
  }
  for (const ServedLinear& l : layers) {
    std::string why = format == ExportFormat::kHfQuark ? QuarkLayerProblem(l) : CtLayerProblem(l);
    if (why.empty()) why = FusedOnDiskProblem(format, l);
    if (!why.empty()) problems.push_back({l.specs.name, why});
  }
  for (auto& p : FusedShardProblems(layers)) problems.push_back(std::move(p));
  // One line per distinct reason, naming its first layer.
  std::vector<std::string> order;
  std::map<std::string, std::pair<std::string, int>> seen;
  for (const auto& [layer, why] : problems) {
    auto [it, inserted] = seen.try_emplace(why, layer, 0);
    if (inserted) order.push_back(why);
    ++it->second.second;
  }
  std::vector<std::string> out;
  for (const std::string& why : order) {
    const auto& [layer, count] = seen[why];
    out.push_back(layer + (count > 1 ? " (and " + std::to_string(count - 1) + " more)" : "") +
                  ": " + why);
  }
  return out;
}

std::string VllmArchitectureProblem(const models::ModelConfig& config) {
  static const char* kChecked[] = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                                   "Qwen3ForCausalLM", "Phi3ForCausalLM"};
  for (const char* a : kChecked)
    if (config.architecture == a) return "";
  return "quantd's vLLM checkers (tests/peers/vllm_*_check.py) follow vLLM's Llama-family "
         "loaders, not its " +
         config.architecture + " loader, so quantd claims no vLLM export of it";
}

std::vector<std::string> ArtifactConsumers(ExportFormat format,
                                           const std::vector<ServedLinear>& layers) {
  switch (format) {
    case ExportFormat::kHfQuark:
    case ExportFormat::kCompressedTensors:
      if (VllmRefusals(format, layers).empty()) return {"vllm"};
      return {};
    case ExportFormat::kGguf:
      return {"llama.cpp"};
    case ExportFormat::kOnnxQdq:
      return {"onnxruntime"};
    case ExportFormat::kTorchScript:
      return {"pytorch"};
    case ExportFormat::kHfFakeQuantized:
      return {};
  }
  return {};
}

}  // namespace quantd::exporter
