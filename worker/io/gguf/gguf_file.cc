#include "worker/io/gguf/gguf_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_set>

namespace quantd::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxDims = 4;              // GGML_MAX_DIMS

class FileByteSource : public ByteSource {
 public:
  FileByteSource(int fd, uint64_t size, std::string path)
      : fd_(fd), size_(size), path_(std::move(path)) {}
  ~FileByteSource() override { close(fd_); }
  uint64_t size() const override { return size_; }
  std::string name() const override { return path_; }
  Status Read(uint64_t offset, size_t n, void* dst) const override {
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
      const ssize_t got = pread(fd_, out, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        return DataLossError(
            path_ + ": read of " + std::to_string(n) + " bytes at offset " +
            std::to_string(offset) + " failed" +
            (got < 0 ? std::string(": ") + std::strerror(errno) : " (end of file)"));
      }
      out += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
    return OkStatus();
  }

 private:
  int fd_;
  uint64_t size_;
  std::string path_;
};

class MemorySource : public ByteSource {
 public:
  MemorySource(std::string_view bytes, std::string name) : bytes_(bytes), name_(std::move(name)) {}
  uint64_t size() const override { return bytes_.size(); }
  std::string name() const override { return name_; }
  Status Read(uint64_t offset, size_t n, void* dst) const override {
    if (offset > bytes_.size() || n > bytes_.size() - offset) {
      return DataLossError(name_ + ": read past the end");
    }
    if (n > 0) std::memcpy(dst, bytes_.data() + offset, n);
    return OkStatus();
  }

 private:
  std::string_view bytes_;
  std::string name_;
};

// Sequential reader over a ByteSource with a window buffer, so thousands of
// small metadata strings do not each cost a system call.
class Cursor {
 public:
  Cursor(const ByteSource& src, std::string where) : src_(src), where_(std::move(where)) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return src_.size() - pos_; }

  Status ReadBytes(void* dst, uint64_t n, const char* what) {
    if (n > remaining()) {
      return DataLossError(where_ + ": truncated: " + what + " needs " + std::to_string(n) +
                           " bytes at offset " + std::to_string(pos_) + ", file has " +
                           std::to_string(src_.size()));
    }
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
      if (pos_ < buf_start_ || pos_ >= buf_start_ + buf_.size()) {
        QD_RETURN_IF_ERROR(Fill());
      }
      const uint64_t in_buf = buf_start_ + buf_.size() - pos_;
      const uint64_t take = std::min(in_buf, n);
      std::memcpy(out, buf_.data() + (pos_ - buf_start_), take);
      out += take;
      pos_ += take;
      n -= take;
    }
    return OkStatus();
  }

  template <typename T>
  Status ReadPod(T* v, const char* what) {
    return ReadBytes(v, sizeof(T), what);
  }

  Status ReadString(std::string* s, uint64_t max_len, const char* what) {
    uint64_t len;
    QD_RETURN_IF_ERROR(ReadPod(&len, what));
    if (len > remaining()) {
      return DataLossError(where_ + ": " + what + " length " + std::to_string(len) + " at offset " +
                           std::to_string(pos_ - 8) + " exceeds the file");
    }
    if (len > max_len) {
      return InvalidArgumentError(where_ + ": " + what + " length " + std::to_string(len) +
                                  " exceeds the limit of " + std::to_string(max_len));
    }
    s->resize(len);
    return ReadBytes(s->data(), len, what);
  }

 private:
  Status Fill() {
    constexpr uint64_t kWindow = 1 << 20;
    buf_start_ = pos_;
    buf_.resize(std::min<uint64_t>(kWindow, src_.size() - pos_));
    return src_.Read(buf_start_, buf_.size(), buf_.data());
  }

  const ByteSource& src_;
  std::string where_;
  uint64_t pos_ = 0;
  uint64_t buf_start_ = 0;
  std::vector<uint8_t> buf_;
};

