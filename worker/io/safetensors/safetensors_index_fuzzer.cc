// Fuzzes the model.safetensors.index.json parser: any text gives DATA_LOSS
// or an index whose weight map is non-empty and sorted by tensor name.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "worker/io/safetensors/safetensors_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto index = quantd::io::ParseSafetensorsIndex(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.index.json");
  if (!index.ok()) {
    if (index.status().code() != quantd::StatusCode::kDataLoss) __builtin_trap();
    return 0;
  }
  if (index->weight_map.empty()) __builtin_trap();
  for (size_t i = 1; i < index->weight_map.size(); ++i) {
    if (!(index->weight_map[i - 1].first < index->weight_map[i].first)) __builtin_trap();
  }
  return 0;
}
