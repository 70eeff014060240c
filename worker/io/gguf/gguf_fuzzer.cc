// libFuzzer entry point for the GGUF parser: parse, render metadata, build
// config.json and dequantize small tensors. Any input must come back as a
// Status, never a crash, a sanitizer report or unbounded memory.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "worker/io/gguf/gguf_file.h"
#include "worker/io/gguf/hf_mapping.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quantd::gguf;
  auto source =
      MemoryByteSource(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.gguf");
  auto file = ParseGguf(*source);
  if (!file.ok()) return 0;
  for (const auto& [key, value] : file->metadata) (void)value.ToText(8);
  (void)BuildHfConfigJson(*file);
  for (const auto& tensor : file->tensors) {
    if (tensor.n_elements() <= (1 << 16)) (void)ReadGgufTensorAsFloat(*file, *source, tensor);
  }
  return 0;
}
