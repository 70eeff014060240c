// Safetensors file format: dtypes and a bounds-checked header parser.
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of
// JSON mapping tensor names to {dtype, shape, data_offsets} (plus an optional
// "__metadata__" string map), then the data section. This target is
// torch-free so that the server, tools and the libFuzzer target can use it;
// every structural check the readers rely on (header size, JSON shape, dtype,
// offsets inside the data section, byte size equal to shape x element size)
// happens here, and any violation is a DATA_LOSS Status naming the file and
// the tensor, never an exception or a crash.
#ifndef QUANTD_WORKER_IO_SAFETENSORS_SAFETENSORS_FORMAT_H_
#define QUANTD_WORKER_IO_SAFETENSORS_SAFETENSORS_FORMAT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "worker/common/status.h"

namespace quantd::io {

// Headers larger than this are refused (the reference implementation uses
// the same 100 MB bound) so a corrupt length cannot make us allocate the disk.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;
// Deeper JSON nesting than this is refused before parsing
// (worker/common/bounded_json.h); a valid header nests 3 levels.
inline constexpr int kMaxSafetensorsJsonDepth = 64;
inline constexpr int kMaxSafetensorsRank = 16;

// The dtypes the safetensors format defines.
enum class SafetensorsDtype {
  kBool,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
};

// The dtype a tensor stored as `dtype` (io::TensorInfo::dtype) keeps when an
// export writes it unquantized: itself when safetensors defines it, F32 for
// other storage (a GGUF block type such as "Q8_0", whose dequantized values
// F32 holds exactly).
SafetensorsDtype KeptSafetensorsDtype(std::string_view dtype);

// "F32" -> kF32 etc.; nullopt for names the format does not define.
std::optional<SafetensorsDtype> ParseSafetensorsDtype(std::string_view name);
const char* SafetensorsDtypeName(SafetensorsDtype dtype);
// Bytes per element (1 for BOOL and the FP8 types).
int SafetensorsDtypeSize(SafetensorsDtype dtype);

struct SafetensorsEntry {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<int64_t> shape;
  // Byte range [begin, end) relative to the start of the data section.
  uint64_t begin = 0;
  uint64_t end = 0;

  uint64_t nbytes() const { return end - begin; }
  int64_t numel() const;
};

struct SafetensorsHeader {
  // Absolute file offset of the data section (8 + header length).
  uint64_t data_offset = 0;
  // Size of the data section in bytes.
  uint64_t data_size = 0;
  // Sorted by name.
  std::vector<SafetensorsEntry> tensors;
  // "__metadata__"; non-string values are kept as their JSON text.
  std::map<std::string, std::string> metadata;

  // nullptr when absent.
  const SafetensorsEntry* Find(std::string_view name) const;
};

// Reads the 8-byte length prefix and checks it against the file size.
// `file` is only used in error messages.
StatusOr<uint64_t> ParseSafetensorsHeaderLength(const uint8_t prefix[8], uint64_t file_size,
                                                const std::string& file);

// Parses the JSON header text. `data_size` is the size of the data section
// (file size - 8 - header length); every entry must lie inside it.
StatusOr<SafetensorsHeader> ParseSafetensorsHeaderJson(std::string_view json, uint64_t data_size,
                                                       const std::string& file);

// Parses a whole file held in memory (header and data).
StatusOr<SafetensorsHeader> ParseSafetensorsBuffer(std::string_view bytes, const std::string& file);

// model.safetensors.index.json: which shard file holds each tensor.
struct SafetensorsIndex {
  // "weight_map" entries (tensor name, shard file name as written), sorted
  // by tensor name.
  std::vector<std::pair<std::string, std::string>> weight_map;
  // "metadata"; non-string values are kept as their JSON text.
  std::map<std::string, std::string> metadata;
};

// Parses an index file's text (at most json_limits::kSafetensorsIndex bytes,
// 64 levels deep). DATA_LOSS naming `file` when it is not a JSON object
// with a "weight_map" object of strings. Which shard names are acceptable
// is the reader's business.
StatusOr<SafetensorsIndex> ParseSafetensorsIndex(std::string_view json, const std::string& file);

// Reads and parses only the header of the file at `path` (pread, no mmap).
// NOT_FOUND when the file cannot be opened; DATA_LOSS when it is malformed.
StatusOr<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_SAFETENSORS_SAFETENSORS_FORMAT_H_
