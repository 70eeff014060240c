// GGUF container: header, typed metadata and tensor directory.
//
// A bounds-checked, torch-free parser for GGUF v2 and v3 (little-endian), the
// file format of llama.cpp. Every count, length and offset read from the file
// is checked against the bytes that remain before anything is allocated, so
// a corrupt or hostile file yields DATA_LOSS (or INVALID_ARGUMENT) with the
// file name, never a crash; the fuzz target drives ParseGguf directly. Tensor
// data is not read here: GgufTensorInfo says where it lives, and
// ReadGgufTensorBytes fetches one tensor with pread.
#ifndef QUANTD_WORKER_IO_GGUF_GGUF_FILE_H_
#define QUANTD_WORKER_IO_GGUF_GGUF_FILE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/gguf/ggml_types.h"

namespace quantd::gguf {

// gguf_type: the value types of metadata.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
const char* GgufValueTypeName(GgufValueType type);

// One metadata value. Scalars keep their exact value in the member matching
// their class (unsigned, signed, floating, bool, string); arrays keep their
// element type and elements in the matching vector (arrays of arrays in
// `array`). The file's exact type is kept so a writer can reproduce it.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  GgufValueType elem_type = GgufValueType::kUint8;  // arrays only
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;
  std::vector<uint64_t> au;  // unsigned integer arrays
  std::vector<int64_t> ai;   // signed integer arrays
  std::vector<double> af;    // float32/float64 arrays
  std::vector<uint8_t> ab;   // bool arrays
  std::vector<std::string> as;
  std::vector<GgufValue> array;  // arrays of arrays

  bool is_array() const { return type == GgufValueType::kArray; }
  // Elements of an array; 0 for a scalar.
  size_t array_size() const;
  // Compact text: scalars as written ("64", "1e-05", "true", the string);
  // arrays as JSON when they have at most `max_array` elements, otherwise
  // "[<N> <type> values]".
  std::string ToText(size_t max_array = 64) const;

  // Builders, for writers and tests.
  static GgufValue Uint32(uint32_t v);
  static GgufValue Int32(int32_t v);
  static GgufValue Uint64(uint64_t v);
  static GgufValue Float32(float v);
  static GgufValue Bool(bool v);
  static GgufValue String(std::string v);
  static GgufValue StringArray(std::vector<std::string> v);
  static GgufValue Float32Array(std::vector<float> v);
  static GgufValue Int32Array(std::vector<int32_t> v);
};

struct GgufTensorInfo {
  std::string name;
  // ggml order: ne[0] is the innermost (contiguous) dimension. The PyTorch
  // shape is the reverse.
  std::vector<int64_t> ne;
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t nbytes = 0;  // bytes in the file
  int64_t n_elements() const;
  std::vector<int64_t> torch_shape() const;
};

struct GgufFile {
  uint32_t version = 3;
  std::string path;  // for error messages; empty for in-memory parses
  uint32_t alignment = 32;
  uint64_t data_offset = 0;  // absolute file offset of the data section
  uint64_t file_size = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata;  // file order
  std::vector<GgufTensorInfo> tensors;                      // file order

  const GgufValue* Find(std::string_view key) const;
  const GgufTensorInfo* FindTensor(std::string_view name) const;

  // Typed metadata access. NOT_FOUND names a missing key; INVALID_ARGUMENT
  // names a key of the wrong type. Integer getters accept every integer
  // type whose value fits.
  StatusOr<std::string> GetString(std::string_view key) const;
  StatusOr<int64_t> GetInt(std::string_view key) const;
  StatusOr<double> GetFloat(std::string_view key) const;  // any float or integer type
  StatusOr<bool> GetBool(std::string_view key) const;
  StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const;
  StatusOr<std::vector<double>> GetFloatArray(std::string_view key) const;
  StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;
  // Defaults for optional keys (still an error when present with a bad type).
  StatusOr<int64_t> GetIntOr(std::string_view key, int64_t fallback) const;
  StatusOr<double> GetFloatOr(std::string_view key, double fallback) const;
  StatusOr<bool> GetBoolOr(std::string_view key, bool fallback) const;

  // Where messages say the file is: the path, or "<memory>".
  std::string where() const { return path.empty() ? "<memory>" : path; }
};

// Random access to the bytes of a GGUF file.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  // Reads exactly n bytes at `offset` (the caller has checked the range).
  virtual Status Read(uint64_t offset, size_t n, void* dst) const = 0;
  virtual std::string name() const = 0;
};

// A file read with pread; the descriptor stays open for tensor reads.
StatusOr<std::unique_ptr<ByteSource>> OpenFileByteSource(const std::string& path);
// Borrowed bytes (they must outlive the source); used by tests and fuzzing.
std::unique_ptr<ByteSource> MemoryByteSource(std::string_view bytes, std::string name = "");

// Limits that keep a hostile header from exhausting memory or the stack
// (real files: vocabularies of up to 262k tokens, merges up to ~500k, a
// few MB of metadata in all, no nested arrays). Past one: INVALID_ARGUMENT
// naming the key, the limit and the value.
struct GgufParseOptions {
  uint64_t max_string_bytes = 1ull << 24;  // one string
  uint64_t max_array_elements = 1ull << 24;  // one array
  // Elements of every array of the file together, nested ones included.
  uint64_t max_total_array_elements = 1ull << 25;
  // Arrays that are elements of another array, in all (each costs a
  // GgufValue, ~20x the 12 bytes it takes in the file).
  uint64_t max_nested_arrays = 1ull << 16;
  // Arrays of arrays recurse once per level: never more than
  // kMaxGgufArrayDepth, whatever is set here.
  int max_array_depth = 4;
  uint64_t max_tensors = 1ull << 20;
  uint64_t max_metadata = 1ull << 20;
};
inline constexpr int kMaxGgufArrayDepth = 8;

// Parses the header, metadata and tensor directory and checks that every
// tensor's data lies inside the file, aligned, without overlap of the header.
StatusOr<GgufFile> ParseGguf(const ByteSource& source, const GgufParseOptions& options = {});
// Convenience: ParseGguf over OpenFileByteSource(path).
StatusOr<GgufFile> ReadGgufFile(const std::string& path, const GgufParseOptions& options = {});

// Reads the raw bytes of one tensor.
StatusOr<std::vector<uint8_t>> ReadGgufTensorBytes(const GgufFile& file, const ByteSource& source,
                                                   const GgufTensorInfo& tensor);
// Reads and dequantizes one tensor to float32, in ggml element order.
StatusOr<std::vector<float>> ReadGgufTensorAsFloat(const GgufFile& file, const ByteSource& source,
                                                   const GgufTensorInfo& tensor);

}  // namespace quantd::gguf

#endif  // QUANTD_WORKER_IO_GGUF_GGUF_FILE_H_
