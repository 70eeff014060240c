// Page-level decoding for the Parquet reader (parquet_reader.cc), from
// parquet-format's parquet.thrift and Encodings.md: page decompression, the
// RLE/bit-packed hybrid, DELTA_BINARY_PACKED, and the values of a page in
// each supported encoding (PLAIN, dictionary indexes, RLE booleans,
// DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY, BYTE_STREAM_SPLIT) as JSON.
// Internal to the reader; torch-free.
//
// The bytes are untrusted: every decoder checks each count, length and width
// against the bytes it was given, and what it allocates for decoded data is
// charged to a DecodeBudget first. Errors carry no "dataset NAME: parquet "
// prefix (the reader adds it): a malformed page is INVALID_ARGUMENT, a limit
// RESOURCE_EXHAUSTED.
#ifndef QUANTD_WORKER_IO_DATASET_PARQUET_ENCODINGS_H_
#define QUANTD_WORKER_IO_DATASET_PARQUET_ENCODINGS_H_

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "worker/common/status.h"

namespace quantd::parquet {

// parquet.thrift enums.
enum PhysType {
  kBoolean = 0,
  kInt32 = 1,
  kInt64 = 2,
  kInt96 = 3,
  kFloat = 4,
  kDouble = 5,
  kByteArray = 6,
  kFixed = 7
};
enum Repetition { kRequired = 0, kOptional = 1, kRepeated = 2 };
enum PageType { kDataPage = 0, kIndexPage = 1, kDictionaryPage = 2, kDataPageV2 = 3 };
enum Encoding {
  kPlain = 0,
  kPlainDictionary = 2,
  kRle = 3,
  kBitPacked = 4,
  kDeltaBinaryPacked = 5,
  kDeltaLengthByteArray = 6,
  kDeltaByteArray = 7,
  kRleDictionary = 8,
  kByteStreamSplit = 9,
};
enum Converted {
  kUtf8 = 0,
  kMap = 1,
  kMapKeyValue = 2,
  kList = 3,
  kEnum = 4,
  kDecimal = 5,
  kJson = 19
};
// LogicalType union field ids.
enum Logical {
  kLString = 1,
  kLMap = 2,
  kLList = 3,
  kLEnum = 4,
  kLDecimal = 5,
  kLInteger = 10,
  kLJson = 12
};

// Names for error messages ("type 12" for an unknown one).
std::string TypeName(int t);
std::string EncodingName(int e);

// The little-endian uint32 at `p` (4 readable bytes).
uint32_t LoadU32(const char* p);

// Whether `s` is valid UTF-8 (no overlong forms, surrogates or code points
// past U+10FFFF), as nlohmann::json's dump() requires of strings.
bool ValidUtf8(std::string_view s);

// The decoded bytes one file may produce (ParquetLimits::max_decoded_bytes)
// and how many it has.
struct DecodeBudget {
  uint64_t max = 0;
  uint64_t used = 0;
  uint64_t left() const { return max - used; }
  // Takes `bytes` more; RESOURCE_EXHAUSTED, taking nothing, past `max`.
  Status Charge(uint64_t bytes);
};

// One page body `in`, compressed with parquet.thrift codec `codec`
// (UNCOMPRESSED, SNAPPY, GZIP or ZSTD), decompressed to exactly `size` bytes:
// `*out` views `in` when uncompressed, else `*buf`. `size` is bounded by
// `max_page_bytes` and charged to `budget` before `*buf` grows to it.
Status Decompress(int codec, std::string_view in, uint64_t size, uint64_t max_page_bytes,
                  DecodeBudget* budget, std::string* buf, std::string_view* out);

// RLE/bit-packed hybrid (Encodings.md): `count` values of `width` bits, each
// <= `max_value`.
Status DecodeHybrid(std::string_view data, int width, size_t count, uint64_t max_value,
                    std::vector<uint32_t>* out, const char* what);

// The bits needed to store `max` (0 for 0).
int BitWidth(uint64_t max);

// A read position in `d`, with the ULEB128 and zigzag varints.
struct Cursor {
  std::string_view d;
  size_t pos = 0;
  size_t left() const { return d.size() - pos; }
  bool Uvarint(uint64_t* v) {
    uint64_t out = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= d.size()) return false;
      uint8_t b = static_cast<uint8_t>(d[pos++]);
      out |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *v = out;
        return true;
      }
    }
    return false;
  }
  bool Zigzag(int64_t* v) {
    uint64_t u;
    if (!Uvarint(&u)) return false;
    *v = static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1);
    return true;
  }
};

// DELTA_BINARY_PACKED: exactly `count` values; advances `c` past them.
Status DecodeDeltaBinaryPacked(Cursor& c, size_t count, std::vector<int64_t>* out);

// The `count` present (non-null) values of one page, stored in `encoding` as
// physical type `type`, as JSON; integers read unsigned when `as_unsigned`.
// `dict` is the column's dictionary (nullptr without a dictionary page).
// Strings must be valid UTF-8; their bytes, and the strings a dictionary
// index copies, are charged to `budget`. Errors name the column `col`.
Status DecodeValues(int type, bool as_unsigned, const std::string& col, int encoding,
                    std::string_view data, size_t count, const std::vector<nlohmann::json>* dict,
                    DecodeBudget* budget, std::vector<nlohmann::json>* out);

}  // namespace quantd::parquet

#endif  // QUANTD_WORKER_IO_DATASET_PARQUET_ENCODINGS_H_