// Smallest encoded size of one value of `type`, to bound element counts
// against the remaining bytes before reserving memory.
uint64_t MinEncodedSize(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kString:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kArray:
      return 12;
  }
  return 1;
}

bool IsValidValueType(uint32_t t) { return t <= 12; }

class Parser {
 public:
  Parser(const ByteSource& src, const GgufParseOptions& opts, std::string where)
      : cur_(src, where), opts_(opts), where_(std::move(where)) {}

  Cursor& cursor() { return cur_; }

  // Reads a scalar of `type` into v's matching member.
  Status ReadScalar(GgufValueType type, GgufValue* v) {
    v->type = type;
    switch (type) {
      case GgufValueType::kUint8: {
        uint8_t x;
        QD_RETURN_IF_ERROR(cur_.ReadPod(&x, "uint8 value"));
        v->u = x;
        return OkStatus();
      }
      case GgufValueType::kInt8: {
        int8_t x;
        QD_RETURN_IF_ERROR(cur_.ReadPod(&x, "int8 value"));
        v->i = x;
        return OkStatus();
      }
      case GgufValueType::kUint16: {
        uint16_t x;
        QD_RETURN_IF_ERROR(cur_.ReadPod(&x, "uint16 value"));
        v->u = x;
        return OkStatus();
      }
      case GgufValueType::kInt16: {
        int16_t x;
        QD_RETURN_IF_ERROR(cur_.ReadPod(&x, "int16 value"));
        v->i = x;
        return OkStatus();
      }
      case GgufValueType::kUint32: {
        uint32_t x;
        QD_RETURN_IF_ERROR(cur_.ReadPod(&x, "uint32 value"));
        v->u = x;
        return OkStatus();
      }
      case GgufValueType::kInt32: {
        int32_t x;
        QD_RETURN_IF_ERROR(cur_.ReadPod(&x, "int32 value"));
        v->i = x;
        return OkStatus();
      }
      case GgufValueType::kFloat32: {
        float x;
        QD_RETURN_IF_ERROR(cur_.ReadPod(&x, "float32 value"));
        v->f = x;
        return OkStatus();
      }
      case GgufValueType::kBool: {
        uint8_t x;
        QD_RETURN_IF_ERROR(cur_.ReadPod(&x, "bool value"));
        if (x > 1) {
          return DataLossError(where_ + ": bool value " + std::to_string(x) + " at offset " +
                               std::to_string(cur_.pos() - 1) + " is not 0 or 1");
        }
        v->b = x != 0;
        return OkStatus();
      }
      case GgufValueType::kString:
        return cur_.ReadString(&v->s, opts_.max_string_bytes, "string value");
      case GgufValueType::kUint64: {
        uint64_t x;
        QD_RETURN_IF_ERROR(cur_.ReadPod(&x, "uint64 value"));
        v->u = x;
        return OkStatus();
      }
      case GgufValueType::kInt64: {
        int64_t x;
        QD_RETURN_IF_ERROR(cur_.ReadPod(&x, "int64 value"));
        v->i = x;
        return OkStatus();
      }
      case GgufValueType::kFloat64: {
        double x;
        QD_RETURN_IF_ERROR(cur_.ReadPod(&x, "float64 value"));
        v->f = x;
        return OkStatus();
      }
      case GgufValueType::kArray:
        break;
    }
    return InternalError("ReadScalar called for an array");
  }

