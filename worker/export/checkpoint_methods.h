// The quantized checkpoints a job's model may be, by config.json's
// quantization_config.quant_method (quantized_checkpoint.h reads them).
// Torch-free: CreateJob checks the model's config.json with it.
#ifndef QUANTD_WORKER_EXPORT_CHECKPOINT_METHODS_H_
#define QUANTD_WORKER_EXPORT_CHECKPOINT_METHODS_H_

#include <string_view>

namespace quantd::exporter {

inline bool IsReadableCheckpointMethod(std::string_view quant_method) {
  return quant_method == "quark" || quant_method == "compressed-tensors";
}

// Ends the message that refuses any other quant_method.
inline constexpr char kReadableCheckpoints[] =
    "quantd starts from a float checkpoint or from a \"quark\" (real_quantized) or "
    "\"compressed-tensors\" one";

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_CHECKPOINT_METHODS_H_
