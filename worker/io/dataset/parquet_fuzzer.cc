// Fuzzes the Parquet reader: bad input is an INVALID_ARGUMENT or
// RESOURCE_EXHAUSTED Status, never a crash, and every row it accepts dumps as
// JSON (strings and names are valid UTF-8).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "worker/io/dataset/parquet_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view content(reinterpret_cast<const char*>(data), size);
  quantd::ParquetLimits limits;
  limits.max_decoded_bytes = 64 << 20;  // keeps each run small and fast
  limits.max_page_bytes = 16 << 20;
  auto names = quantd::ParquetColumnNames(content, "fuzz", limits);
  auto rows = quantd::ReadParquetRows(content, {}, "fuzz", 1000, limits);
  if (!rows.ok()) {
    auto code = rows.status().code();
    if (code != quantd::StatusCode::kInvalidArgument &&
        code != quantd::StatusCode::kResourceExhausted)
      __builtin_trap();
    return 0;
  }
  if (!names.ok()) __builtin_trap();
  for (const auto& row : *rows) (void)row.dump();  // throws (aborts) on bad UTF-8
  return 0;
}
