// The engine's quantization config: which spec quantizes which tensor of
// which layer, mirroring the reference toolkit's (AMD Quark) QConfig, and the
// rules that resolve it for a named layer.
//
//  - A layer config holds the specs of its input_tensors, output_tensors,
//    weight and bias (each optional: unset means not quantized).
//  - Resolution for a layer: excluded (fnmatch globs, where `p` also matches
//    `p.*`) -> not quantized; else the first layer_quant_config whose glob
//    matches the name; else the layer_type_quant_config of its type; else
//    global_quant_config. Embeddings take only a layer or type config that
//    names them, and lm_head is left in float unless a layer_quant_config
//    glob names it (the reference's LLM flows exclude it by default).
//  - kv_cache_quant_config puts its output spec on the outputs of the
//    matching layers (the k / v projections).
//
// Validation reports every bad field at once (INVALID_ARGUMENT, reason
// INVALID_QUANT_CONFIG, one FieldViolation each), including patterns over
// the limits of worker/common/name_pattern.h (1024 characters, a regex
// within RE2's memory bound, 1000 name patterns in all); ValidateForLayers adds the
// checks that need the model's layers (group sizes that do not divide a
// layer, globs that match nothing -- the latter as warnings).
//
// Torch-free: the server validates configs with it.
#ifndef QUANTD_WORKER_CONFIG_QUANT_CONFIG_H_
#define QUANTD_WORKER_CONFIG_QUANT_CONFIG_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "worker/common/deadline.h"
#include "worker/common/status.h"
#include "worker/config/algorithm_options.h"
#include "worker/quant/spec.h"

namespace quantd::config {

using quant::QuantSpec;

// The quantizers of one layer.
struct LayerQuantConfig {
  std::optional<QuantSpec> input_tensors;
  std::optional<QuantSpec> output_tensors;
  std::optional<QuantSpec> weight;
  std::optional<QuantSpec> bias;

  bool empty() const { return !input_tensors && !output_tensors && !weight && !bias; }
  bool operator==(const LayerQuantConfig& o) const;
  bool operator!=(const LayerQuantConfig& o) const { return !(*this == o); }
};

// A layer config for the layers whose name matches `pattern` (fnmatch).
struct NamedLayerQuantConfig {
  std::string pattern;
  LayerQuantConfig config;
  bool operator==(const NamedLayerQuantConfig& o) const {
    return pattern == o.pattern && config == o.config;
  }
};

// A layer config for every layer of a module type ("Linear", "Embedding",
// "EmbeddingBag", "Conv2d", "ConvTranspose2d").
struct TypedLayerQuantConfig {
  std::string layer_type;
  LayerQuantConfig config;
  bool operator==(const TypedLayerQuantConfig& o) const {
    return layer_type == o.layer_type && config == o.config;
  }
};

// The module types a config can name.
const std::vector<std::string>& KnownLayerTypes();

// One algorithm; they run in the order of QuantConfig::algorithms (the
// scaling ones before GPTQ: worker/algo/algorithm_plan.h). `options` holds
// the engine's values: those the source did not set are the algorithm's
// defaults (documented in quant_config.proto and algorithm_options.h).
struct AlgorithmConfig {
  AlgorithmOptions options;
  // Which of the options that a source may leave unset it did set, by their
  // proto field name ("damp_percent", "block_size", "grid_size",
  // "clip_max_tokens", "model_decoder_layers", "alpha", "alpha_step",
  // "seed"): writing the config back (ToProto, WriteQuarkJson) writes these
  // and leaves the others out again, so an export says what the job said.
  std::set<std::string> given;

  AlgorithmKind kind() const { return KindOf(options); }
  bool Given(const std::string& field) const { return given.count(field) > 0; }
  bool operator==(const AlgorithmConfig& o) const {
    return options == o.options && given == o.given;
  }
};

struct QuantConfig {
  LayerQuantConfig global_quant_config;
  std::vector<TypedLayerQuantConfig> layer_type_quant_config;
  // In order: the first matching glob wins.
  std::vector<NamedLayerQuantConfig> layer_quant_config;
  std::vector<NamedLayerQuantConfig> kv_cache_quant_config;
  std::vector<std::string> exclude;
  std::vector<AlgorithmConfig> algorithms;
  // Lower bound of the k / v cache scales.
  double min_kv_scale = 0.0;
  // What the reference JSON held that the fields above do not model (keys,
  // spellings, key order), so that writing a parsed config back loses
  // nothing; opaque, maintained by quark_json.h, ignored by operator==.
  std::string reference_json;
  // What reading the config decided that the user should hear about, one
  // line each: keys kept (for the round trip) that take no effect, a
  // quant_method read as another. The job's warning events; ignored by
  // operator==.
  std::vector<std::string> notes;

