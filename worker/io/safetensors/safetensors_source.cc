#include "worker/io/safetensors/safetensors_source.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "worker/common/bounded_json.h"
#include "worker/io/safetensors/tensor_io.h"

namespace quantd::io {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Tensors are filled right after allocation, so the cost of a load is
// mostly first-touch page faults: ask for transparent huge pages (2 MB) on
// large buffers. Advice only; a kernel without THP ignores it.
void AdviseHugePages(void* data, uint64_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

// Index files name shards relative to their directory; refuse anything that
// could point outside it.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

StatusOr<std::string> ReadSmallFile(const std::string& path, uint64_t limit) {
  QD_ASSIGN_OR_RETURN(auto f, ReadOnlyFile::Open(path));
  if (f->size() > limit) {
    return DataLossError(path + ": " + std::to_string(f->size()) + " bytes exceeds the " +
                         std::to_string(limit) + "-byte limit for an index file");
  }
  std::string s(f->size(), '\0');
  QD_RETURN_IF_ERROR(f->ReadAt(0, s.size(), s.data()));
  return s;
}

}  // namespace

StatusOr<std::unique_ptr<SafetensorsSource>> SafetensorsSource::Open(const std::string& path) {
  std::string target = path;
  if (IsDirectory(path)) {
    const std::string index = path + "/model.safetensors.index.json";
    const std::string single = path + "/model.safetensors";
    if (IsFile(index)) {
      target = index;
    } else if (IsFile(single)) {
      target = single;
    } else {
      return NotFoundError(path + ": no model.safetensors.index.json or model.safetensors");
    }
  }
  std::unique_ptr<SafetensorsSource> src(new SafetensorsSource());
  src->description_ = target;

  if (EndsWith(target, ".json")) {
    // json_limits::kSafetensorsIndex (64 MiB) is far above any real index (a
    // few MB for 100k tensors).
    QD_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(target, json_limits::kSafetensorsIndex));
    QD_ASSIGN_OR_RETURN(SafetensorsIndex index, ParseSafetensorsIndex(text, target));
    src->index_metadata_ = std::move(index.metadata);
    // Shard file -> tensors the index says it holds, in first-mention order.
    std::vector<std::string> order;
    std::map<std::string, std::vector<std::string>> expected;
    for (const auto& [tensor, file] : index.weight_map) {
      if (!IsPlainFileName(file)) {
        return DataLossError(target + ": tensor '" + tensor + "' maps to '" + file +
                             "', which is not a file name in the checkpoint directory");
      }
      if (expected.count(file) == 0) order.push_back(file);
      expected[file].push_back(tensor);
    }
    const std::string dir = DirName(target);
    for (const auto& file : order) {
      QD_RETURN_IF_ERROR(src->AddShard(dir + "/" + file, &expected[file]));
    }
  } else {
    QD_RETURN_IF_ERROR(src->AddShard(target, nullptr));
  }
  return src;
}

Status SafetensorsSource::AddShard(const std::string& path,
                                   const std::vector<std::string>* expected_names) {
  auto shard = std::make_unique<Shard>();
  QD_ASSIGN_OR_RETURN(shard->file, ReadOnlyFile::Open(path));
  const ReadOnlyFile& f = *shard->file;
  uint8_t prefix[8] = {0};
  if (f.size() >= 8) QD_RETURN_IF_ERROR(f.ReadAt(0, 8, prefix));
  QD_ASSIGN_OR_RETURN(uint64_t n, ParseSafetensorsHeaderLength(prefix, f.size(), path));
  std::string json(n, '\0');
  QD_RETURN_IF_ERROR(f.ReadAt(8, n, json.data()));
  QD_ASSIGN_OR_RETURN(shard->header, ParseSafetensorsHeaderJson(json, f.size() - 8 - n, path));
  shard->header.data_offset = 8 + n;

  if (expected_names != nullptr) {
    for (const auto& name : *expected_names) {
      if (shard->header.Find(name) == nullptr) {
        return DataLossError(path + ": tensor '" + name +
                             "' is listed in the index for this shard but the shard does not "
                             "contain it");
      }
    }
  }
  for (const auto& e : shard->header.tensors) {
    auto [it, inserted] = tensors_.try_emplace(e.name);
    if (!inserted) {
      return DataLossError(path + ": tensor '" + e.name + "' is also stored in " +
                           it->second.info.file);
    }
    Location& loc = it->second;
    loc.shard = shard.get();
    loc.entry = &e;
    loc.info.name = e.name;
    loc.info.shape = e.shape;
    loc.info.dtype = SafetensorsDtypeName(e.dtype);
    loc.info.file = path;
    loc.info.nbytes = e.nbytes();
  }
  shards_.push_back(std::move(shard));
  return OkStatus();
}

