#include "worker/export/hf/quark_packing.h"

#include <c10/util/Exception.h>

#include <string>
#include <vector>

namespace quantd::exporter {
namespace {

// Rows x last-axis view of a CPU tensor as uint8 bytes (int8 codes keep their
// two's-complement bits).
struct Rows {
  at::Tensor bytes;  // contiguous uint8 [rows, n]
  int64_t rows = 0;
  int64_t n = 0;
};

StatusOr<Rows> ByteRows(const at::Tensor& codes, const char* what) {
  if (codes.scalar_type() != at::kByte && codes.scalar_type() != at::kChar)
    return InvalidArgumentError(std::string(what) + " takes int8 or uint8 codes");
  if (codes.dim() == 0) return InvalidArgumentError(std::string(what) + " needs at least 1 dim");
  Rows r;
  r.n = codes.size(-1);
  r.rows = r.n == 0 ? 0 : codes.numel() / r.n;
  r.bytes = codes.to(at::kCPU).contiguous().view(at::kByte).reshape({r.rows, r.n});
  return r;
}

std::vector<int64_t> WithLast(const at::Tensor& t, int64_t last) {
  std::vector<int64_t> s = t.sizes().vec();
  s.back() = last;
  return s;
}

template <typename F>
auto Guard(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::Error& e) {
    return InternalError(std::string("packing: ") + e.what_without_backtrace());
  }
}

}  // namespace

StatusOr<at::Tensor> PackInt4Reorder(const at::Tensor& codes) {
  return Guard([&]() -> StatusOr<at::Tensor> {
    if (codes.dim() == 0) return codes.to(at::kInt);
    QD_ASSIGN_OR_RETURN(Rows r, ByteRows(codes, "PackInt4Reorder"));
    const int64_t words = (r.n + 7) / 8;
    at::Tensor out = at::zeros({r.rows, words}, at::kInt);
    const uint8_t* src = r.bytes.data_ptr<uint8_t>();
    int32_t* dst = out.data_ptr<int32_t>();
    for (int64_t row = 0; row < r.rows; ++row) {
      for (int64_t c = 0; c < words; ++c) {
        uint32_t word = 0;
        for (int i = 0; i < 8; ++i) {
          const int64_t idx = c * 8 + kInt4Reorder[i];
          if (idx >= r.n) continue;  // zero padding
          word |= static_cast<uint32_t>(src[row * r.n + idx] & 0x0F) << (4 * i);
        }
        dst[row * words + c] = static_cast<int32_t>(word);
      }
    }
    return out.reshape(WithLast(codes, words));
  });
}

StatusOr<at::Tensor> UnpackInt4Reorder(const at::Tensor& packed, int64_t n, bool is_signed) {
  return Guard([&]() -> StatusOr<at::Tensor> {
    if (packed.scalar_type() != at::kInt)
      return InvalidArgumentError("packed 4-bit codes must be int32");
    if (packed.dim() == 0) return packed.to(at::kChar);
    const int64_t words = packed.size(-1);
    if (words != (n + 7) / 8)
      return InvalidArgumentError("packed 4-bit axis holds " + std::to_string(words) + " words; " +
                                  std::to_string(n) + " codes need " + std::to_string((n + 7) / 8));
    const int64_t rows = words == 0 ? 0 : packed.numel() / words;
    at::Tensor src_t = packed.contiguous().reshape({rows, words});
    at::Tensor out = at::empty({rows, n}, at::kChar);
    const int32_t* src = src_t.data_ptr<int32_t>();
    int8_t* dst = out.data_ptr<int8_t>();
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t c = 0; c < words; ++c) {
        const uint32_t word = static_cast<uint32_t>(src[row * words + c]);
        for (int i = 0; i < 8; ++i) {
          const int64_t idx = c * 8 + kInt4Reorder[i];
          if (idx >= n) continue;
          int v = static_cast<int>((word >> (4 * i)) & 0x0F);
          if (is_signed && v >= 8) v -= 16;
          dst[row * n + idx] = static_cast<int8_t>(v);
        }
      }
    }
    return out.reshape(WithLast(packed, n));
  });
}

