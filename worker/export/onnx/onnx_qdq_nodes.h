// The QuantizeLinear / DequantizeLinear pieces every quantd ONNX export
// writes: raw initializer bytes (4-bit codes packed two per byte), the ONNX
// type of a spec's codes, a weight as its codes with a DequantizeLinear, and
// a static activation quantizer as a QuantizeLinear + DequantizeLinear pair
// (FP8 ones as a saturating Cast pair, see AddActivationQdq). Shared by the
// language-model export (onnx_qdq.h) and the TorchScript one
// (worker/torchscript/script_onnx_export.h).
#ifndef QUANTD_WORKER_EXPORT_ONNX_ONNX_QDQ_NODES_H_
#define QUANTD_WORKER_EXPORT_ONNX_ONNX_QDQ_NODES_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "worker/common/status.h"
#include "worker/export/onnx/onnx_proto.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::exporter::onnx {

// The elements of `t`, little-endian, in its own dtype.
std::string RawBytes(const at::Tensor& t);
// 4-bit codes two per byte, the first element in the low nibble (ONNX INT4 /
// UINT4 raw_data).
std::string RawNibbles(const at::Tensor& codes);
// The ONNX type of a spec's codes: int8 / uint8 / int4 / uint4, FP8, or the
// float16 / bfloat16 of a cast. Other types (MX, int2 ...) have none: the
// result is then meaningless (check HasOnnxCodes first).
DataType CodeType(const quant::QuantSpec& s);
bool Is4Bit(const quant::QuantSpec& s);
// Whether a weight of spec `s` is written as its codes (DequantizeLinear,
// or a Cast for float16 / bfloat16): 8- and 4-bit integers with integer zero
// points, FP8 and the casts; not MX nor other integer widths.
bool HasOnnxCodes(const quant::QuantSpec& s);

// Adds a zero-point initializer of the spec's code type (0 when `z` is
// undefined, of `shape`).
std::string AddZeroPoint(GraphBuilder& g, const std::string& name, const quant::QuantSpec& s,
                         at::Tensor z, const std::vector<int64_t>& shape);

// The float weight from its codes: an initializer `name` of `codes` with a
// DequantizeLinear (nodes under `node_prefix`), or a Cast for float16 /
// bfloat16. `scale` (and `zero_point`, may be undefined) are laid out for
// DequantizeLinear: a scalar per tensor, [codes.size(axis)] per channel,
// codes' shape with `axis` divided into groups per group (block_size, opset
// 21). Returns the float tensor's name.
std::string AddDequantizedWeight(GraphBuilder& g, const std::string& name,
                                 const std::string& node_prefix, const quant::QuantSpec& s,
                                 const at::Tensor& codes, const at::Tensor& scale,
                                 const at::Tensor& zero_point, int64_t axis);

// x -> QuantizeLinear -> DequantizeLinear with a static per-tensor
// quantizer's `qparams` (nodes and initializers under `prefix`). An FP8 one
// is written as x / scale -> Cast to FP8 (saturating, round half to even, as
// QuantizeLinear) -> Cast back -> * scale: onnxruntime's extended level fuses
// DequantizeLinear -> MatMul (-> QuantizeLinear) into MatMulIntegerToFloat or
// QLinearMatMul, which have no FP8 type, and then refuses the model
// (onnxruntime 1.30.0). INTERNAL when the scale is missing.
StatusOr<std::string> AddActivationQdq(GraphBuilder& g, const std::string& prefix,
                                       const quant::QuantSpec& spec, const quant::QParams& qparams,
                                       const std::string& x);

}  // namespace quantd::exporter::onnx

#endif  // QUANTD_WORKER_EXPORT_ONNX_ONNX_QDQ_NODES_H_
