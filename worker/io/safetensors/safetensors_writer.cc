#include "worker/io/safetensors/safetensors_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

namespace quantd::io {
namespace {

Status WriteFailed(const std::string& path, const std::string& what) {
  return Status(StatusCode::kUnavailable, path + ": " + what + ": " + std::strerror(errno));
}

Status WriteAll(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return WriteFailed(path, "write");
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return OkStatus();
}

// Appends all of `src` to `dst`: copy_file_range where the kernel and file
// system support it (no copy through user space), else read/write.
Status AppendFile(int src, int dst, uint64_t n, const std::string& path) {
  uint64_t left = n;
  while (left > 0) {
    const ssize_t c = ::copy_file_range(src, nullptr, dst, nullptr, left, 0);
    if (c > 0) {
      left -= static_cast<uint64_t>(c);
      continue;
    }
    if (c < 0 && errno == EINTR) continue;
    break;  // unsupported here, or EOF: fall back below
  }
  std::vector<char> buf(1 << 20);
  while (left > 0) {
    const ssize_t r = ::read(src, buf.data(), std::min<uint64_t>(left, buf.size()));
    if (r < 0) {
      if (errno == EINTR) continue;
      return WriteFailed(path, "read back tensor data");
    }
    if (r == 0) {
      return Status(StatusCode::kInternal,
                    path + ": tensor data side file is shorter than written");
    }
    QD_RETURN_IF_ERROR(WriteAll(dst, buf.data(), static_cast<size_t>(r), path));
    left -= static_cast<uint64_t>(r);
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::Create(
    const std::string& path, SafetensorsWriterOptions options) {
  if (options.plan.empty()) {
    const std::string data_path = path + ".data.tmp";
    std::FILE* f = std::fopen(data_path.c_str(), "w+b");
    if (f == nullptr) {
      return FailedPreconditionError("cannot create " + data_path + ": " + std::strerror(errno));
    }
    return std::unique_ptr<SafetensorsWriter>(new SafetensorsWriter(path, std::move(options), f));
  }
  // Planned: fix every offset now and write the header first.
  std::vector<SafetensorsEntry> plan;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& t : options.plan) {
    if (t.name.empty() || t.name == "__metadata__" || !names.insert(t.name).second) {
      return InvalidArgumentError(path + ": invalid or duplicate planned tensor '" + t.name + "'");
    }
    uint64_t bytes = static_cast<uint64_t>(SafetensorsDtypeSize(t.dtype));
    for (int64_t d : t.shape) {
      if (d < 0)
        return InvalidArgumentError(path + ": tensor '" + t.name + "' has a negative dimension");
      bytes *= static_cast<uint64_t>(d);
    }
    SafetensorsEntry e;
    e.name = t.name;
    e.dtype = t.dtype;
    e.shape = t.shape;
    e.begin = offset;
    e.end = offset + bytes;
    offset = e.end;
    plan.push_back(std::move(e));
  }
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr)
    return FailedPreconditionError("cannot create " + tmp + ": " + std::strerror(errno));
  std::unique_ptr<SafetensorsWriter> w(new SafetensorsWriter(path, std::move(options), f));
  w->planned_ = true;
  w->plan_ = std::move(plan);
  const std::string header = w->HeaderJson(w->plan_);
  uint8_t prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<uint8_t>(uint64_t{header.size()} >> (8 * i));
  if (std::fwrite(prefix, 1, 8, f) != 8 ||
      std::fwrite(header.data(), 1, header.size(), f) != header.size()) {
    return WriteFailed(tmp, "write header");
  }
  return w;
}

SafetensorsWriter::SafetensorsWriter(std::string path, SafetensorsWriterOptions options,
                                     std::FILE* data)
    : path_(std::move(path)), options_(std::move(options)), data_(data) {
  data_path_ = path_ + ".data.tmp";
}

SafetensorsWriter::~SafetensorsWriter() {
  if (data_ != nullptr) std::fclose(data_);
  if (!finished_) {
    ::unlink(data_path_.c_str());
    ::unlink((path_ + ".tmp").c_str());
  }
}

void SafetensorsWriter::SetMetadata(const std::string& key, const std::string& value) {
  options_.metadata[key] = value;
}

Status SafetensorsWriter::Add(const std::string& name, SafetensorsDtype dtype,
                              const std::vector<int64_t>& shape, const void* data,
                              uint64_t nbytes) {
  if (finished_) return FailedPreconditionError(path_ + ": Add('" + name + "') after Finish()");
  if (name.empty() || name == "__metadata__") {
    return InvalidArgumentError(path_ + ": invalid tensor name '" + name + "'");
  }
  if (names_.count(name) != 0) {
    return InvalidArgumentError(path_ + ": tensor '" + name + "' was already added");
  }
  uint64_t expect = static_cast<uint64_t>(SafetensorsDtypeSize(dtype));
  for (int64_t d : shape) {
    if (d < 0)
      return InvalidArgumentError(path_ + ": tensor '" + name + "' has a negative dimension");
    expect *= static_cast<uint64_t>(d);
  }
  if (expect != nbytes) {
    return InvalidArgumentError(path_ + ": tensor '" + name + "' of dtype " +
                                SafetensorsDtypeName(dtype) + " needs " + std::to_string(expect) +
                                " bytes, got " + std::to_string(nbytes));
  }
  if (planned_) {
    const size_t next = entries_.size();
    if (next >= plan_.size() || plan_[next].name != name || plan_[next].dtype != dtype ||
        plan_[next].shape != shape) {
      return InvalidArgumentError(
          path_ + ": tensor '" + name + "' does not match the plan (next planned: " +
          (next < plan_.size() ? "'" + plan_[next].name + "'" : std::string("none")) + ")");
    }
  }
  if (nbytes > 0 && std::fwrite(data, 1, nbytes, data_) != nbytes) {
    return WriteFailed(planned_ ? path_ + ".tmp" : data_path_, "write tensor '" + name + "'");
  }
  SafetensorsEntry e;
  e.name = name;
  e.dtype = dtype;
  e.shape = shape;
  e.begin = data_bytes_;
  e.end = data_bytes_ + nbytes;
  data_bytes_ = e.end;
  entries_.push_back(std::move(e));
  names_.insert(name);
  return OkStatus();
}

std::string SafetensorsWriter::HeaderJson(const std::vector<SafetensorsEntry>& entries) const {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!options_.metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : options_.metadata) meta[k] = v;
    h["__metadata__"] = std::move(meta);
  }
  for (const auto& e : entries) {
    h[e.name] = {{"dtype", SafetensorsDtypeName(e.dtype)},
                 {"shape", e.shape},
                 {"data_offsets", {e.begin, e.end}}};
  }
  std::string s = h.dump();
  // Pad to 8 bytes so the data section starts aligned.
  while ((8 + s.size()) % 8 != 0) s.push_back(' ');
  return s;
}

