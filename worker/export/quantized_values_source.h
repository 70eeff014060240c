// QuantizedValuesSource: a QuantizedModel's values after quantization as an
// io::TensorSource (the original's names, shapes and dtypes; Load gives
// QuantizedModel::Load converted), so code written for checkpoints (model
// loading, the GGUF writer) reads the quantized model unchanged.
#ifndef QUANTD_WORKER_EXPORT_QUANTIZED_VALUES_SOURCE_H_
#define QUANTD_WORKER_EXPORT_QUANTIZED_VALUES_SOURCE_H_

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "worker/export/quantized_model.h"
#include "worker/io/tensor_source.h"

namespace quantd::exporter {

class QuantizedValuesSource final : public io::TensorSource {
 public:
  // `model` must outlive the source.
  explicit QuantizedValuesSource(const QuantizedModel* model) : model_(model) {}
  std::vector<std::string> Names() const override { return model_->original().Names(); }
  const io::TensorInfo* Find(const std::string& name) const override {
    return model_->original().Find(name);
  }
  StatusOr<at::Tensor> Load(const std::string& name,
                            at::ScalarType dtype = at::kFloat) const override;
  std::string Description() const override {
    return "quantized values of " + model_->original().Description();
  }

 private:
  const QuantizedModel* model_;
};

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_QUANTIZED_VALUES_SOURCE_H_