  Status ReadValue(GgufValueType type, GgufValue* v, int depth) {
    if (type != GgufValueType::kArray) return ReadScalar(type, v);
    const int max_depth = std::min(opts_.max_array_depth, kMaxGgufArrayDepth);
    if (depth >= max_depth) {
      return InvalidArgumentError(where_ + ": arrays nested deeper than " +
                                  std::to_string(max_depth));
    }
    v->type = GgufValueType::kArray;
    uint32_t et;
    QD_RETURN_IF_ERROR(cur_.ReadPod(&et, "array element type"));
    if (!IsValidValueType(et)) {
      return DataLossError(where_ + ": unknown array element type " + std::to_string(et) +
                           " at offset " + std::to_string(cur_.pos() - 4));
    }
    v->elem_type = static_cast<GgufValueType>(et);
    uint64_t n;
    QD_RETURN_IF_ERROR(cur_.ReadPod(&n, "array length"));
    if (n > cur_.remaining() / MinEncodedSize(v->elem_type)) {
      return DataLossError(where_ + ": array of " + std::to_string(n) + " " +
                           GgufValueTypeName(v->elem_type) + " at offset " +
                           std::to_string(cur_.pos() - 8) + " exceeds the file");
    }
    if (n > opts_.max_array_elements) {
      return InvalidArgumentError(where_ + ": array of " + std::to_string(n) +
                                  " elements exceeds the limit of " +
                                  std::to_string(opts_.max_array_elements));
    }
    if (n > opts_.max_total_array_elements - total_elements_) {
      return InvalidArgumentError(
          where_ + ": arrays hold " + std::to_string(total_elements_ + n) +
          " elements in all (so far), over the limit of " +
          std::to_string(opts_.max_total_array_elements));
    }
    total_elements_ += n;
    if (v->elem_type == GgufValueType::kArray) {
      if (n > opts_.max_nested_arrays - nested_arrays_) {
        return InvalidArgumentError(where_ + ": " + std::to_string(nested_arrays_ + n) +
                                    " arrays inside arrays (so far), over the limit of " +
                                    std::to_string(opts_.max_nested_arrays));
      }
      nested_arrays_ += n;
    }
    GgufValue elem;
    switch (v->elem_type) {
      case GgufValueType::kUint8:
      case GgufValueType::kUint16:
      case GgufValueType::kUint32:
      case GgufValueType::kUint64:
        v->au.reserve(n);
        for (uint64_t k = 0; k < n; ++k) {
          QD_RETURN_IF_ERROR(ReadScalar(v->elem_type, &elem));
          v->au.push_back(elem.u);
        }
        break;
      case GgufValueType::kInt8:
      case GgufValueType::kInt16:
      case GgufValueType::kInt32:
      case GgufValueType::kInt64:
        v->ai.reserve(n);
        for (uint64_t k = 0; k < n; ++k) {
          QD_RETURN_IF_ERROR(ReadScalar(v->elem_type, &elem));
          v->ai.push_back(elem.i);
        }
        break;
      case GgufValueType::kFloat32:
      case GgufValueType::kFloat64:
        v->af.reserve(n);
        for (uint64_t k = 0; k < n; ++k) {
          QD_RETURN_IF_ERROR(ReadScalar(v->elem_type, &elem));
          v->af.push_back(elem.f);
        }
        break;
      case GgufValueType::kBool:
        v->ab.reserve(n);
        for (uint64_t k = 0; k < n; ++k) {
          QD_RETURN_IF_ERROR(ReadScalar(v->elem_type, &elem));
          v->ab.push_back(elem.b ? 1 : 0);
        }
        break;
      case GgufValueType::kString:
        v->as.reserve(n);
        for (uint64_t k = 0; k < n; ++k) {
          std::string s;
          QD_RETURN_IF_ERROR(cur_.ReadString(&s, opts_.max_string_bytes, "string array element"));
          v->as.push_back(std::move(s));
        }
        break;
      case GgufValueType::kArray:
        v->array.reserve(n);
        for (uint64_t k = 0; k < n; ++k) {
          GgufValue inner;
          QD_RETURN_IF_ERROR(ReadValue(GgufValueType::kArray, &inner, depth + 1));
          v->array.push_back(std::move(inner));
        }
        break;
    }
    return OkStatus();
  }

 private:
  Cursor cur_;
  GgufParseOptions opts_;
  std::string where_;
  uint64_t total_elements_ = 0;
  uint64_t nested_arrays_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<ByteSource>> OpenFileByteSource(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFoundError("GGUF file " + path + " not found");
    return Status(StatusCode::kUnavailable,
                  "cannot open GGUF file " + path + ": " + std::strerror(errno));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return InvalidArgumentError(path + " is not a regular file");
  }
  return std::unique_ptr<ByteSource>(
      new FileByteSource(fd, static_cast<uint64_t>(st.st_size), path));
}

