// The walk both real-quantized Hugging Face exports (hf_quark,
// compressed_tensors) make: every tensor of the checkpoint in file order
// into sharded safetensors, a quantized Linear's weight in the format's own
// layout and everything else as the input stores it; then config.json with
// the format's quantization_config and the side files, committed atomically
// (artifact.h). The formats differ only in what they write per quantized
// module, which they pass in.
#ifndef QUANTD_WORKER_EXPORT_HF_QUANTIZED_SAFETENSORS_H_
#define QUANTD_WORKER_EXPORT_HF_QUANTIZED_SAFETENSORS_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "worker/common/status.h"
#include "worker/export/artifact.h"
#include "worker/export/hf/hf_fake_quant.h"
#include "worker/export/hf/hf_files.h"
#include "worker/export/quantized_model.h"
#include "worker/io/safetensors/safetensors_format.h"

namespace quantd::exporter {

// Adds `t` as `dtype`, whose element size must be t's; errors start with
// `who` ("hf_quark: ").
Status WriteTensor(ShardedSafetensorsWriter& w, const std::string& who, const std::string& name,
                   const at::Tensor& t, io::SafetensorsDtype dtype);

struct QuantizedSafetensorsLayout {
  ExportFormat format = ExportFormat::kHfQuark;
  std::string who;  // message prefix, "hf_quark: "
  nlohmann::json quantization_config;
  // A quantized Linear's weight and its parameters, in place of
  // `<module>.weight` (`value`: its fake-quantized float values).
  std::function<Status(ShardedSafetensorsWriter&, const std::string& module,
                       const at::Tensor& value, const QuantizedLayer& layer)>
      write_weight;
  // After `<module>.weight` of every quantized module (activation and
  // KV-cache scales).
  std::function<Status(ShardedSafetensorsWriter&, const std::string& module,
                       const QuantizedLayer& layer)>
      write_module_extras;
};

struct QuantizedSafetensorsOptions {
  std::string output_dir;
  bool overwrite = false;
  OutputOwner output_owner;
  uint64_t max_shard_bytes = 0;
};

StatusOr<Artifact> ExportQuantizedSafetensors(const QuantizedModel& model,
                                              const QuantizedSafetensorsLayout& layout,
                                              const QuantizedSafetensorsOptions& options,
                                              const ExportProgress& progress);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_HF_QUANTIZED_SAFETENSORS_H_
