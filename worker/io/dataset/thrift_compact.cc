#include "worker/io/dataset/thrift_compact.h"

#include <cstring>
#include <string>

namespace quantd::thrift {
namespace {

int64_t ZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

bool ValidType(uint8_t t) { return t >= 1 && t <= 12; }

}  // namespace

Status CompactReader::Error(const std::string& what) const {
  return InvalidArgumentError(what + " at byte " + std::to_string(pos_));
}

Status CompactReader::Varint(uint64_t* v) {
  uint64_t out = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos_ >= data_.size()) return Error("truncated varint");
    uint8_t b = static_cast<uint8_t>(data_[pos_++]);
    if (shift == 63 && (b & 0x7e) != 0) return Error("varint overflows 64 bits");
    out |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *v = out;
      return OkStatus();
    }
  }
  return Error("varint longer than 10 bytes");
}

Status CompactReader::ReadStruct(const FieldFn& field) {
  if (++depth_ > max_depth_)
    return Error("thrift nesting deeper than " + std::to_string(max_depth_));
  int16_t last_id = 0;
  while (true) {
    if (pos_ >= data_.size()) return Error("truncated struct");
    uint8_t b = static_cast<uint8_t>(data_[pos_++]);
    if (b == 0) break;
    uint8_t type = b & 0x0f;
    uint8_t delta = b >> 4;
    if (!ValidType(type)) return Error("unknown thrift type " + std::to_string(type));
    int16_t id;
    if (delta != 0) {
      id = static_cast<int16_t>(last_id + delta);
    } else {
      uint64_t raw;
      if (Status s = Varint(&raw); !s.ok()) return s;
      int64_t z = ZigZag(raw);
      if (z < INT16_MIN || z > INT16_MAX) return Error("field id out of range");
      id = static_cast<int16_t>(z);
    }
    last_id = id;
    if (Status s = field(id, static_cast<CType>(type)); !s.ok()) return s;
  }
  --depth_;
  return OkStatus();
}

Status CompactReader::ReadList(CType type, const HeaderFn& header, const ElementFn& element) {
  if (type != CType::kList && type != CType::kSet) return Error("expected a list");
  if (++depth_ > max_depth_)
    return Error("thrift nesting deeper than " + std::to_string(max_depth_));
  if (pos_ >= data_.size()) return Error("truncated list header");
  uint8_t b = static_cast<uint8_t>(data_[pos_++]);
  uint64_t count = b >> 4;
  uint8_t elem = b & 0x0f;
  if (count == 15) {
    if (Status s = Varint(&count); !s.ok()) return s;
  }
  if (count > 0 && !ValidType(elem)) return Error("unknown list element type");
  // Every element takes at least one byte.
  if (count > data_.size() - pos_)
    return Error("list of " + std::to_string(count) + " elements is longer than its data");
  if (Status s = header(count, static_cast<CType>(elem)); !s.ok()) return s;
  for (uint64_t i = 0; i < count; ++i) {
    if (Status s = element(static_cast<CType>(elem)); !s.ok()) return s;
  }
  --depth_;
  return OkStatus();
}

Status CompactReader::ReadInt(CType type, int64_t* v) {
  if (type == CType::kByte) {
    if (pos_ >= data_.size()) return Error("truncated byte");
    *v = static_cast<int8_t>(data_[pos_++]);
    return OkStatus();
  }
  if (type != CType::kI16 && type != CType::kI32 && type != CType::kI64)
    return Error("expected an integer");
  uint64_t raw;
  if (Status s = Varint(&raw); !s.ok()) return s;
  *v = ZigZag(raw);
  return OkStatus();
}

Status CompactReader::ReadI32(CType type, int32_t* v) {
  int64_t w;
  if (Status s = ReadInt(type, &w); !s.ok()) return s;
  if (w < INT32_MIN || w > INT32_MAX) return Error("i32 out of range");
  *v = static_cast<int32_t>(w);
  return OkStatus();
}

Status CompactReader::ReadBool(CType type, bool* v) {
  if (type != CType::kTrue && type != CType::kFalse) return Error("expected a bool");
  *v = type == CType::kTrue;
  return OkStatus();
}

Status CompactReader::ReadBinary(CType type, std::string_view* v) {
  if (type != CType::kBinary) return Error("expected a string");
  uint64_t len;
  if (Status s = Varint(&len); !s.ok()) return s;
  if (len > data_.size() - pos_)
    return Error("string of " + std::to_string(len) + " bytes runs past the data");
  *v = data_.substr(pos_, len);
  pos_ += len;
  return OkStatus();
}

Status CompactReader::Skip(CType type) { return SkipValue(type, false); }

Status CompactReader::SkipValue(CType type, bool list_element) {
  switch (type) {
    case CType::kTrue:
    case CType::kFalse:
      // A bool field holds its value in the header; a list element is a byte.
      if (list_element) {
        if (pos_ >= data_.size()) return Error("truncated bool");
        ++pos_;
      }
      return OkStatus();
    case CType::kByte:
    case CType::kI16:
    case CType::kI32:
    case CType::kI64: {
      int64_t v;
      return ReadInt(type, &v);
    }
    case CType::kDouble:
      if (data_.size() - pos_ < 8) return Error("truncated double");
      pos_ += 8;
      return OkStatus();
    case CType::kBinary: {
      std::string_view v;
      return ReadBinary(type, &v);
    }
    case CType::kList:
    case CType::kSet:
      return ReadList(
          type, [](uint64_t, CType) { return OkStatus(); },
          [this](CType elem) { return SkipValue(elem, true); });
    case CType::kMap: {
      if (++depth_ > max_depth_)
        return Error("thrift nesting deeper than " + std::to_string(max_depth_));
      uint64_t count;
      if (Status s = Varint(&count); !s.ok()) return s;
      if (count > 0) {
        if (pos_ >= data_.size()) return Error("truncated map header");
        uint8_t kv = static_cast<uint8_t>(data_[pos_++]);
        if (!ValidType(kv >> 4) || !ValidType(kv & 0x0f)) return Error("unknown map element type");
        if (count > (data_.size() - pos_) / 2) return Error("map longer than its data");
        for (uint64_t i = 0; i < count; ++i) {
          if (Status s = SkipValue(static_cast<CType>(kv >> 4), true); !s.ok()) return s;
          if (Status s = SkipValue(static_cast<CType>(kv & 0x0f), true); !s.ok()) return s;
        }
      }
      --depth_;
      return OkStatus();
    }
    case CType::kStruct:
      return ReadStruct([this](int16_t, CType t) { return SkipValue(t, false); });
    default:
      return Error("unknown thrift type");
  }
}

}  // namespace quantd::thrift