std::unique_ptr<ByteSource> MemoryByteSource(std::string_view bytes, std::string name) {
  return std::make_unique<MemorySource>(bytes, std::move(name));
}

StatusOr<GgufFile> ParseGguf(const ByteSource& source, const GgufParseOptions& options) {
  GgufFile file;
  file.path = source.name();
  file.file_size = source.size();
  const std::string where = file.where();
  Parser parser(source, options, where);
  Cursor& cur = parser.cursor();

  uint32_t magic;
  QD_RETURN_IF_ERROR(cur.ReadPod(&magic, "magic"));
  if (magic != kMagic) return DataLossError(where + " is not a GGUF file (bad magic)");
  QD_RETURN_IF_ERROR(cur.ReadPod(&file.version, "version"));
  if (file.version != 2 && file.version != 3) {
    // A byte-swapped version means a big-endian file.
    if (file.version == 0x02000000u || file.version == 0x03000000u) {
      return UnimplementedError(where + ": big-endian GGUF files are not supported");
    }
    return UnimplementedError(where + ": GGUF version " + std::to_string(file.version) +
                              " is not supported (only 2 and 3)");
  }
  uint64_t n_tensors, n_kv;
  QD_RETURN_IF_ERROR(cur.ReadPod(&n_tensors, "tensor count"));
  QD_RETURN_IF_ERROR(cur.ReadPod(&n_kv, "metadata count"));
  // Each metadata entry takes at least 8 + 4 + 1 bytes, each tensor info 8 + 4 + 4 + 8.
  if (n_kv > cur.remaining() / 13 || n_kv > options.max_metadata) {
    return DataLossError(where + ": metadata count " + std::to_string(n_kv) +
                         " exceeds what the file can hold");
  }
  if (n_tensors > cur.remaining() / 24 || n_tensors > options.max_tensors) {
    return DataLossError(where + ": tensor count " + std::to_string(n_tensors) +
                         " exceeds what the file can hold");
  }

  std::unordered_set<std::string> keys;
  // Counts are only bounded by the file size: grow as entries parse.
  file.metadata.reserve(std::min<uint64_t>(n_kv, 1024));
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key;
    QD_RETURN_IF_ERROR(cur.ReadString(&key, options.max_string_bytes, "metadata key"));
    uint32_t type;
    QD_RETURN_IF_ERROR(cur.ReadPod(&type, "metadata type"));
    if (!IsValidValueType(type)) {
      return DataLossError(where + ": metadata " + key + " has unknown type " +
                           std::to_string(type));
    }
    GgufValue value;
    Status s = parser.ReadValue(static_cast<GgufValueType>(type), &value, 0);
    if (!s.ok()) return s.Prepend("metadata " + key + ": ");
    if (!keys.insert(key).second) {
      return DataLossError(where + ": duplicate metadata key " + key);
    }
    file.metadata.emplace_back(std::move(key), std::move(value));
  }

  if (const GgufValue* a = file.Find("general.alignment")) {
    if (a->type != GgufValueType::kUint32 || a->u == 0 || (a->u & (a->u - 1)) != 0) {
      return DataLossError(where + ": general.alignment must be a power-of-two uint32");
    }
    file.alignment = static_cast<uint32_t>(a->u);
  }

  std::unordered_set<std::string> names;
  file.tensors.reserve(std::min<uint64_t>(n_tensors, 4096));
  for (uint64_t t = 0; t < n_tensors; ++t) {
    GgufTensorInfo info;
    QD_RETURN_IF_ERROR(cur.ReadString(&info.name, options.max_string_bytes, "tensor name"));
    uint32_t n_dims;
    QD_RETURN_IF_ERROR(cur.ReadPod(&n_dims, "tensor dimension count"));
    if (n_dims > kMaxDims) {
      return DataLossError(where + ": tensor " + info.name + " has " + std::to_string(n_dims) +
                           " dimensions (at most 4)");
    }
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne;
      QD_RETURN_IF_ERROR(cur.ReadPod(&ne, "tensor dimension"));
      if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (ne != 0 && static_cast<uint64_t>(n_elements) >
                          static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne)) {
        return DataLossError(where + ": tensor " + info.name + " has an overflowing shape");
      }
      info.ne.push_back(static_cast<int64_t>(ne));
      n_elements *= static_cast<int64_t>(ne);
    }
    uint32_t type;
    QD_RETURN_IF_ERROR(cur.ReadPod(&type, "tensor type"));
    auto traits = GetGgmlTypeTraits(type);
    if (!traits) {
      return DataLossError(where + ": tensor " + info.name + " has unknown ggml type " +
                           std::to_string(type));
    }
    info.type = traits->type;
    if (!info.ne.empty() && info.ne[0] % traits->block_size != 0) {
      return DataLossError(where + ": tensor " + info.name + " row of " +
                           std::to_string(info.ne[0]) + " elements is not a whole number of " +
                           traits->name + " blocks");
    }
    auto nbytes = GgmlRowBytes(info.type, n_elements);
    if (!nbytes.ok())
      return DataLossError(where + ": tensor " + info.name + ": " + nbytes.status().message());
    info.nbytes = *nbytes;
    QD_RETURN_IF_ERROR(cur.ReadPod(&info.offset, "tensor offset"));
    if (info.offset % file.alignment != 0) {
      return DataLossError(where + ": tensor " + info.name + " offset " +
                           std::to_string(info.offset) + " is not aligned to " +
                           std::to_string(file.alignment));
    }
    if (!names.insert(info.name).second) {
      return DataLossError(where + ": duplicate tensor " + info.name);
    }
    file.tensors.push_back(std::move(info));
  }

  const uint64_t end = cur.pos();
  file.data_offset = (end + file.alignment - 1) / file.alignment * file.alignment;
  if (n_tensors > 0 && file.data_offset > file.file_size) {
    return DataLossError(where + ": truncated before the tensor data section");
  }
  const uint64_t data_size = n_tensors > 0 ? file.file_size - file.data_offset : 0;
  for (const auto& t : file.tensors) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      return DataLossError(where + ": tensor " + t.name + " data [" + std::to_string(t.offset) +
                           ", +" + std::to_string(t.nbytes) + ") lies outside the " +
                           std::to_string(data_size) + "-byte data section");
    }
  }
  return file;
}

