// Import of a compressed-tensors checkpoint (quant_method
// "compressed-tensors", quantization_status "compressed"): quantd's own
// compressed-tensors export or llm-compressor's, in the layouts
// ct_export.h writes (pack-quantized, int-quantized, float-quantized,
// naive-quantized).
//
// Each Linear's scheme comes from the config group that targets it (its
// exact name first, then "Linear"; a name in `ignore` stays float). The
// library stores integers in the signed range, so integer weights come back
// as intN with signed codes (a uintN export reads back as the same grid in
// intN; worker/pipeline/stored_quantization.h maps it back). weight_g_idx
// maps columns onto groups (WeightGroupIndex). Input scales become static
// input quantizers and <attention>.k_scale / v_scale the k/v projections'
// output quantizers under kv_cache_scheme.
#ifndef QUANTD_WORKER_EXPORT_COMPRESSED_TENSORS_CT_IMPORT_H_
#define QUANTD_WORKER_EXPORT_COMPRESSED_TENSORS_CT_IMPORT_H_

#include <memory>
#include <string>

#include "worker/common/status.h"
#include "worker/export/quantized_model.h"

namespace quantd::exporter {

// NOT_FOUND when config.json or the safetensors are missing;
// FAILED_PRECONDITION for a config that is not compressed-tensors or not
// "compressed"; UNIMPLEMENTED (FEATURE_NOT_BUILT) for formats, schemes and
// `re:` patterns this reader does not take, naming them; DATA_LOSS naming
// the tensor when a stored tensor does not fit its scheme.
StatusOr<std::unique_ptr<QuantizedModel>> OpenCompressedTensorsModel(const std::string& dir);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_COMPRESSED_TENSORS_CT_IMPORT_H_