Status SafetensorsWriter::FinishPlanned() {
  const std::string tmp = path_ + ".tmp";
  if (entries_.size() != plan_.size()) {
    return FailedPreconditionError(path_ + ": Finish() with planned tensor '" +
                                   plan_[entries_.size()].name + "' not written");
  }
  if (std::fflush(data_) != 0) return WriteFailed(tmp, "flush");
  if (::fsync(::fileno(data_)) != 0) return WriteFailed(tmp, "fsync");
  const int rc = std::fclose(data_);
  data_ = nullptr;
  if (rc != 0) return WriteFailed(tmp, "close");
  if (::rename(tmp.c_str(), path_.c_str()) != 0) return WriteFailed(path_, "rename");
  finished_ = true;
  return OkStatus();
}

Status SafetensorsWriter::Finish() {
  if (finished_) return FailedPreconditionError(path_ + ": Finish() called twice");
  if (planned_) return FinishPlanned();
  if (std::fflush(data_) != 0) return WriteFailed(data_path_, "flush");
  const std::string header = HeaderJson(entries_);
  const std::string tmp = path_ + ".tmp";
  int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return WriteFailed(tmp, "create");
  uint8_t prefix[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<uint8_t>(n >> (8 * i));
  Status s = WriteAll(out, prefix, 8, tmp);
  if (s.ok()) s = WriteAll(out, header.data(), header.size(), tmp);
  if (s.ok()) {
    const int src = ::fileno(data_);
    if (::lseek(src, 0, SEEK_SET) != 0) {
      s = WriteFailed(data_path_, "seek");
    } else {
      s = AppendFile(src, out, data_bytes_, tmp);
    }
  }
  if (s.ok() && ::fsync(out) != 0) s = WriteFailed(tmp, "fsync");
  if (::close(out) != 0 && s.ok()) s = WriteFailed(tmp, "close");
  if (s.ok() && ::rename(tmp.c_str(), path_.c_str()) != 0) s = WriteFailed(path_, "rename");
  if (!s.ok()) return s;
  std::fclose(data_);
  data_ = nullptr;
  ::unlink(data_path_.c_str());
  finished_ = true;
  return OkStatus();
}

}  // namespace quantd::io
