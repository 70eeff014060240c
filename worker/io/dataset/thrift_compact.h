// Thrift compact-protocol decoding, just enough to read Parquet's footer
// (FileMetaData) and page headers. The input is untrusted: every count is
// bounded by the bytes left that could hold it, nesting is bounded, and
// unknown fields are skipped by their wire type.
#ifndef QUANTD_WORKER_IO_DATASET_THRIFT_COMPACT_H_
#define QUANTD_WORKER_IO_DATASET_THRIFT_COMPACT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "worker/common/status.h"

namespace quantd::thrift {

// Compact-protocol wire types.
enum class CType : uint8_t {
  kStop = 0,
  kTrue = 1,
  kFalse = 2,
  kByte = 3,
  kI16 = 4,
  kI32 = 5,
  kI64 = 6,
  kDouble = 7,
  kBinary = 8,
  kList = 9,
  kSet = 10,
  kMap = 11,
  kStruct = 12,
};

// Errors are INVALID_ARGUMENT with a message such as "truncated varint at
// byte 12"; callers prefix what they were reading.
class CompactReader {
 public:
  CompactReader(std::string_view data, int max_depth) : data_(data), max_depth_(max_depth) {}

  size_t pos() const { return pos_; }

  // Reads one struct; `field` is called for each field and must consume its
  // value (a Read* call or Skip(type)).
  using FieldFn = std::function<Status(int16_t id, CType type)>;
  Status ReadStruct(const FieldFn& field);

  // Reads a list or set whose field type is `type`; `header` sees the element
  // count (already bounded by the bytes left) and type, then `element` is
  // called once per element and must consume it.
  using HeaderFn = std::function<Status(uint64_t count, CType elem)>;
  using ElementFn = std::function<Status(CType elem)>;
  Status ReadList(CType type, const HeaderFn& header, const ElementFn& element);

  // Integers of any width (byte, i16, i32, i64).
  Status ReadInt(CType type, int64_t* v);
  // An i32 field, range-checked.
  Status ReadI32(CType type, int32_t* v);
  // A bool field (the value is in the field header's type).
  Status ReadBool(CType type, bool* v);
  // A binary/string value; the view points into the input.
  Status ReadBinary(CType type, std::string_view* v);
  // Skips one value of `type`, recursively (depth-bounded).
  Status Skip(CType type);

 private:
  Status Varint(uint64_t* v);
  Status Error(const std::string& what) const;
  Status SkipValue(CType type, bool list_element);

  std::string_view data_;
  size_t pos_ = 0;
  int depth_ = 0;
  int max_depth_;
};

}  // namespace quantd::thrift

#endif  // QUANTD_WORKER_IO_DATASET_THRIFT_COMPACT_H_
