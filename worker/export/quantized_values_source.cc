#include "worker/export/quantized_values_source.h"

#include <c10/util/Exception.h>

namespace quantd::exporter {

StatusOr<at::Tensor> QuantizedValuesSource::Load(const std::string& name,
                                                 at::ScalarType dtype) const {
  QD_ASSIGN_OR_RETURN(at::Tensor t, model_->Load(name));
  try {
    return t.to(dtype);
  } catch (const c10::Error& e) {
    return InternalError(name + ": " + e.what_without_backtrace());
  }
}

}  // namespace quantd::exporter
