// Page-level decoding for the Parquet reader: see parquet_encodings.h.
#include "worker/io/dataset/parquet_encodings.h"

#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

namespace quantd::parquet {
namespace {

using json = nlohmann::json;

std::string CodecName(int c) {
  static const char* const kNames[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO",
                                       "BROTLI",       "LZ4",    "ZSTD", "LZ4_RAW"};
  return c >= 0 && c < 8 ? kNames[c] : "codec " + std::to_string(c);
}

// LSB-first bit reader over `data` (Encodings.md's bit-packing order).
uint64_t ReadBits(const uint8_t* data, uint64_t bit, int width) {
  uint64_t v = 0;
  int got = 0;
  while (got < width) {
    int off = static_cast<int>(bit & 7);
    int take = std::min(8 - off, width - got);
    uint64_t b = (data[bit >> 3] >> off) & ((1u << take) - 1);
    v |= b << got;
    got += take;
    bit += take;
  }
  return v;
}

// `bytes` as a JSON string, which must be valid UTF-8; charged to `budget`.
Status ToJson(const std::string& col, std::string_view bytes, DecodeBudget* budget, json* out) {
  if (!ValidUtf8(bytes))
    return InvalidArgumentError("column \"" + col + "\" holds a value that is not valid UTF-8");
  QD_RETURN_IF_ERROR(budget->Charge(bytes.size()));
  *out = std::string(bytes);
  return OkStatus();
}

}  // namespace

std::string TypeName(int t) {
  static const char* const kNames[] = {"BOOLEAN", "INT32",  "INT64",      "INT96",
                                       "FLOAT",   "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
  return t >= 0 && t < 8 ? kNames[t] : "type " + std::to_string(t);
}
std::string EncodingName(int e) {
  static const char* const kNames[] = {
      "PLAIN",          "GROUP_VAR_INT",       "PLAIN_DICTIONARY",        "RLE",
      "BIT_PACKED",     "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
      "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
  return e >= 0 && e < 10 ? kNames[e] : "encoding " + std::to_string(e);
}

uint32_t LoadU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // Parquet is little-endian, as are the hosts quantd runs on.
}

bool ValidUtf8(std::string_view s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    uint8_t c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i < static_cast<size_t>(len)) return false;
    for (int k = 1; k < len; ++k) {
      uint8_t cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}

Status DecodeBudget::Charge(uint64_t bytes) {
  if (bytes > max - used) {
    return ResourceExhaustedError("decodes to more than max_decoded_bytes (" + std::to_string(max) +
                                  " bytes)");
  }
  used += bytes;
  return OkStatus();
}

Status Decompress(int codec, std::string_view in, uint64_t size, uint64_t max_page_bytes,
                  DecodeBudget* budget, std::string* buf, std::string_view* out) {
  if (size > max_page_bytes)
    return ResourceExhaustedError("page of " + std::to_string(size) +
                                  " bytes is over max_page_bytes");
  if (codec == 0) {
    if (in.size() != size)
      return InvalidArgumentError("uncompressed page of " + std::to_string(in.size()) +
                                  " bytes declares " + std::to_string(size));
    *out = in;
    return OkStatus();
  }
  if (size == 0 && in.empty()) {  // Nothing was compressed (DATA_PAGE_V2 with only nulls).
    *out = std::string_view();
    return OkStatus();
  }
  QD_RETURN_IF_ERROR(budget->Charge(size));
  if (codec == 1) {  // SNAPPY
    size_t len;
    if (snappy_uncompressed_length(in.data(), in.size(), &len) != SNAPPY_OK)
      return InvalidArgumentError("page has a bad snappy header");
    if (len != size)
      return InvalidArgumentError("snappy page decompresses to " + std::to_string(len) +
                                  " bytes, its header says " + std::to_string(size));
    buf->resize(size);
    size_t got = size;
    if (snappy_uncompress(in.data(), in.size(), buf->data(), &got) != SNAPPY_OK || got != size)
      return InvalidArgumentError("page has corrupt snappy data");
  } else if (codec == 6) {  // ZSTD
    unsigned long long frame = ZSTD_getFrameContentSize(in.data(), in.size());
    if (frame == ZSTD_CONTENTSIZE_ERROR) return InvalidArgumentError("page has a bad zstd frame");
    if (frame != ZSTD_CONTENTSIZE_UNKNOWN && frame > size)
      return InvalidArgumentError("zstd page decompresses to " + std::to_string(frame) +
                                  " bytes, its header says " + std::to_string(size));
    buf->resize(size);
    size_t got = ZSTD_decompress(buf->data(), size, in.data(), in.size());
    if (ZSTD_isError(got))
      return InvalidArgumentError(std::string("page has corrupt zstd data: ") +
                                  ZSTD_getErrorName(got));
    if (got != size)
      return InvalidArgumentError("zstd page decompresses to " + std::to_string(got) +
                                  " bytes, its header says " + std::to_string(size));
  } else if (codec == 2) {  // GZIP, possibly several concatenated members
    if (in.size() > UINT32_MAX || size > UINT32_MAX)
      return ResourceExhaustedError("gzip page is over 4 GiB");
    buf->resize(size);
    z_stream zs{};
    if (inflateInit2(&zs, 15 + 32) != Z_OK) return InvalidArgumentError("cannot start gzip");
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs.avail_in = static_cast<uInt>(in.size());
    zs.next_out = reinterpret_cast<Bytef*>(buf->data());
    zs.avail_out = static_cast<uInt>(size);
    Status st;
    while (true) {
      int rc = inflate(&zs, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        if (zs.avail_in == 0) break;
        if (inflateReset(&zs) != Z_OK) {
          st = InvalidArgumentError("page has corrupt gzip data");
          break;
        }
        continue;
      }
      if (rc == Z_OK) continue;
      if (rc == Z_BUF_ERROR && zs.avail_out == 0) {
        st = InvalidArgumentError("gzip page decompresses to more than its header's " +
                                  std::to_string(size) + " bytes");
      } else {
        st = InvalidArgumentError("page has corrupt or truncated gzip data");
      }
      break;
    }
    uint64_t got = size - zs.avail_out;
    inflateEnd(&zs);
    QD_RETURN_IF_ERROR(st);
    if (got != size)
      return InvalidArgumentError("gzip page decompresses to " + std::to_string(got) +
                                  " bytes, its header says " + std::to_string(size));
  } else {
    return InvalidArgumentError("compression codec " + CodecName(codec) + " is not supported");
  }
  *out = *buf;
  return OkStatus();
}

// RLE/bit-packed hybrid (Encodings.md): `count` values of `width` bits, each
// <= `max_value`.
Status DecodeHybrid(std::string_view data, int width, size_t count, uint64_t max_value,
                    std::vector<uint32_t>* out, const char* what) {
  if (width < 0 || width > 32)
    return InvalidArgumentError(std::string(what) + " bit width " + std::to_string(width) +
                                " is over 32");
  out->clear();
  out->reserve(count);
  const uint8_t* p = reinterpret_cast<const uint8_t*>(data.data());
  size_t pos = 0, n = data.size();
  while (out->size() < count) {
    uint64_t header = 0;
    int shift = 0;
    while (true) {
      if (pos >= n || shift > 63)
        return InvalidArgumentError(std::string(what) + " run header is truncated");
      uint8_t b = p[pos++];
      header |= static_cast<uint64_t>(b & 0x7f) << shift;
      shift += 7;
      if (!(b & 0x80)) break;
    }
    size_t left = count - out->size();
    if (header & 1) {
      uint64_t groups = header >> 1;
      uint64_t values = std::min<uint64_t>(groups, (left + 7) / 8) * 8;
      size_t take = std::min<uint64_t>(values, left);
      uint64_t need_bytes = (static_cast<uint64_t>(take) * width + 7) / 8;
      if (need_bytes > n - pos)
        return InvalidArgumentError(std::string(what) + " bit-packed run is truncated");
      for (size_t i = 0; i < take; ++i) {
        uint64_t v = ReadBits(p + pos, static_cast<uint64_t>(i) * width, width);
        if (v > max_value)
          return InvalidArgumentError(std::string(what) + " value " + std::to_string(v) +
                                      " is out of range (max " + std::to_string(max_value) + ")");
        out->push_back(static_cast<uint32_t>(v));
      }
      uint64_t run_bytes = groups > (UINT64_MAX / 32) ? UINT64_MAX : groups * width;
      pos += std::min<uint64_t>(run_bytes, n - pos);
    } else {
      uint64_t run = header >> 1;
      size_t bytes = (width + 7) / 8;
      if (bytes > n - pos) return InvalidArgumentError(std::string(what) + " RLE run is truncated");
      uint64_t v = 0;
      for (size_t k = 0; k < bytes; ++k) v |= static_cast<uint64_t>(p[pos + k]) << (8 * k);
      pos += bytes;
      if (v > max_value)
        return InvalidArgumentError(std::string(what) + " value " + std::to_string(v) +
                                    " is out of range (max " + std::to_string(max_value) + ")");
      out->insert(out->end(), std::min<uint64_t>(run, left), static_cast<uint32_t>(v));
    }
  }
  return OkStatus();
}

int BitWidth(uint64_t max) {
  int w = 0;
  while (max) {
    ++w;
    max >>= 1;
  }
  return w;
}

// DELTA_BINARY_PACKED: exactly `count` values; advances `c` past them.
Status DecodeDeltaBinaryPacked(Cursor& c, size_t count, std::vector<int64_t>* out) {
  uint64_t block, minis, total;
  int64_t first;
  if (!c.Uvarint(&block) || !c.Uvarint(&minis) || !c.Uvarint(&total) || !c.Zigzag(&first))
    return InvalidArgumentError("DELTA_BINARY_PACKED header is truncated");
  if (block == 0 || block % 128 != 0 || block > (1u << 20) || minis == 0 || block % minis != 0 ||
      (block / minis) % 32 != 0) {
    return InvalidArgumentError("DELTA_BINARY_PACKED block of " + std::to_string(block) +
                                " values in " + std::to_string(minis) + " miniblocks is malformed");
  }
  if (total != count)
    return InvalidArgumentError("DELTA_BINARY_PACKED holds " + std::to_string(total) +
                                " values where the page has " + std::to_string(count));
  out->clear();
  out->reserve(count);
  if (count == 0) return OkStatus();
  const uint64_t per = block / minis;
  uint64_t last = static_cast<uint64_t>(first);
  out->push_back(first);
  while (out->size() < count) {
    int64_t min_delta;
    if (!c.Zigzag(&min_delta))
      return InvalidArgumentError("DELTA_BINARY_PACKED block header is truncated");
    if (minis > c.left())
      return InvalidArgumentError("DELTA_BINARY_PACKED bit widths are truncated");
    const uint8_t* widths = reinterpret_cast<const uint8_t*>(c.d.data() + c.pos);
    c.pos += minis;
    for (uint64_t m = 0; m < minis && out->size() < count; ++m) {
      int w = widths[m];
      if (w > 64)
        return InvalidArgumentError("DELTA_BINARY_PACKED bit width " + std::to_string(w) +
                                    " is over 64");
      size_t take = std::min<uint64_t>(per, count - out->size());
      uint64_t need = (static_cast<uint64_t>(take) * w + 7) / 8;
      if (need > c.left())
        return InvalidArgumentError("DELTA_BINARY_PACKED miniblock is truncated");
      const uint8_t* p = reinterpret_cast<const uint8_t*>(c.d.data() + c.pos);
      for (size_t i = 0; i < take; ++i) {
        uint64_t delta = ReadBits(p, static_cast<uint64_t>(i) * w, w);
        last = last + static_cast<uint64_t>(min_delta) + delta;  // wraps, as the spec intends
        out->push_back(static_cast<int64_t>(last));
      }
      c.pos += std::min<uint64_t>(per * w / 8, c.left());
    }
  }
  return OkStatus();
}

Status DecodeValues(int type, bool as_unsigned, const std::string& col, int encoding,
                    std::string_view data, size_t count, const std::vector<json>* dict,
                    DecodeBudget* budget, std::vector<json>* out) {
  out->clear();
  if (count == 0) return OkStatus();
  auto where = [&](const std::string& what) {
    return InvalidArgumentError("column \"" + col + "\": " + what);
  };
  auto integer = [&](int64_t v) -> json {
    if (type == kInt32)
      return as_unsigned ? json(static_cast<uint32_t>(v)) : json(static_cast<int32_t>(v));
    return as_unsigned ? json(static_cast<uint64_t>(v)) : json(v);
  };
  // Every value but an RLE-run index takes at least a bit of `data`.
  out->reserve(std::min<uint64_t>(count, uint64_t{data.size()} * 8));
  switch (encoding) {
    case kPlain: {
      const char* p = data.data();
      size_t n = data.size();
      if (type == kBoolean) {
        if ((count + 7) / 8 > n) return where("PLAIN booleans are truncated");
        for (size_t i = 0; i < count; ++i) out->push_back(json(((p[i >> 3] >> (i & 7)) & 1) != 0));
      } else if (type == kInt32 || type == kFloat) {
        if (count > n / 4) return where("PLAIN values are truncated");
        for (size_t i = 0; i < count; ++i) {
          if (type == kFloat) {
            float f;
            std::memcpy(&f, p + 4 * i, 4);
            out->push_back(json(static_cast<double>(f)));
          } else {
            int32_t v;
            std::memcpy(&v, p + 4 * i, 4);
            out->push_back(integer(v));
          }
        }
      } else if (type == kInt64 || type == kDouble) {
        if (count > n / 8) return where("PLAIN values are truncated");
        for (size_t i = 0; i < count; ++i) {
          if (type == kDouble) {
            double d;
            std::memcpy(&d, p + 8 * i, 8);
            out->push_back(json(d));
          } else {
            int64_t v;
            std::memcpy(&v, p + 8 * i, 8);
            out->push_back(integer(v));
          }
        }
      } else if (type == kByteArray) {
        size_t pos = 0;
        for (size_t i = 0; i < count; ++i) {
          if (n - pos < 4) return where("PLAIN byte array length is truncated");
          uint32_t len = LoadU32(p + pos);
          pos += 4;
          if (len > n - pos)
            return where("PLAIN byte array of " + std::to_string(len) +
                         " bytes runs past its page");
          json v;
          QD_RETURN_IF_ERROR(ToJson(col, data.substr(pos, len), budget, &v));
          out->push_back(std::move(v));
          pos += len;
        }
      } else {
        return where("type " + TypeName(type) + " is not supported");
      }
      return OkStatus();
    }
    case kPlainDictionary:
    case kRleDictionary: {
      if (dict == nullptr) return where("dictionary-encoded page without a dictionary page");
      if (data.empty()) return where("dictionary indexes are missing");
      int width = static_cast<uint8_t>(data[0]);
      std::vector<uint32_t> idx;
      if (dict->empty()) return where("dictionary index into an empty dictionary");
      Status s =
          DecodeHybrid(data.substr(1), width, count, dict->size() - 1, &idx, "dictionary index");
      if (!s.ok()) return where(s.message());
      for (uint32_t i : idx) {
        const json& v = (*dict)[i];
        QD_RETURN_IF_ERROR(
            budget->Charge(v.is_string() ? v.get_ref<const std::string&>().size() : 0));
        out->push_back(v);
      }
      return OkStatus();
    }
    case kRle: {
      if (type != kBoolean)
        return where("RLE values of type " + TypeName(type) + " are not supported");
      if (data.size() < 4) return where("RLE booleans are truncated");
      uint32_t len = LoadU32(data.data());
      if (len > data.size() - 4) return where("RLE booleans run past their page");
      std::vector<uint32_t> bits;
      Status s = DecodeHybrid(data.substr(4, len), 1, count, 1, &bits, "boolean");
      if (!s.ok()) return where(s.message());
      for (uint32_t b : bits) out->push_back(json(b != 0));
      return OkStatus();
    }
    case kDeltaBinaryPacked: {
      if (type != kInt32 && type != kInt64)
        return where("DELTA_BINARY_PACKED for type " + TypeName(type));
      Cursor c{data};
      std::vector<int64_t> v;
      Status s = DecodeDeltaBinaryPacked(c, count, &v);
      if (!s.ok()) return where(s.message());
      for (int64_t x : v) out->push_back(integer(x));
      return OkStatus();
    }
    case kDeltaLengthByteArray:
    case kDeltaByteArray: {
      if (type != kByteArray) return where(EncodingName(encoding) + " for type " + TypeName(type));
      Cursor c{data};
      std::vector<int64_t> prefix, lens;
      if (encoding == kDeltaByteArray) {
        Status s = DecodeDeltaBinaryPacked(c, count, &prefix);
        if (!s.ok()) return where("prefix lengths: " + s.message());
      }
      Status s = DecodeDeltaBinaryPacked(c, count, &lens);
      if (!s.ok()) return where("lengths: " + s.message());
      std::string prev;
      for (size_t i = 0; i < count; ++i) {
        if (lens[i] < 0 || static_cast<uint64_t>(lens[i]) > c.left())
          return where("byte array of " + std::to_string(lens[i]) + " bytes runs past its page");
        std::string_view suffix = data.substr(c.pos, lens[i]);
        c.pos += lens[i];
        json v;
        if (encoding == kDeltaByteArray) {
          if (prefix[i] < 0 || static_cast<uint64_t>(prefix[i]) > prev.size())
            return where("prefix length " + std::to_string(prefix[i]) +
                         " is longer than the previous value");
          QD_RETURN_IF_ERROR(budget->Charge(prefix[i]));
          prev.resize(prefix[i]);
          prev.append(suffix);
          QD_RETURN_IF_ERROR(ToJson(col, prev, budget, &v));
        } else {
          QD_RETURN_IF_ERROR(ToJson(col, suffix, budget, &v));
        }
        out->push_back(std::move(v));
      }
      return OkStatus();
    }
    case kByteStreamSplit: {
      size_t width = type == kInt32 || type == kFloat    ? 4
                     : type == kInt64 || type == kDouble ? 8
                                                         : 0;
      if (width == 0)
        return where("BYTE_STREAM_SPLIT for type " + TypeName(type) + " is not supported");
      if (count > data.size() / width) return where("BYTE_STREAM_SPLIT values are truncated");
      for (size_t i = 0; i < count; ++i) {
        char b[8];
        for (size_t k = 0; k < width; ++k) b[k] = data[k * count + i];
        if (type == kFloat) {
          float f;
          std::memcpy(&f, b, 4);
          out->push_back(json(static_cast<double>(f)));
        } else if (type == kDouble) {
          double d;
          std::memcpy(&d, b, 8);
          out->push_back(json(d));
        } else if (type == kInt32) {
          int32_t v;
          std::memcpy(&v, b, 4);
          out->push_back(integer(v));
        } else {
          int64_t v;
          std::memcpy(&v, b, 8);
          out->push_back(integer(v));
        }
      }
      return OkStatus();
    }
    default:
      return where("encoding " + EncodingName(encoding) + " is not supported");
  }
}

}  // namespace quantd::parquet
