#include "worker/export/gguf/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_set>

namespace quantd::gguf {
namespace {

class Out {
 public:
  explicit Out(FILE* f) : f_(f) {}
  bool ok() const { return ok_; }
  uint64_t pos() const { return pos_; }
  void Bytes(const void* p, size_t n) {
    if (ok_ && n > 0 && std::fwrite(p, 1, n, f_) != n) ok_ = false;
    pos_ += n;
  }
  template <typename T>
  void Pod(T v) {
    Bytes(&v, sizeof(T));
  }
  void Str(const std::string& s) {
    Pod<uint64_t>(s.size());
    Bytes(s.data(), s.size());
  }
  void Pad(uint32_t alignment) {
    static const char zeros[256] = {0};
    while (pos_ % alignment) Bytes(zeros, std::min<uint64_t>(alignment - pos_ % alignment, 256));
  }

 private:
  FILE* f_;
  bool ok_ = true;
  uint64_t pos_ = 0;
};

void WriteScalar(Out& out, GgufValueType type, const GgufValue& v) {
  switch (type) {
    case GgufValueType::kUint8:
      out.Pod<uint8_t>(static_cast<uint8_t>(v.u));
      break;
    case GgufValueType::kInt8:
      out.Pod<int8_t>(static_cast<int8_t>(v.i));
      break;
    case GgufValueType::kUint16:
      out.Pod<uint16_t>(static_cast<uint16_t>(v.u));
      break;
    case GgufValueType::kInt16:
      out.Pod<int16_t>(static_cast<int16_t>(v.i));
      break;
    case GgufValueType::kUint32:
      out.Pod<uint32_t>(static_cast<uint32_t>(v.u));
      break;
    case GgufValueType::kInt32:
      out.Pod<int32_t>(static_cast<int32_t>(v.i));
      break;
    case GgufValueType::kFloat32:
      out.Pod<float>(static_cast<float>(v.f));
      break;
    case GgufValueType::kBool:
      out.Pod<uint8_t>(v.b ? 1 : 0);
      break;
    case GgufValueType::kString:
      out.Str(v.s);
      break;
    case GgufValueType::kUint64:
      out.Pod<uint64_t>(v.u);
      break;
    case GgufValueType::kInt64:
      out.Pod<int64_t>(v.i);
      break;
    case GgufValueType::kFloat64:
      out.Pod<double>(v.f);
      break;
    case GgufValueType::kArray:
      break;
  }
}

void WriteValue(Out& out, const GgufValue& v) {
  if (!v.is_array()) {
    WriteScalar(out, v.type, v);
    return;
  }
  out.Pod<uint32_t>(static_cast<uint32_t>(v.elem_type));
  out.Pod<uint64_t>(v.array_size());
  GgufValue e;
  for (uint64_t x : v.au) {
    e.u = x;
    WriteScalar(out, v.elem_type, e);
  }
  for (int64_t x : v.ai) {
    e.i = x;
    WriteScalar(out, v.elem_type, e);
  }
  for (double x : v.af) {
    e.f = x;
    WriteScalar(out, v.elem_type, e);
  }
  for (uint8_t x : v.ab) out.Pod<uint8_t>(x ? 1 : 0);
  for (const auto& s : v.as) out.Str(s);
  for (const auto& a : v.array) WriteValue(out, a);
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment_ != 32) Set("general.alignment", GgufValue::Uint32(alignment_));
}

void GgufWriter::Set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

Status GgufWriter::AddTensor(const std::string& name, std::vector<int64_t> ne, GgmlType type,
                             Producer produce) {
  for (const auto& t : tensors_) {
    if (t.name == name) return InvalidArgumentError("GGUF tensor " + name + " added twice");
  }
  if (ne.empty() || ne.size() > 4) {
    return InvalidArgumentError("GGUF tensor " + name + " must have 1 to 4 dimensions");
  }
  int64_t n = 1;
  for (int64_t d : ne) {
    if (d <= 0)
      return InvalidArgumentError("GGUF tensor " + name + " has a non-positive dimension");
    n *= d;
  }
  if (ne[0] % GetGgmlTypeTraits(type).block_size != 0) {
    return InvalidArgumentError("GGUF tensor " + name + " rows of " + std::to_string(ne[0]) +
                                " are not whole " + GetGgmlTypeTraits(type).name + " blocks");
  }
  QD_ASSIGN_OR_RETURN(uint64_t nbytes, GgmlRowBytes(type, n));
  tensors_.push_back({name, std::move(ne), type, nbytes, std::move(produce)});
  return OkStatus();
}

Status GgufWriter::AddFloatTensor(const std::string& name, std::vector<int64_t> ne, GgmlType type,
                                  std::vector<float> data) {
  auto shared = std::make_shared<std::vector<float>>(std::move(data));
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  if (static_cast<int64_t>(shared->size()) != n) {
    return InvalidArgumentError("GGUF tensor " + name + " has " + std::to_string(shared->size()) +
                                " values for " + std::to_string(n) + " elements");
  }
  return AddTensor(name, std::move(ne), type, [shared, type, n](std::vector<uint8_t>* bytes) {
    QD_ASSIGN_OR_RETURN(uint64_t size, GgmlRowBytes(type, n));
    bytes->resize(size);
    return QuantizeRow(type, shared->data(), bytes->data(), n);
  });
}

Status GgufWriter::Write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    return Status(StatusCode::kUnavailable, "cannot create " + tmp + ": " + std::strerror(errno));
  std::unique_ptr<FILE, int (*)(FILE*)> closer(f, std::fclose);
  Out out(f);
  auto fail = [&](Status s) {
    closer.reset();
    std::remove(tmp.c_str());
    return s;
  };
  out.Pod<uint32_t>(0x46554747);
  out.Pod<uint32_t>(3);
  out.Pod<uint64_t>(tensors_.size());
  out.Pod<uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    out.Str(key);
    out.Pod<uint32_t>(static_cast<uint32_t>(value.type));
    WriteValue(out, value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    out.Str(t.name);
    out.Pod<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) out.Pod<uint64_t>(static_cast<uint64_t>(d));
    out.Pod<uint32_t>(static_cast<uint32_t>(t.type));
    out.Pod<uint64_t>(offset);
    offset += (t.nbytes + alignment_ - 1) / alignment_ * alignment_;
  }
  out.Pad(alignment_);
  std::vector<uint8_t> bytes;
  for (const auto& t : tensors_) {
    bytes.clear();
    Status s = t.produce(&bytes);
    if (!s.ok()) return fail(s.Prepend("GGUF tensor " + t.name + ": "));
    if (bytes.size() != t.nbytes) {
      return fail(InternalError("GGUF tensor " + t.name + " produced " +
                                std::to_string(bytes.size()) + " bytes, expected " +
                                std::to_string(t.nbytes)));
    }
    out.Bytes(bytes.data(), bytes.size());
    out.Pad(alignment_);
  }
  if (!out.ok() || std::fflush(f) != 0) return fail(DataLossError("writing " + tmp + " failed"));
  closer.reset();
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(Status(StatusCode::kUnavailable,
                       "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno)));
  }
  return OkStatus();
}

}  // namespace quantd::gguf
