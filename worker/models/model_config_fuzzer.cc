// Fuzzes config.json parsing and the torch-free layer listing the server
// runs at submit time: any text gives a Status or a config whose listed
// layers have positive shapes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "worker/models/layer_shapes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = quantd::models::ParseModelConfig(text, "fuzz/config.json");
  if (!config.ok()) return 0;
  // Listing is linear in the layer count; keep each input cheap.
  if (config->num_hidden_layers > 64) return 0;
  for (const auto& l : quantd::models::ListLinearLayers(*config)) {
    if (l.out_features <= 0 || l.in_features <= 0 || l.name.empty()) __builtin_trap();
  }
  return 0;
}
