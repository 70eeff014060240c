// A Parquet reader for calibration and evaluation datasets, written from the
// Parquet format specification (parquet-format's parquet.thrift and
// Encodings.md); there is no Arrow library on the build hosts. Torch-free.
//
// Scope: what pyarrow and other writers put in Hugging Face datasets.
//   Types: BOOLEAN, INT32, INT64 (signed, or unsigned when annotated UINT_*),
//     FLOAT, DOUBLE, BYTE_ARRAY (unannotated, STRING/UTF8, ENUM, JSON; the
//     bytes must be valid UTF-8, so a later json::dump() cannot throw).
//     INT96, FIXED_LEN_BYTE_ARRAY and DECIMAL are refused.
//   Shapes: primitives, structs, lists (3-level and the legacy 2-level forms)
//     nested in any way; MAP is refused. Absent optional values are null.
//   Encodings: PLAIN, PLAIN_DICTIONARY/RLE_DICTIONARY, RLE (levels and
//     booleans), DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY,
//     DELTA_BYTE_ARRAY, BYTE_STREAM_SPLIT (4- and 8-byte types). Levels
//     encoded BIT_PACKED (deprecated) are refused.
//   Pages: DATA_PAGE, DATA_PAGE_V2, DICTIONARY_PAGE; INDEX_PAGE is skipped.
//   Codecs: UNCOMPRESSED, SNAPPY, GZIP, ZSTD (LZO, BROTLI, LZ4 are refused).
//   Encrypted files and column chunks in other files are refused.
//
// The file is untrusted: every count, length and offset is checked before
// use, allocations are bounded by ParquetLimits, and a malformed file is
// INVALID_ARGUMENT "dataset NAME: parquet ...", a limit RESOURCE_EXHAUSTED.
// Loops poll cancellation (worker/common/cancellation.h).
#ifndef QUANTD_WORKER_IO_DATASET_PARQUET_READER_H_
#define QUANTD_WORKER_IO_DATASET_PARQUET_READER_H_

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "worker/common/status.h"

namespace quantd {

struct ParquetLimits {
  uint64_t max_footer_bytes = 16 << 20;
  uint32_t max_columns = 4096;  // schema elements below the root
  uint32_t max_row_groups = 1 << 16;
  uint64_t max_page_bytes = 256 << 20;  // compressed or uncompressed
  // Sum over the file of decompressed pages plus the decoded values (each
  // level/value slot and each string's bytes count).
  uint64_t max_decoded_bytes = 4ull << 30;
  int max_nesting = 16;  // schema depth
};

// The rows of a Parquet file (in memory) as JSON objects holding the
// requested top-level columns (all of them when `columns` is empty), in file
// order; at most `max_rows` rows (reading stops early). Object keys are
// sorted (nlohmann::json's std::map), whatever the order in `columns`. A
// column that does not exist is INVALID_ARGUMENT listing the ones that do.
StatusOr<std::vector<nlohmann::json>> ReadParquetRows(std::string_view content,
                                                      const std::vector<std::string>& columns,
                                                      const std::string& name,
                                                      size_t max_rows = SIZE_MAX,
                                                      const ParquetLimits& limits = {});

// The top-level column names, in schema order.
StatusOr<std::vector<std::string>> ParquetColumnNames(std::string_view content,
                                                      const std::string& name,
                                                      const ParquetLimits& limits = {});

}  // namespace quantd

#endif  // QUANTD_WORKER_IO_DATASET_PARQUET_READER_H_
