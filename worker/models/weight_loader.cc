#include "worker/models/weight_loader.h"

namespace quantd::models {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

at::Tensor ToDevice(const at::Tensor& host, const at::Device& device) {
  if (device.is_cpu() || !host.device().is_cpu()) return host.to(device);
  // Staged through page-locked memory so the copy is a DMA that does not
  // wait for the device: the GPU keeps computing the previous block while a
  // prefetch thread reads and stages this one. The caching host allocator
  // keeps the staging buffer until the copy has completed.
  at::Tensor pinned = at::empty(host.sizes(), host.options().pinned_memory(true));
  pinned.copy_(host);
  return pinned.to(device, /*non_blocking=*/true);
}

std::string WeightLoader::Resolve(const std::string& canonical) const {
  if (source_.Find(canonical) != nullptr) return canonical;
  const std::string& cp = layout_.canonical_prefix;
  if (!cp.empty() && canonical.compare(0, cp.size(), cp) == 0) {
    std::string alias = layout_.alias_prefix + canonical.substr(cp.size());
    if (source_.Find(alias) != nullptr) return alias;
  }
  return "";
}

StatusOr<at::Tensor> WeightLoader::Load(const std::string& canonical,
                                        const std::vector<int64_t>& shape, bool transposed) const {
  const std::string name = Resolve(canonical);
  if (name.empty()) {
    return NotFoundError("tensor '" + canonical + "' not found in " + source_.Description());
  }
  const io::TensorInfo* info = source_.Find(name);
  std::vector<int64_t> stored = shape;
  if (transposed && stored.size() == 2) std::swap(stored[0], stored[1]);
  if (info->shape != stored) {
    return DataLossError("tensor '" + name + "' in " + info->file + " has shape " +
                         ShapeString(info->shape) + " but config.json implies " +
                         ShapeString(stored));
  }
  QD_ASSIGN_OR_RETURN(at::Tensor t, source_.Load(name, options_.dtype));
  try {
    if (t.sizes() != at::IntArrayRef(stored)) {
      return DataLossError("tensor '" + name + "' from " + source_.Description() +
                           " loaded with shape " + ShapeString(t.sizes().vec()) + ", expected " +
                           ShapeString(stored));
    }
    if (transposed) t = t.t().contiguous();
    if (t.device() != options_.device) t = ToDevice(t, options_.device);
    return t;
  } catch (const c10::Error& e) {
    return InternalError("tensor '" + name + "': " + e.what_without_backtrace());
  }
}

StatusOr<std::pair<at::Tensor, at::Tensor>> WeightLoader::LoadLinear(
    const LinearLayerInfo& info) const {
  QD_ASSIGN_OR_RETURN(at::Tensor w,
                      Load(info.name + ".weight", {info.out_features, info.in_features},
                           info.transposed_in_checkpoint));
  at::Tensor b;
  if (info.has_bias) {
    QD_ASSIGN_OR_RETURN(b, Load(info.name + ".bias", {info.out_features}));
  }
  return std::make_pair(w, b);
}

StatusOr<std::pair<at::Tensor, at::Tensor>> WeightLoader::LoadNorm(const NormInfo& info) const {
  QD_ASSIGN_OR_RETURN(at::Tensor w, Load(info.name + ".weight", {info.dim}));
  at::Tensor b;
  if (info.has_bias) {
    QD_ASSIGN_OR_RETURN(b, Load(info.name + ".bias", {info.dim}));
  }
  return std::make_pair(w, b);
}

}  // namespace quantd::models