  bool operator==(const QuantConfig& o) const;
  bool operator!=(const QuantConfig& o) const { return !(*this == o); }
};

// ---- matching and resolution ----

// Python fnmatch.fnmatch semantics on POSIX: '*', '?', '[seq]', '[!seq]';
// '*' matches dots too; case-sensitive. Linear in the name, no recursion
// (worker/common/name_pattern.h).
bool GlobMatch(std::string_view pattern, std::string_view name);
// True when `name` matches `pattern` or `pattern.*` (the reference expands
// every exclude entry so). An entry "re:<regex>" is a regular expression
// matched from the start of the name (Python's re.match), the spelling of
// newer Quark exports ("re:.*self_attn.*"). Regexes run on RE2 (linear
// time; no backreferences or lookaround).
bool ExcludeMatch(std::string_view pattern, std::string_view name);
// OK, or INVALID_ARGUMENT saying why an exclude entry is refused: a glob or
// regex over kMaxPatternLength characters, a regex RE2 does not compile
// within its memory bound.
Status CheckExcludePattern(std::string_view entry);

// A layer of the model as the config sees it.
struct LayerInfo {
  std::string name;  // "model.layers.0.self_attn.q_proj"
  std::string type;  // one of KnownLayerTypes(), or anything else (never quantized)
  int64_t out_features = 0;
  int64_t in_features = 0;
};

// What resolution decided for one layer.
struct ResolvedLayer {
  enum class Origin {
    kNotQuantized,  // a type the config does not quantize, lm_head, an embedding
    kExcluded,
    kLayerName,  // layer_quant_config[origin_index]
    kLayerType,  // layer_type_quant_config[origin_index]
    kGlobal,
  };
  bool quantized = false;
  LayerQuantConfig config;  // output_tensors includes the kv-cache spec
  Origin origin = Origin::kNotQuantized;
  int origin_index = -1;  // into the list named by origin (or exclude)
  // Why, for messages: "global_quant_config", "layer_type_quant_config[Linear]",
  // "layer_quant_config[*down_proj]", "exclude[lm_head]", "lm_head is left in
  // float unless a layer_quant_config glob names it", ...
  std::string source;
  // The kv_cache_quant_config entry that matched, if any.
  int kv_cache_index = -1;
};

ResolvedLayer ResolveLayer(const QuantConfig& config, const std::string& name,
                           const std::string& type);

// ---- validation ----

// How field paths are spelled in violations: as in quant_config.proto
// ("layer_quant_config[0].config.weight.group_size", "algorithms[1].gptq")
// or as in the reference JSON ("layer_quant_config.*down_proj.weight.group_size",
// "algo_config[1]").
enum class PathStyle { kProto, kReferenceJson };

// Appends a violation per bad field; `prefix` is prepended to each path
// (e.g. "spec.quantization.config.").
void CollectViolations(const QuantConfig& config, PathStyle style, const std::string& prefix,
                       std::vector<FieldViolation>* out);

// OK, or INVALID_ARGUMENT (reason INVALID_QUANT_CONFIG) carrying every
// violation.
Status ValidateConfig(const QuantConfig& config, PathStyle style = PathStyle::kProto,
                      const std::string& prefix = "");

// Builds the INVALID_ARGUMENT status for a list of violations.
Status ViolationsStatus(std::vector<FieldViolation> violations);

struct LayerCheck {
  Status status;                      // OK or INVALID_ARGUMENT with violations
  std::vector<std::string> warnings;  // globs that match no layer, ...
  // The deadline passed before every layer was checked; status and
  // warnings hold what was found until then.
  bool out_of_time = false;
};

// Checks `config` against the model's layers: a per_group weight whose group
// size does not divide the layer's input width (unless the layer is
// excluded), a per-channel axis out of range; and warns about
// layer_quant_config / kv_cache_quant_config / exclude globs that match no
// layer. Includes ValidateConfig's violations. Stops (out_of_time) once
// `deadline` has passed: the work is layers x patterns.
LayerCheck ValidateForLayers(const QuantConfig& config, const std::vector<LayerInfo>& layers,
                             PathStyle style = PathStyle::kProto, const std::string& prefix = "",
                             const Deadline& deadline = Deadline::Never());

// A short multi-line summary for logs and job events.
std::string DescribeConfig(const QuantConfig& config);

}  // namespace quantd::config

#endif  // QUANTD_WORKER_CONFIG_QUANT_CONFIG_H_
