// Fuzzes the safetensors header parser with whole files: whatever the bytes,
// it must return a Status (no crash, no sanitizer report), and whatever it
// accepts must satisfy the invariants the readers rely on.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "worker/io/safetensors/safetensors_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto header = quantd::io::ParseSafetensorsBuffer(bytes, "fuzz.safetensors");
  if (!header.ok()) {
    if (header.status().code() != quantd::StatusCode::kDataLoss) __builtin_trap();
    return 0;
  }
  if (header->data_offset + header->data_size != size) __builtin_trap();
  for (const auto& e : header->tensors) {
    if (e.begin > e.end || e.end > header->data_size) __builtin_trap();
    uint64_t bytes_needed = quantd::io::SafetensorsDtypeSize(e.dtype);
    for (int64_t d : e.shape) bytes_needed *= static_cast<uint64_t>(d);
    if (bytes_needed != e.nbytes()) __builtin_trap();
    if (header->Find(e.name) != &e) __builtin_trap();
  }
  return 0;
}
