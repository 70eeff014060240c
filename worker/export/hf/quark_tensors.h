// One quantized Linear weight as the reference toolkit's HF export stores it
// (weight_format "real_quantized", pack_method "reorder"), and back.
//
// Layouts, for a weight [out, in] quantized with spec s:
//   int8 / uint8      weight I8 / U8 [out, in]; per_group: transposed [in, out]
//   int4 / uint4      weight I32 packed 8 per word (quark_packing.h):
//                     per_tensor / per_channel [out, in/8]; per_group
//                     transposed, [in, out/8]
//   fp8_e4m3 / e5m2   weight F8_E4M3 / F8_E5M2 raw bytes [out, in]
//   MXFP4             weight U8 [out, in/2], even element in the low nibble
//   MXFP6             weight U8 [out, in/4*3] (four elements per 3 bytes)
//   MXFP8             weight F8_E4M3 / F8_E5M2 [out, in]
//   float16/bfloat16  weight F16 / BF16 [out, in]
// weight_scale: float32; per_tensor 0-dim, per_channel [out], per_group
// [out, in/gs] except integers, whose per-group scale is transposed
// [in/gs, out]; MX: uint8 E8M0 [out, ceil(in/32)] (a partial last block is
// padded, as the kernels pad it). weight_zero_point (integers only, also
// symmetric ones): the weight's dtype, laid out like the scale; 4-bit ones
// packed like the weight (per_group [in/gs, out/8], per_channel [out/8],
// per_tensor a 0-dim int32).
#ifndef QUANTD_WORKER_EXPORT_HF_QUARK_TENSORS_H_
#define QUANTD_WORKER_EXPORT_HF_QUARK_TENSORS_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/safetensors/safetensors_format.h"
#include "worker/quant/fake_quant.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::exporter {

struct StoredTensor {
  at::Tensor tensor;  // CPU; FP8 as uint8 bytes
  io::SafetensorsDtype dtype = io::SafetensorsDtype::kF32;

  bool defined() const { return tensor.defined(); }
};

struct QuarkStoredWeight {
  StoredTensor weight;
  StoredTensor scale;       // undefined for casts
  StoredTensor zero_point;  // integers only
};

// CheckExportSpec(kHfQuark, spec, kWeight): INVALID_ARGUMENT naming the
// dtype or granularity the reference's format has no real_quantized layout
// for (int2, int3, MXINT8, per_channel along the input axis, per_group along
// the output axis).
Status CheckQuarkWeightSpec(const quant::QuantSpec& spec);

// Whether the layout packs several codes into one stored element (4-bit
// integers, MXFP4, MXFP6), which the reference defines for 2-D weights
// only. False for the layouts that store one element per value.
bool IsPackedQuarkWeight(const quant::QuantSpec& spec);

// `value` is the fake-quantized weight [out, in] (float32) and `qparams` the
// exact parameters it was quantized with; the codes are RealQuantize(value).
StatusOr<QuarkStoredWeight> EncodeQuarkWeight(const at::Tensor& value, const quant::QuantSpec& spec,
                                              const quant::QParams& qparams);

// A static activation quantizer's input_scale / output_scale (0-dim
// float32, at least `min_scale`) and, for integers, its zero point: 0-dim,
// int8 / uint8 as the dtype's sign, int32 for 4-bit ones, float32 when
// fractional.
struct QuarkStoredActivation {
  StoredTensor scale;
  StoredTensor zero_point;  // integers only
};
StatusOr<QuarkStoredActivation> EncodeQuarkActivation(const quant::QuantSpec& spec,
                                                      const quant::QParams& qparams,
                                                      double min_scale = 0.0);

// The real-quantized codes and parameters (quant::QuantizedTensor layout:
// codes [out, in], QParams shapes) of a stored weight of `shape` [out, in].
// DATA_LOSS naming what does not match.
StatusOr<quant::QuantizedTensor> DecodeQuarkWeight(const QuarkStoredWeight& stored,
                                                   const quant::QuantSpec& spec,
                                                   const std::vector<int64_t>& shape);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_HF_QUARK_TENSORS_H_
