// In-memory TensorSources: TensorMapSource holds named tensors, and
// OverlaySource serves an overlay's tensors in front of a base source.
//
// The pipeline runs a block from its quantized weights by overlaying them on
// the checkpoint; tests build small random models without touching disk.
#ifndef QUANTD_WORKER_IO_TENSOR_MAP_SOURCE_H_
#define QUANTD_WORKER_IO_TENSOR_MAP_SOURCE_H_

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "worker/io/tensor_source.h"

namespace quantd::io {

class TensorMapSource final : public TensorSource {
 public:
  explicit TensorMapSource(std::string description = "in-memory tensors")
      : description_(std::move(description)) {}

  // Replaces any tensor of the same name. The tensor is kept as given
  // (Load() converts a copy).
  void Put(const std::string& name, const at::Tensor& tensor);
  bool Erase(const std::string& name);

  std::vector<std::string> Names() const override;
  const TensorInfo* Find(const std::string& name) const override;
  StatusOr<at::Tensor> Load(const std::string& name,
                            at::ScalarType dtype = at::kFloat) const override;
  std::string Description() const override { return description_; }

 private:
  struct Entry {
    TensorInfo info;
    at::Tensor tensor;
  };
  std::string description_;
  std::map<std::string, Entry> tensors_;
};

class OverlaySource final : public TensorSource {
 public:
  // Both must outlive the overlay source.
  OverlaySource(std::shared_ptr<const TensorSource> overlay,
                std::shared_ptr<const TensorSource> base)
      : overlay_(std::move(overlay)), base_(std::move(base)) {}

  std::vector<std::string> Names() const override;
  const TensorInfo* Find(const std::string& name) const override;
  StatusOr<at::Tensor> Load(const std::string& name,
                            at::ScalarType dtype = at::kFloat) const override;
  std::map<std::string, std::string> Metadata() const override { return base_->Metadata(); }
  std::string Description() const override {
    return overlay_->Description() + " over " + base_->Description();
  }

 private:
  std::shared_ptr<const TensorSource> overlay_;
  std::shared_ptr<const TensorSource> base_;
};

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_TENSOR_MAP_SOURCE_H_
