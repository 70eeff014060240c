#include "worker/io/tensor_map_source.h"

#include <algorithm>

namespace quantd::io {

void TensorMapSource::Put(const std::string& name, const at::Tensor& tensor) {
  Entry e;
  e.info.name = name;
  e.info.shape = tensor.sizes().vec();
  e.info.dtype = c10::toString(tensor.scalar_type());
  e.info.file = description_;
  e.info.nbytes = static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
  e.tensor = tensor;
  tensors_[name] = std::move(e);
}

bool TensorMapSource::Erase(const std::string& name) { return tensors_.erase(name) > 0; }

std::vector<std::string> TensorMapSource::Names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : tensors_) out.push_back(name);
  return out;
}

const TensorInfo* TensorMapSource::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second.info;
}

StatusOr<at::Tensor> TensorMapSource::Load(const std::string& name, at::ScalarType dtype) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    return NotFoundError("tensor '" + name + "' not found in " + description_);
  try {
    // Always a fresh tensor: callers own and may modify what Load returns.
    return it->second.tensor.to(at::kCPU, dtype, /*non_blocking=*/false, /*copy=*/true)
        .contiguous();
  } catch (const c10::Error& e) {
    return InternalError("tensor '" + name + "': " + e.what_without_backtrace());
  }
}

std::vector<std::string> OverlaySource::Names() const {
  std::vector<std::string> a = overlay_->Names(), b = base_->Names(), out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

const TensorInfo* OverlaySource::Find(const std::string& name) const {
  const TensorInfo* info = overlay_->Find(name);
  return info != nullptr ? info : base_->Find(name);
}

StatusOr<at::Tensor> OverlaySource::Load(const std::string& name, at::ScalarType dtype) const {
  if (overlay_->Find(name) != nullptr) return overlay_->Load(name, dtype);
  return base_->Load(name, dtype);
}

}  // namespace quantd::io
