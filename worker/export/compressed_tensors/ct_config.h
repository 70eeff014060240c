// The quantization_config of a compressed-tensors export: what
// llm-compressor writes into config.json and vLLM's compressed_tensors loader
// parses (CompressedTensorsConfig.from_config). Torch-free.
//
//   {"quant_method": "compressed-tensors", "quantization_status": "compressed",
//    "format": "pack-quantized" | "int-quantized" | "float-quantized" |
//              "naive-quantized" | "mixed-precision",
//    "config_groups": {"group_0": {"targets": [...], "weights": {...},
//                                  "input_activations": {...} | null,
//                                  "output_activations": null, "format": ...}},
//    "ignore": [exact module names of the Linears left in float],
//    "kv_cache_scheme": {...} | null, "global_compression_ratio": null,
//    "version": kCtLibraryVersion}
//
// Each group's QuantizationArgs follow the library's pydantic model
// (quantization/quant_args.py); its format is the one the library's
// infer_module_format picks (compressors/format.py: int-quantized before
// pack-quantized before float-quantized before naive-quantized). Groups
// target "Linear" when there is one, else their exact module names.
// vllm-project/compressed-tensors at ac8e2ba82f4e0d5eaa40069f8fc642738f124cd4.
#ifndef QUANTD_WORKER_EXPORT_COMPRESSED_TENSORS_CT_CONFIG_H_
#define QUANTD_WORKER_EXPORT_COMPRESSED_TENSORS_CT_CONFIG_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/quant/spec.h"

namespace quantd::exporter {

// The library release whose layouts the export follows.
inline constexpr char kCtLibraryVersion[] = "0.18.0";

// One quantized Linear as the config sees it.
struct CtLayerQuant {
  std::string name;  // exact module name
  std::optional<quant::QuantSpec> weight;
  std::optional<quant::QuantSpec> input;
  // The weight's groups are runs of permuted columns (GPTQ act_order without
  // static_groups): weights.actorder "group", and the export holds weight_g_idx.
  bool group_actorder = false;
};

// The library's QuantizationArgs of one quantizer (weights or input
// activations); `spec` is one CheckExportSpec(kCompressedTensors) accepts.
nlohmann::json CtQuantizationArgs(const quant::QuantSpec& spec);

// The compression format the library infers for a Linear quantized so:
// "int-quantized" (integer weights and any input quantizer),
// "pack-quantized" (integer weights alone), "float-quantized" (FP8 weights
// and input quantizer), "naive-quantized" (FP8 weights alone).
std::string CtFormatFor(const std::optional<quant::QuantSpec>& weight,
                        const std::optional<quant::QuantSpec>& input);

// True when the format stores the weight packed (weight_packed + weight_shape).
bool CtFormatIsPacked(const std::string& format);

struct CtConfigInput {
  std::vector<CtLayerQuant> quantized;       // model order
  std::vector<std::string> unquantized;      // Linears left in float (-> ignore)
  std::optional<quant::QuantSpec> kv_cache;  // the k/v projections' output spec
};

// INVALID_ARGUMENT when nothing is quantized (compressed-tensors has no
// config for a float model) or a layer has no weight quantizer.
StatusOr<nlohmann::json> BuildCtQuantizationConfig(const CtConfigInput& in);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_COMPRESSED_TENSORS_CT_CONFIG_H_
