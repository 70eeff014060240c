// What a parsed reference JSON held beyond its canonical form
// (quark_json_canonical.h): the diff record that QuantConfig::reference_json
// keeps, so that writing the config back loses nothing. Internal to
// quark_json.
//
// A record mirrors the JSON tree where the two differ: objects keep their
// original key order and per-key records, arrays of equal length per-item
// records, and a leaf keeps both the original and the canonical value (or
// their absence). Restoring puts the original back wherever the canonical
// value is still the one seen at parse time.
#ifndef QUANTD_WORKER_CONFIG_QUARK_JSON_RECORD_H_
#define QUANTD_WORKER_CONFIG_QUARK_JSON_RECORD_H_

#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/config/quark_json_canonical.h"

namespace quantd::config::quark {

// The record of `original` against `canonical`; null when they are equal.
Json Diff(const Json& original, const Json& canonical);

// `now` (a canonical form) with the record's originals put back.
Json Restore(const Json& now, const Json& record);

// What the record's kept originals (keys the engine does not model, values
// it spells differently) may hold in all: they travel with the config into
// every export.
inline constexpr size_t kMaxKeptBytes = size_t{16} << 10;

// One violation per kept key, largest first, when the kept originals hold
// more than kMaxKeptBytes; paths prefixed with `prefix`.
std::vector<FieldViolation> CheckKeptSize(const Json& record, const std::string& prefix);

// The paths of the keys only the original holds (the engine does not model
// them), in the original's order; a null or false value asks for nothing,
// and keys that only describe ("version", a scaling entry's "help" and
// "has_kwargs") are left out.
std::vector<std::string> UnusedKeys(const Json& record);

}  // namespace quantd::config::quark

#endif  // QUANTD_WORKER_CONFIG_QUARK_JSON_RECORD_H_
