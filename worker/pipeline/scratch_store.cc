#include "worker/pipeline/scratch_store.h"

#include <filesystem>

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

Status ScratchStore::Put(const std::string& file,
                         const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  const std::string path = PathOf(file);
  QD_ASSIGN_OR_RETURN(auto writer, io::SafetensorsWriter::Create(path));
  for (const auto& [name, t] : tensors)
    QD_RETURN_IF_ERROR(io::AddTensor(*writer, name, t.to(at::kFloat).contiguous()));
  QD_RETURN_IF_ERROR(writer->Finish());
  QD_ASSIGN_OR_RETURN(auto source, io::SafetensorsSource::Open(path));
  std::shared_ptr<const io::TensorSource> shared = std::move(source);
  for (const auto& [name, t] : tensors) by_name_[name] = shared;
  return OkStatus();
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
