// Fuzzes the reference toolkit's quantization-config JSON parser, which runs
// on every CreateJob with quark_json: any text (deeply nested, oversized,
// with huge unknown keys) gives a Status or a config, and a parsed config
// written back parses again to the same config.
#include <cstddef>
#include <cstdint>
#include <string>

#include "worker/common/bounded_json.h"
#include "worker/config/quark_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = quantd::config::ParseQuarkJson(text, "fuzz.");
  if (!config.ok()) return 0;
  const std::string written = quantd::config::WriteQuarkJson(*config, -1);
  // The canonical form spells out every spec field, so a compact input can
  // grow past the size limit; only what fits is read back.
  if (written.size() > quantd::json_limits::kQuarkConfig) return 0;
  auto again = quantd::config::ParseQuarkJson(written);
  if (!again.ok() || *again != *config) __builtin_trap();
  return 0;
}
