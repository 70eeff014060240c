#include "worker/export/quantized_checkpoint.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "worker/common/bounded_json.h"
#include "worker/export/checkpoint_methods.h"
#include "worker/export/compressed_tensors/ct_import.h"
#include "worker/export/hf/hf_files.h"
#include "worker/export/hf/hf_quark_import.h"

namespace quantd::exporter {

StatusOr<std::unique_ptr<QuantizedModel>> OpenQuantizedCheckpoint(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  QD_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  QD_ASSIGN_OR_RETURN(nlohmann::json cfg,
                      ParseBoundedJson(text, JsonBounds{json_limits::kModelConfig}, path,
                                       StatusCode::kInvalidArgument));
  if (!cfg.is_object() || !cfg.contains("quantization_config") ||
      cfg["quantization_config"].is_null())
    return std::unique_ptr<QuantizedModel>();
  const nlohmann::json& qc = cfg["quantization_config"];
  const nlohmann::json method =
      qc.is_object() ? qc.value("quant_method", nlohmann::json()) : nlohmann::json();
  if (method == "quark") {
    // An hf export holds the quantized values as floats: a float checkpoint.
    const nlohmann::json ex = qc.value("export", nlohmann::json());
    if (ex.is_object() && ex.value("weight_format", nlohmann::json()) == "fake_quantized")
      return std::unique_ptr<QuantizedModel>();
    return OpenQuarkModel(dir);
  }
  if (method == "compressed-tensors") return OpenCompressedTensorsModel(dir);
  return Status(StatusCode::kFailedPrecondition,
                path + ": quantization_config.quant_method " + method.dump() + " is not read; " +
                    kReadableCheckpoints,
                "UNSUPPORTED_CHECKPOINT");
}

}  // namespace quantd::exporter
