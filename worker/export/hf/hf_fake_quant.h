// Hugging Face export of the fake-quantized (dequantized) model: the same
// tensor names, dtypes and shard layout as the input checkpoint, with the
// quantized layers' weights replaced by their dequantized values, so any
// consumer that loads the original loads this one. config.json gains a
// `quantization_config` recording how the weights were quantized, and the
// tokenizer and other small files are copied.
#ifndef QUANTD_WORKER_EXPORT_HF_HF_FAKE_QUANT_H_
#define QUANTD_WORKER_EXPORT_HF_HF_FAKE_QUANT_H_

#include <ATen/ATen.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "worker/common/status.h"
#include "worker/export/artifact.h"
#include "worker/io/tensor_source.h"

namespace quantd::exporter {

struct HfFakeQuantExportOptions {
  std::string model_dir;   // source directory (config.json, tokenizer files)
  std::string output_dir;  // final artifact directory
  bool overwrite = false;
  // Who writes the output and the directory it must stay under (artifact.h).
  OutputOwner output_owner;
  // Stored as config.json's "quantization_config"; null = none.
  nlohmann::json quantization_config;
  // config.json's "tie_word_embeddings" when set (else the source's).
  std::optional<bool> tie_word_embeddings;
};

// Returns the value to export for a tensor (its quantized value, or the
// original); called once per tensor, in file order.
using TensorProvider = std::function<StatusOr<at::Tensor>(const std::string& name)>;
using ExportProgress = std::function<void(int done, int total)>;

// Writes the artifact atomically (staging directory, then rename).
StatusOr<Artifact> ExportHfFakeQuantized(const io::TensorSource& original,
                                         const TensorProvider& provider,
                                         const HfFakeQuantExportOptions& options,
                                         const ExportProgress& progress = nullptr);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_HF_HF_FAKE_QUANT_H_