StatusOr<at::Tensor> PackFp4Pairs(const at::Tensor& codes) {
  return Guard([&]() -> StatusOr<at::Tensor> {
    QD_ASSIGN_OR_RETURN(Rows r, ByteRows(codes, "PackFp4Pairs"));
    const int64_t m = (r.n + 1) / 2;
    at::Tensor out = at::zeros({r.rows, m}, at::kByte);
    const uint8_t* src = r.bytes.data_ptr<uint8_t>();
    uint8_t* dst = out.data_ptr<uint8_t>();
    for (int64_t row = 0; row < r.rows; ++row) {
      for (int64_t j = 0; j < r.n; ++j) {
        const uint8_t v = src[row * r.n + j] & 0x0F;
        dst[row * m + j / 2] |= (j % 2 == 0) ? v : static_cast<uint8_t>(v << 4);
      }
    }
    return out.reshape(WithLast(codes, m));
  });
}

StatusOr<at::Tensor> UnpackFp4Pairs(const at::Tensor& packed, int64_t n) {
  return Guard([&]() -> StatusOr<at::Tensor> {
    QD_ASSIGN_OR_RETURN(Rows r, ByteRows(packed, "UnpackFp4Pairs"));
    if (r.n != (n + 1) / 2)
      return InvalidArgumentError("packed FP4 axis holds " + std::to_string(r.n) + " bytes; " +
                                  std::to_string(n) + " elements need " +
                                  std::to_string((n + 1) / 2));
    at::Tensor out = at::empty({r.rows, n}, at::kByte);
    const uint8_t* src = r.bytes.data_ptr<uint8_t>();
    uint8_t* dst = out.data_ptr<uint8_t>();
    for (int64_t row = 0; row < r.rows; ++row) {
      for (int64_t j = 0; j < n; ++j) {
        const uint8_t b = src[row * r.n + j / 2];
        dst[row * n + j] = (j % 2 == 0) ? (b & 0x0F) : (b >> 4);
      }
    }
    return out.reshape(WithLast(packed, n));
  });
}

StatusOr<at::Tensor> PackFp6(const at::Tensor& codes) {
  return Guard([&]() -> StatusOr<at::Tensor> {
    QD_ASSIGN_OR_RETURN(Rows r, ByteRows(codes, "PackFp6"));
    if (r.n % 4 != 0)
      return InvalidArgumentError("FP6 packing needs a multiple of 4 elements per row, got " +
                                  std::to_string(r.n));
    const int64_t m = r.n / 4 * 3;
    at::Tensor out = at::empty({r.rows, m}, at::kByte);
    const uint8_t* src = r.bytes.data_ptr<uint8_t>();
    uint8_t* dst = out.data_ptr<uint8_t>();
    for (int64_t row = 0; row < r.rows; ++row) {
      for (int64_t q = 0; q < r.n / 4; ++q) {
        const uint8_t* v = src + row * r.n + q * 4;
        const uint32_t word =
            (v[0] & 0x3Fu) | (v[1] & 0x3Fu) << 6 | (v[2] & 0x3Fu) << 12 | (v[3] & 0x3Fu) << 18;
        uint8_t* o = dst + row * m + q * 3;
        o[0] = static_cast<uint8_t>(word);
        o[1] = static_cast<uint8_t>(word >> 8);
        o[2] = static_cast<uint8_t>(word >> 16);
      }
    }
    return out.reshape(WithLast(codes, m));
  });
}

StatusOr<at::Tensor> UnpackFp6(const at::Tensor& packed, int64_t n) {
  return Guard([&]() -> StatusOr<at::Tensor> {
    QD_ASSIGN_OR_RETURN(Rows r, ByteRows(packed, "UnpackFp6"));
    if (n % 4 != 0 || r.n != n / 4 * 3)
      return InvalidArgumentError("packed FP6 axis holds " + std::to_string(r.n) + " bytes; " +
                                  std::to_string(n) + " elements do not fit");
    at::Tensor out = at::empty({r.rows, n}, at::kByte);
    const uint8_t* src = r.bytes.data_ptr<uint8_t>();
    uint8_t* dst = out.data_ptr<uint8_t>();
    for (int64_t row = 0; row < r.rows; ++row) {
      for (int64_t q = 0; q < n / 4; ++q) {
        const uint8_t* b = src + row * r.n + q * 3;
        const uint32_t word =
            b[0] | static_cast<uint32_t>(b[1]) << 8 | static_cast<uint32_t>(b[2]) << 16;
        for (int i = 0; i < 4; ++i) dst[row * n + q * 4 + i] = (word >> (6 * i)) & 0x3F;
      }
    }
    return out.reshape(WithLast(packed, n));
  });
}

}  // namespace quantd::exporter
