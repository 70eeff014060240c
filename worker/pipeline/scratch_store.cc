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

Status ScratchStore::Put(const std::string& file,
                         const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  const std::string path = (fs::path(dir_) / (file + ".safetensors")).string();
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
