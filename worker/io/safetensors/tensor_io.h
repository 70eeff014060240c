// Bridges between safetensors dtypes and at::Tensor.
//
// The reader and writer cores are torch-free; model loading and export use
// these helpers to turn file bytes into tensors and back. FP8 has no ATen
// dtype in LibTorch 1.13, so FP8 tensors travel as uint8 bytes, and
// DecodeFp8() widens them to float when a caller asks for a float dtype.
#ifndef QUANTD_WORKER_IO_SAFETENSORS_TENSOR_IO_H_
#define QUANTD_WORKER_IO_SAFETENSORS_TENSOR_IO_H_

#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "worker/common/status.h"
#include "worker/io/safetensors/safetensors_format.h"
#include "worker/io/safetensors/safetensors_writer.h"

namespace quantd::io {

// The ATen dtype holding a safetensors dtype's bytes unchanged: F8_* -> kByte.
// UNIMPLEMENTED for U16/U32/U64, which have no ATen dtype in LibTorch 1.13.
StatusOr<at::ScalarType> StorageScalarType(SafetensorsDtype dtype);

// The safetensors dtype of an ATen dtype (kFloat -> F32, kByte -> U8, ...).
StatusOr<SafetensorsDtype> SafetensorsDtypeOf(at::ScalarType type);

// FP8 bytes (uint8 tensor) to float32 values: e4m3 is the OCP "fn" variant
// (no infinities, S.1111.111 is NaN); e5m2 follows IEEE (inf and NaN).
at::Tensor DecodeFp8(const at::Tensor& bytes, SafetensorsDtype dtype);

// Appends `tensor` (any device; copied to contiguous CPU) under `name`.
// `as` overrides the file dtype for raw byte tensors: a kByte tensor written
// as F8_E4M3 or F8_E5M2 keeps its bytes. INVALID_ARGUMENT when the tensor's
// element size does not match `as`.
Status AddTensor(SafetensorsWriter& writer, const std::string& name, const at::Tensor& tensor,
                 std::optional<SafetensorsDtype> as = std::nullopt);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_SAFETENSORS_TENSOR_IO_H_