std::vector<std::string> SafetensorsSource::Names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, loc] : tensors_) names.push_back(name);
  return names;
}

const TensorInfo* SafetensorsSource::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second.info;
}

const SafetensorsEntry* SafetensorsSource::FindEntry(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second.entry;
}

std::vector<std::string> SafetensorsSource::Files() const {
  std::vector<std::string> files;
  for (const auto& s : shards_) files.push_back(s->file->path());
  return files;
}

std::map<std::string, std::string> SafetensorsSource::Metadata() const {
  std::map<std::string, std::string> md = index_metadata_;
  for (const auto& s : shards_) {
    for (const auto& [k, v] : s->header.metadata) md.emplace(k, v);
  }
  return md;
}

StatusOr<at::Tensor> SafetensorsSource::LoadStored(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return NotFoundError("tensor '" + name + "' not found in " + description_);
  }
  const Location& loc = it->second;
  QD_ASSIGN_OR_RETURN(at::ScalarType stored, StorageScalarType(loc.entry->dtype));
  try {
    at::Tensor t = at::empty(loc.entry->shape, at::TensorOptions().dtype(stored));
    AdviseHugePages(t.data_ptr(), loc.entry->nbytes());
    Status s = loc.shard->file->ReadAt(loc.shard->header.data_offset + loc.entry->begin,
                                       loc.entry->nbytes(), t.data_ptr());
    if (!s.ok()) return s.Prepend("tensor '" + name + "': ");
    return t;
  } catch (const c10::Error& e) {
    return ResourceExhaustedError("tensor '" + name + "' in " + loc.info.file + ": " +
                                  e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("tensor '" + name + "' in " + loc.info.file + ": out of memory");
  }
}

StatusOr<at::Tensor> SafetensorsSource::Load(const std::string& name, at::ScalarType dtype) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return NotFoundError("tensor '" + name + "' not found in " + description_);
  }
  const Location& loc = it->second;
  const SafetensorsEntry& e = *loc.entry;
  const bool fp8 = e.dtype == SafetensorsDtype::kF8E4M3 || e.dtype == SafetensorsDtype::kF8E5M2;
  QD_ASSIGN_OR_RETURN(at::ScalarType stored, StorageScalarType(e.dtype));
  if (stored == dtype || (fp8 && !at::isFloatingType(dtype))) {
    QD_ASSIGN_OR_RETURN(at::Tensor t, LoadStored(name));
    if (t.scalar_type() == dtype) return t;
    try {
      return t.to(dtype);
    } catch (const c10::Error& err) {
      return InternalError("tensor '" + name + "': " + err.what_without_backtrace());
    }
  }
  // Converting: read through a small staging buffer straight into the
  // destination, so a large tensor never exists twice (stored + converted).
  try {
    at::Tensor out = at::empty(e.shape, at::TensorOptions().dtype(dtype));
    AdviseHugePages(out.data_ptr(), static_cast<uint64_t>(out.numel()) * out.element_size());
    at::Tensor flat = out.view({-1});
    const int64_t es = SafetensorsDtypeSize(e.dtype);
    const int64_t numel = e.numel();
    const int64_t chunk = std::max<int64_t>(1, (int64_t{4} << 20) / es);
    at::Tensor staging = at::empty({std::min(chunk, std::max<int64_t>(numel, 1))},
                                   at::TensorOptions().dtype(stored));
    for (int64_t done = 0; done < numel; done += chunk) {
      const int64_t n = std::min(chunk, numel - done);
      at::Tensor part = staging.narrow(0, 0, n);
      Status s = loc.shard->file->ReadAt(loc.shard->header.data_offset + e.begin + done * es,
                                         static_cast<uint64_t>(n * es), part.data_ptr());
      if (!s.ok()) return s.Prepend("tensor '" + name + "': ");
      flat.narrow(0, done, n).copy_(fp8 ? DecodeFp8(part, e.dtype) : part);
    }
    return out;
  } catch (const c10::Error& err) {
    return ResourceExhaustedError("tensor '" + name + "' in " + loc.info.file + ": converting to " +
                                  c10::toString(dtype) + ": " + err.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("tensor '" + name + "' in " + loc.info.file + ": out of memory");
  }
}

}  // namespace quantd::io
