// A job's model directory that already holds a real-quantized checkpoint:
// config.json's quantization_config names the format, and the matching
// importer presents it as a QuantizedModel whose original() is the
// dequantized checkpoint (hf/dequantized_checkpoint.h).
#ifndef QUANTD_WORKER_EXPORT_QUANTIZED_CHECKPOINT_H_
#define QUANTD_WORKER_EXPORT_QUANTIZED_CHECKPOINT_H_

#include <memory>
#include <string>

#include "worker/common/status.h"
#include "worker/export/quantized_model.h"

namespace quantd::exporter {

// nullptr when config.json has no quantization_config or a quark one whose
// export.weight_format is "fake_quantized" (quantd's hf export: the
// quantized values stored as floats), which are read as float models.
// quant_method "quark" (real_quantized) and "compressed-tensors" open with
// their importers, whose errors come back as they are; any other
// quant_method is FAILED_PRECONDITION (reason UNSUPPORTED_CHECKPOINT)
// naming it.
StatusOr<std::unique_ptr<QuantizedModel>> OpenQuantizedCheckpoint(const std::string& dir);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_QUANTIZED_CHECKPOINT_H_
