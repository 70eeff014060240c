#include "worker/pipeline/scratch_store.h"

#include <c10/util/Exception.h>

#include <filesystem>
#include <future>

#include "worker/io/safetensors/safetensors_source.h"
#include "worker/io/safetensors/safetensors_writer.h"
#include "worker/io/safetensors/tensor_io.h"

namespace quantd::pipeline {

namespace fs = std::filesystem;

StatusOr<std::unique_ptr<ScratchStore>> ScratchStore::Create(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return FailedPreconditionError("cannot create scratch directory " + dir + ": " + ec.message());
  return std::unique_ptr<ScratchStore>(new ScratchStore(dir));
}

std::string ScratchStore::PathOf(const std::string& file) const {
  return (fs::path(dir_) / (file + ".safetensors")).string();
}

Status ScratchStore::Adopt(const std::string& file) {
  const std::string path = PathOf(file);
  if (!fs::exists(path)) return NotFoundError("scratch file " + path + " is missing");
  QD_ASSIGN_OR_RETURN(auto source, io::SafetensorsSource::Open(path));
  std::shared_ptr<const io::TensorSource> shared = std::move(source);
  for (const auto& name : shared->Names()) by_name_[name] = shared;
  return OkStatus();
}

Status ScratchStore::PutSide(const std::string& file, const std::string& name,
                             const at::Tensor& t) const {
  QD_ASSIGN_OR_RETURN(auto writer, io::SafetensorsWriter::Create(PathOf(file)));
  QD_RETURN_IF_ERROR(io::AddTensor(*writer, name, t.contiguous()));
  return writer->Finish();
}

StatusOr<at::Tensor> ScratchStore::LoadSide(const std::string& file,
                                            const std::string& name) const {
  QD_ASSIGN_OR_RETURN(auto source, io::SafetensorsSource::Open(PathOf(file)));
  const io::TensorInfo* info = source->Find(name);
  if (!info) return NotFoundError("no tensor " + name + " in " + PathOf(file));
  const at::ScalarType dtype = info->dtype == "BF16"  ? at::kBFloat16
                               : info->dtype == "F16" ? at::kHalf
                                                      : at::kFloat;
  return source->Load(name, dtype);
}

void ScratchStore::RemoveSide(const std::string& file) const {
  std::error_code ec;
  fs::remove(PathOf(file), ec);
}

namespace {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

Status WriteFile(const std::string& path, const NamedTensors& tensors) {
  QD_ASSIGN_OR_RETURN(auto writer, io::SafetensorsWriter::Create(path));
  for (const auto& [name, t] : tensors)
    QD_RETURN_IF_ERROR(io::AddTensor(*writer, name, t.to(at::kFloat).contiguous()));
  return writer->Finish();
}

}  // namespace

ScratchStore::~ScratchStore() {
  if (pending_.valid()) pending_.wait();
}

Status ScratchStore::Serve(const std::string& path, const std::vector<std::string>& names) {
  QD_ASSIGN_OR_RETURN(auto source, io::SafetensorsSource::Open(path));
  std::shared_ptr<const io::TensorSource> shared = std::move(source);
  for (const auto& name : names) by_name_[name] = shared;
  return OkStatus();
}

Status ScratchStore::Put(const std::string& file, const NamedTensors& tensors) {
  QD_RETURN_IF_ERROR(Flush());
  const std::string path = PathOf(file);
  QD_RETURN_IF_ERROR(WriteFile(path, tensors));
  std::vector<std::string> names;
  for (const auto& [name, t] : tensors) names.push_back(name);
  return Serve(path, names);
}

Status ScratchStore::PutAsync(const std::string& file, const NamedTensors& tensors) {
  QD_RETURN_IF_ERROR(Flush());
  // Host copies (always copies: the caller may change its tensors after).
  NamedTensors host;
  host.reserve(tensors.size());
  try {
    for (const auto& [name, t] : tensors)
      host.emplace_back(
          name, t.to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true).contiguous());
  } catch (const c10::Error& e) {
    return InternalError("scratch " + file + ": " + e.what_without_backtrace());
  }
  pending_path_ = PathOf(file);
  pending_names_.clear();
  for (const auto& [name, t] : host) pending_names_.push_back(name);
  pending_ =
      std::async(std::launch::async, [path = pending_path_, host = std::move(host)]() -> Status {
        try {
          return WriteFile(path, host);
        } catch (const std::exception& e) {
          return InternalError("writing " + path + ": " + e.what());
        }
      });
  return OkStatus();
}

Status ScratchStore::Flush() {
  if (!pending_.valid()) return OkStatus();
  QD_RETURN_IF_ERROR(pending_.get());
  return Serve(pending_path_, pending_names_);
}

std::vector<std::string> ScratchStore::Names() const {
  std::vector<std::string> out;
  for (const auto& [name, src] : by_name_) out.push_back(name);
  return out;
}

const io::TensorInfo* ScratchStore::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second->Find(name);
}

StatusOr<at::Tensor> ScratchStore::Load(const std::string& name, at::ScalarType dtype) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return NotFoundError("no tensor " + name + " in " + Description());
  return it->second->Load(name, dtype);
}

}  // namespace quantd::pipeline