StatusOr<GgufFile> ReadGgufFile(const std::string& path, const GgufParseOptions& options) {
  QD_ASSIGN_OR_RETURN(auto source, OpenFileByteSource(path));
  return ParseGguf(*source, options);
}

StatusOr<std::vector<uint8_t>> ReadGgufTensorBytes(const GgufFile& file, const ByteSource& source,
                                                   const GgufTensorInfo& tensor) {
  const uint64_t start = file.data_offset + tensor.offset;
  if (start < file.data_offset || start > source.size() || tensor.nbytes > source.size() - start) {
    return DataLossError(file.where() + ": tensor " + tensor.name + " lies outside the file");
  }
  std::vector<uint8_t> bytes(tensor.nbytes);
  Status s = source.Read(start, bytes.size(), bytes.data());
  if (!s.ok()) return s.Prepend("tensor " + tensor.name + ": ");
  return bytes;
}

StatusOr<std::vector<float>> ReadGgufTensorAsFloat(const GgufFile& file, const ByteSource& source,
                                                   const GgufTensorInfo& tensor) {
  QD_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadGgufTensorBytes(file, source, tensor));
  std::vector<float> out(static_cast<size_t>(tensor.n_elements()));
  Status s = DequantizeRow(tensor.type, bytes.data(), out.data(), tensor.n_elements());
  if (!s.ok()) return s.Prepend(file.where() + ": tensor " + tensor.name + ": ");
  return out;
}

}  // namespace quantd::gguf
