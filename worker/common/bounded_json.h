// JSON from untrusted sources (a job's Quark config, a model's config.json,
// tokenizer.json, dataset JSONL, safetensors indexes) parsed under limits.
//
// nlohmann::json parses iteratively, but copying, comparing, dump() and every
// walker over a parsed value recurse once per nesting level, so a few hundred
// thousand '[' overflow the stack long after the parse succeeded. Every
// untrusted parse therefore goes through ParseBoundedJson: the size is
// checked before anything else, then a single non-recursive pass measures the
// nesting depth, and only text within both limits reaches the parser (without
// exceptions). A value that passed is at most kMaxJsonDepth deep, which bounds
// every later recursion over it.
//
// The per-source size limits live here, in one place; docs/worker.md
// ("Limits on untrusted input") lists them.
#ifndef QUANTD_WORKER_COMMON_BOUNDED_JSON_H_
#define QUANTD_WORKER_COMMON_BOUNDED_JSON_H_

#include <cstddef>
#include <istream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "worker/common/status.h"

namespace quantd {

// Arrays and objects nested deeper than this are refused.
inline constexpr int kMaxJsonDepth = 64;

// Size limits per source, in bytes. Each is well above the largest real file
// of its kind (see docs/worker.md) and small enough that parsing it cannot
// exhaust a worker's memory.
namespace json_limits {
// spec.quantization.quark_json: a whole job spec is at most 256 KiB.
inline constexpr size_t kQuarkConfig = size_t{256} << 10;
// A model's config.json (a few KiB; a Quark export's quantization_config
// with a spec per layer glob adds ~1.3 KiB per glob, up to ~1.3 MB for the
// 1000 globs a config may hold), and the quantization_config object read
// back from an exported model.
inline constexpr size_t kModelConfig = size_t{4} << 20;
// tokenizer.json: up to ~35 MB for 256k-token vocabularies.
inline constexpr size_t kTokenizerJson = size_t{64} << 20;
// tokenizer_config.json and special_tokens_map.json (chat templates and
// added-token tables; ~2 MB at most in real models).
inline constexpr size_t kTokenizerConfig = size_t{16} << 20;
// model.safetensors.index.json: a few MB for 100k tensors.
inline constexpr size_t kSafetensorsIndex = size_t{64} << 20;
// One line of a JSONL dataset (one document).
inline constexpr size_t kDatasetLine = size_t{16} << 20;
// A JSON token-id dataset (one array of ids or of id rows).
inline constexpr size_t kDatasetJson = size_t{256} << 20;
}  // namespace json_limits

struct JsonBounds {
  size_t max_bytes = 0;
  int max_depth = kMaxJsonDepth;
};

// The deepest nesting of arrays and objects in `text` ("[]" is 1, "[{}]" is
// 2), skipping string contents. One pass, constant stack; not a validator
// (unbalanced text measures what a parser would have to hold open).
int JsonNestingDepth(std::string_view text);

// OK, or a Status with `code` naming `what`, the limit and the measured
// value: "config.json is 2097152 bytes; at most 1048576", "config.json nests
// 65 levels deep; at most 64".
Status CheckJsonBounds(std::string_view text, const JsonBounds& bounds, const std::string& what,
                       StatusCode code = StatusCode::kInvalidArgument);

// Reads `in` to its end, but never more than `max_bytes` + 1 bytes: enough
// for CheckJsonBounds to refuse a larger file without holding all of it.
// Sets `in`'s badbit on a read error, as a whole read would.
std::string ReadAtMost(std::istream& in, size_t max_bytes);

// CheckJsonBounds, then parses without exceptions. Text that is not JSON is
// "<what>: not valid JSON" with `code`. Json is nlohmann::json or
// nlohmann::ordered_json.
template <typename Json = nlohmann::json>
StatusOr<Json> ParseBoundedJson(std::string_view text, const JsonBounds& bounds,
                                const std::string& what,
                                StatusCode code = StatusCode::kInvalidArgument) {
  QD_RETURN_IF_ERROR(CheckJsonBounds(text, bounds, what, code));
  Json j = Json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status(code, what + ": not valid JSON");
  return j;
}

}  // namespace quantd

#endif  // QUANTD_WORKER_COMMON_BOUNDED_JSON_H_
