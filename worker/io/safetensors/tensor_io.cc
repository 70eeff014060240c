#include "worker/io/safetensors/tensor_io.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace quantd::io {
namespace {

float Fp8E4M3ToFloat(uint8_t b) {
  const int sign = b >> 7;
  const int exp = (b >> 3) & 0xF;
  const int man = b & 0x7;
  float v;
  if (exp == 0xF && man == 0x7) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<float>(man) / 8.0f, -6);
  } else {
    v = std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
  }
  return sign ? -v : v;
}

float Fp8E5M2ToFloat(uint8_t b) {
  const int sign = b >> 7;
  const int exp = (b >> 2) & 0x1F;
  const int man = b & 0x3;
  float v;
  if (exp == 0x1F) {
    v = man == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<float>(man) / 4.0f, -14);
  } else {
    v = std::ldexp(1.0f + static_cast<float>(man) / 4.0f, exp - 15);
  }
  return sign ? -v : v;
}

}  // namespace

StatusOr<at::ScalarType> StorageScalarType(SafetensorsDtype dtype) {
  switch (dtype) {
    case SafetensorsDtype::kBool:
      return at::kBool;
    case SafetensorsDtype::kU8:
      return at::kByte;
    case SafetensorsDtype::kI8:
      return at::kChar;
    case SafetensorsDtype::kF8E5M2:
      return at::kByte;
    case SafetensorsDtype::kF8E4M3:
      return at::kByte;
    case SafetensorsDtype::kI16:
      return at::kShort;
    case SafetensorsDtype::kF16:
      return at::kHalf;
    case SafetensorsDtype::kBF16:
      return at::kBFloat16;
    case SafetensorsDtype::kI32:
      return at::kInt;
    case SafetensorsDtype::kF32:
      return at::kFloat;
    case SafetensorsDtype::kF64:
      return at::kDouble;
    case SafetensorsDtype::kI64:
      return at::kLong;
    case SafetensorsDtype::kU16:
    case SafetensorsDtype::kU32:
    case SafetensorsDtype::kU64:
      break;
  }
  return UnimplementedError(std::string("safetensors dtype ") + SafetensorsDtypeName(dtype) +
                            " has no LibTorch equivalent and cannot be loaded");
}

StatusOr<SafetensorsDtype> SafetensorsDtypeOf(at::ScalarType type) {
  switch (type) {
    case at::kBool:
      return SafetensorsDtype::kBool;
    case at::kByte:
      return SafetensorsDtype::kU8;
    case at::kChar:
      return SafetensorsDtype::kI8;
    case at::kShort:
      return SafetensorsDtype::kI16;
    case at::kHalf:
      return SafetensorsDtype::kF16;
    case at::kBFloat16:
      return SafetensorsDtype::kBF16;
    case at::kInt:
      return SafetensorsDtype::kI32;
    case at::kFloat:
      return SafetensorsDtype::kF32;
    case at::kDouble:
      return SafetensorsDtype::kF64;
    case at::kLong:
      return SafetensorsDtype::kI64;
    default:
      break;
  }
  return InvalidArgumentError(std::string("tensor dtype ") + c10::toString(type) +
                              " cannot be stored in safetensors");
}

at::Tensor DecodeFp8(const at::Tensor& bytes, SafetensorsDtype dtype) {
  std::vector<float> lut(256);
  for (int i = 0; i < 256; ++i) {
    lut[i] = dtype == SafetensorsDtype::kF8E5M2 ? Fp8E5M2ToFloat(static_cast<uint8_t>(i))
                                                : Fp8E4M3ToFloat(static_cast<uint8_t>(i));
  }
  at::Tensor table = at::from_blob(lut.data(), {256}, at::kFloat).clone();
  at::Tensor idx = bytes.to(at::kLong).reshape({-1});
  return table.index_select(0, idx).reshape(bytes.sizes());
}

Status AddTensor(SafetensorsWriter& writer, const std::string& name, const at::Tensor& tensor,
                 std::optional<SafetensorsDtype> as) {
  try {
    at::Tensor t = tensor.to(at::kCPU).contiguous();
    SafetensorsDtype dtype;
    if (as.has_value()) {
      if (SafetensorsDtypeSize(*as) != static_cast<int>(t.element_size())) {
        return InvalidArgumentError(
            "tensor '" + name + "' has " + std::to_string(t.element_size()) +
            "-byte elements and cannot be written as " + SafetensorsDtypeName(*as));
      }
      dtype = *as;
    } else {
      QD_ASSIGN_OR_RETURN(dtype, SafetensorsDtypeOf(t.scalar_type()));
    }
    std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
    return writer.Add(name, dtype, shape, t.data_ptr(),
                      static_cast<uint64_t>(t.numel()) * t.element_size());
  } catch (const c10::Error& e) {
    return InternalError("writing tensor '" + name + "': " + e.what_without_backtrace());
  }
}

}  // namespace quantd::io
