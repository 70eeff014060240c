#include "worker/pipeline/activation_offload.h"

#include <string>

namespace quantd::pipeline {

StatusOr<ActivationOffload> ParseActivationOffload(std::string_view name) {
  if (name == "auto") return ActivationOffload::kAuto;
  if (name == "host") return ActivationOffload::kHost;
  if (name == "device") return ActivationOffload::kDevice;
  return InvalidArgumentError("activation offload '" + std::string(name) +
                              "' is not one of auto, host, device");
}

const char* ActivationOffloadName(ActivationOffload mode) {
  switch (mode) {
    case ActivationOffload::kAuto:
      return "auto";
    case ActivationOffload::kHost:
      return "host";
    case ActivationOffload::kDevice:
      return "device";
  }
  return "auto";
}

}  // namespace quantd::pipeline
