#include "worker/config/quant_config.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "worker/common/name_pattern.h"

namespace quantd::config {
namespace {

using quant::DataTypeName;
using quant::DescribeSpec;
using quant::EffectiveChAxis;
using quant::IsMxType;
using quant::QScheme;
using quant::TensorRole;

bool SpecsEqual(const std::optional<QuantSpec>& a, const std::optional<QuantSpec>& b) {
  return a.has_value() == b.has_value() && (!a || *a == *b);
}

bool IsEmbeddingType(const std::string& type) {
  return type == "Embedding" || type == "EmbeddingBag";
}

bool IsLmHead(const std::string& name) {
  const size_t dot = name.rfind('.');
  return (dot == std::string::npos ? name : name.substr(dot + 1)) == "lm_head";
}

// Mixture-of-experts routers and Qwen2-MoE's shared-expert gate
// (models/layer_shapes.cc names them): they choose experts rather than
// compute features, and vLLM keeps them unquantized.
bool IsExpertRouter(const std::string& name) {
  for (const char* tail : {".mlp.gate", ".block_sparse_moe.gate", ".mlp.shared_expert_gate"}) {
    const size_t n = std::strlen(tail);
    if (name.size() >= n && name.compare(name.size() - n, n, tail) == 0) return true;
  }
  return false;
}

std::string FormatDouble(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Field-path spelling (see PathStyle).
struct Paths {
  PathStyle style;
  std::string prefix;

  std::string Global() const { return prefix + "global_quant_config"; }
  std::string LayerType(size_t i, const std::string& type) const {
    return style == PathStyle::kProto
               ? prefix + "layer_type_quant_config[" + std::to_string(i) + "].config"
               : prefix + "layer_type_quant_config." + type;
  }
  std::string LayerTypeName(size_t i, const std::string& type) const {
    return style == PathStyle::kProto
               ? prefix + "layer_type_quant_config[" + std::to_string(i) + "].layer_type"
               : prefix + "layer_type_quant_config." + type;
  }
  std::string Named(const char* list, size_t i, const std::string& pattern) const {
    return style == PathStyle::kProto ? prefix + list + "[" + std::to_string(i) + "].config"
                                      : prefix + list + "." + pattern;
  }
  std::string NamedPattern(const char* list, size_t i, const std::string& pattern) const {
    return style == PathStyle::kProto ? prefix + list + "[" + std::to_string(i) + "].pattern"
                                      : prefix + list + "." + pattern;
  }
  std::string Exclude(size_t i) const { return prefix + "exclude[" + std::to_string(i) + "]"; }
  std::string Algorithm(size_t i, AlgorithmKind kind) const {
    return style == PathStyle::kProto ? prefix + "algorithms[" + std::to_string(i) + "]." +
                                            std::string(AlgorithmKindName(kind))
                                      : prefix + "algo_config[" + std::to_string(i) + "]";
  }
  std::string MinKvScale() const {
    return style == PathStyle::kProto ? prefix + "min_kv_scale" : prefix + "export.min_kv_scale";
  }
  // A spec field name in this style.
  std::string SpecField(const std::string& engine_name) const {
    if (style == PathStyle::kReferenceJson) {
      if (engine_name == "observer") return "observer_cls";
      if (engine_name == "mx_scale_mode") return "scale_calculation_mode";
    }
    return engine_name;
  }
};

void ValidateLayerConfig(const LayerQuantConfig& c, const std::string& path, const Paths& paths,
                         std::vector<FieldViolation>* out) {
  const std::pair<const std::optional<QuantSpec>*, TensorRole> specs[] = {
      {&c.input_tensors, TensorRole::kInput},
      {&c.output_tensors, TensorRole::kOutput},
      {&c.weight, TensorRole::kWeight},
      {&c.bias, TensorRole::kBias}};
  for (const auto& [spec, role] : specs) {
    if (!spec->has_value()) continue;
    const std::string spec_path = path + "." + std::string(quant::TensorRoleName(role));
    std::vector<FieldViolation> v;
    quant::ValidateSpec(**spec, role, spec_path, &v);
    for (FieldViolation& f : v) {
      const size_t dot = f.field.rfind('.');
      f.field = f.field.substr(0, dot + 1) + paths.SpecField(f.field.substr(dot + 1));
      out->push_back(std::move(f));
    }
  }
}

void ValidateAlgorithm(const AlgorithmConfig& a, const std::string& path,
                       std::vector<FieldViolation>* out) {
  auto add = [&](const std::string& field, const std::string& what) {
    out->push_back({path + "." + field, what});
  };
  auto in_range = [](double v, double lo, double hi) {
    return std::isfinite(v) && v >= lo && v <= hi;
  };
  // An option the source left unset holds its default, which is valid.
  if (const auto* g = std::get_if<GptqOptions>(&a.options)) {
    if (!(in_range(g->damp_percent, 0, 1) && g->damp_percent > 0)) {
      add("damp_percent", "damp_percent must be in (0, 1]; got " + FormatDouble(g->damp_percent));
    }
    if (g->block_size <= 0) {
      add("block_size", "block_size must be positive; got " + std::to_string(g->block_size));
    }
  } else if (const auto* w = std::get_if<AwqOptions>(&a.options)) {
    if (w->grid <= 0) {
      add("grid_size", "grid_size must be positive; got " + std::to_string(w->grid));
    }
    if (w->clip_max_tokens <= 0) {
      add("clip_max_tokens",
          "clip_max_tokens must be positive; got " + std::to_string(w->clip_max_tokens));
    }
    if (a.Given("model_decoder_layers") && w->model_decoder_layers.empty()) {
      add("model_decoder_layers", "must name the decoder layers' module list (\"model.layers\")");
    }
    for (size_t i = 0; i < w->scaling_layers.size(); ++i) {
      const AwqScalingGroup& l = w->scaling_layers[i];
      const std::string at = "scaling_layers[" + std::to_string(i) + "]";
      if (l.prev_op.empty()) {
        add(at + ".prev_op", "names the norm or linear that absorbs the scale");
      }
      if (l.layers.empty()) add(at + ".layers", "names the group's linears; it is empty");
      if (!l.inp.empty() &&
          std::find(l.layers.begin(), l.layers.end(), l.inp) == l.layers.end()) {
        add(at + ".inp", "'" + l.inp + "' is not one of the entry's layers");
      }
    }
  } else if (const auto* s = std::get_if<SmoothQuantOptions>(&a.options)) {
    if (!in_range(s->alpha, 0, 1)) {
      add("alpha", "alpha must be in [0, 1]; got " + FormatDouble(s->alpha));
    }
    if (s->alpha_overrides.size() > kMaxNamePatterns) {
      add("layer_alpha", "has " + std::to_string(s->alpha_overrides.size()) + " globs; at most " +
                             std::to_string(kMaxNamePatterns));
    }
    for (const auto& [glob, alpha] : s->alpha_overrides) {
      if (glob.empty()) add("layer_alpha", "a layer_alpha glob is empty");
      if (Status bad = CheckGlob(glob); !bad.ok()) add("layer_alpha", bad.message());
      if (!in_range(alpha, 0, 1)) {
        add("layer_alpha",
            "alpha for '" + glob + "' must be in [0, 1]; got " + FormatDouble(alpha));
      }
    }
  } else if (const auto* as = std::get_if<AutoSmoothQuantOptions>(&a.options)) {
    if (!(in_range(as->alpha_step, 0, 1) && as->alpha_step > 0)) {
      add("alpha_step", "alpha_step must be in (0, 1]; got " + FormatDouble(as->alpha_step));
    }
  }
}

// The spec path of a resolved layer's config (for violations).
std::string OriginPath(const QuantConfig& c, const ResolvedLayer& r, const Paths& paths) {
  switch (r.origin) {
    case ResolvedLayer::Origin::kLayerName:
      return paths.Named("layer_quant_config", r.origin_index,
                         c.layer_quant_config[r.origin_index].pattern);
    case ResolvedLayer::Origin::kLayerType:
      return paths.LayerType(r.origin_index, c.layer_type_quant_config[r.origin_index].layer_type);
    default:
      return paths.Global();
  }
}

// The size of the weight axis `axis` of a layer, or -1 when unknown.
int64_t WeightAxisSize(const LayerInfo& l, int axis) {
  const bool conv = l.type == "Conv2d" || l.type == "ConvTranspose2d";
  const int rank = conv ? 4 : 2;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return -2;  // out of range
  if (axis == 0) return l.out_features;
  if (axis == 1) return l.in_features;
  return -1;  // a kernel dimension the layer list does not carry
}

}  // namespace

bool LayerQuantConfig::operator==(const LayerQuantConfig& o) const {
  return SpecsEqual(input_tensors, o.input_tensors) &&
         SpecsEqual(output_tensors, o.output_tensors) && SpecsEqual(weight, o.weight) &&
         SpecsEqual(bias, o.bias);
}

bool QuantConfig::operator==(const QuantConfig& o) const {
  return global_quant_config == o.global_quant_config &&
         layer_type_quant_config == o.layer_type_quant_config &&
         layer_quant_config == o.layer_quant_config &&
         kv_cache_quant_config == o.kv_cache_quant_config && exclude == o.exclude &&
         algorithms == o.algorithms && min_kv_scale == o.min_kv_scale;
}

const std::vector<std::string>& KnownLayerTypes() {
  static const std::vector<std::string> kTypes = {"Linear", "Embedding", "EmbeddingBag", "Conv2d",
                                                  "ConvTranspose2d"};
  return kTypes;
}

bool GlobMatch(std::string_view pattern, std::string_view name) {
  return quantd::GlobMatch(pattern, name);
}

bool ExcludeMatch(std::string_view pattern, std::string_view name) {
  if (pattern.substr(0, 3) == "re:") {
    // A regular expression anchored at the start of the name (Python's
    // re.match), as vLLM applies Quark's "re:" exclude entries; on RE2, so
    // linear in the name. An invalid one matches nothing (CollectViolations
    // reports it).
    return RegexMatchesPrefix(pattern.substr(3), name);
  }
  return GlobMatch(pattern, name) || GlobMatch(std::string(pattern) + ".*", name);
}

Status CheckExcludePattern(std::string_view entry) {
  if (entry.substr(0, 3) == "re:") return CheckRegex(entry.substr(3));
  return CheckGlob(entry);
}

ResolvedLayer ResolveLayer(const QuantConfig& config, const std::string& name,
                           const std::string& type) {
  ResolvedLayer r;
  for (size_t i = 0; i < config.exclude.size(); ++i) {
    if (ExcludeMatch(config.exclude[i], name)) {
      r.origin = ResolvedLayer::Origin::kExcluded;
      r.origin_index = static_cast<int>(i);
      r.source = "exclude[" + config.exclude[i] + "]";
      return r;
    }
  }
  const auto& known = KnownLayerTypes();
  if (std::find(known.begin(), known.end(), type) == known.end()) {
    r.source = "layers of type '" + type + "' are not quantized";
    return r;
  }
  for (size_t i = 0; i < config.layer_quant_config.size(); ++i) {
    if (GlobMatch(config.layer_quant_config[i].pattern, name)) {
      r.origin = ResolvedLayer::Origin::kLayerName;
      r.origin_index = static_cast<int>(i);
      r.config = config.layer_quant_config[i].config;
      r.source = "layer_quant_config[" + config.layer_quant_config[i].pattern + "]";
      break;
    }
  }
  if (r.origin == ResolvedLayer::Origin::kNotQuantized) {
    if (IsLmHead(name)) {
      r.source = "lm_head is left in float unless a layer_quant_config glob names it";
      return r;
    }
    if (IsExpertRouter(name)) {
      r.source =
          "mixture-of-experts routers are left in float unless a layer_quant_config glob names "
          "them";
      return r;
    }
    for (size_t i = 0; i < config.layer_type_quant_config.size(); ++i) {
      if (config.layer_type_quant_config[i].layer_type == type) {
        r.origin = ResolvedLayer::Origin::kLayerType;
        r.origin_index = static_cast<int>(i);
        r.config = config.layer_type_quant_config[i].config;
        r.source = "layer_type_quant_config[" + type + "]";
        break;
      }
    }
  }
  if (r.origin == ResolvedLayer::Origin::kNotQuantized) {
    if (IsEmbeddingType(type)) {
      r.source = "embeddings are quantized only when a layer or type config names them";
      return r;
    }
    r.origin = ResolvedLayer::Origin::kGlobal;
    r.config = config.global_quant_config;
    r.source = "global_quant_config";
  }
  for (size_t i = 0; i < config.kv_cache_quant_config.size(); ++i) {
    if (GlobMatch(config.kv_cache_quant_config[i].pattern, name)) {
      r.kv_cache_index = static_cast<int>(i);
      r.config.output_tensors = config.kv_cache_quant_config[i].config.output_tensors;
      break;
    }
  }
  r.quantized = !r.config.empty();
  return r;
}

void CollectViolations(const QuantConfig& config, PathStyle style, const std::string& prefix,
                       std::vector<FieldViolation>* out) {
  const Paths paths{style, prefix};
  ValidateLayerConfig(config.global_quant_config, paths.Global(), paths, out);
  const auto& known = KnownLayerTypes();
  std::set<std::string> seen_types;
  for (size_t i = 0; i < config.layer_type_quant_config.size(); ++i) {
    const TypedLayerQuantConfig& t = config.layer_type_quant_config[i];
    if (std::find(known.begin(), known.end(), t.layer_type) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      out->push_back({paths.LayerTypeName(i, t.layer_type),
                      "unknown layer type '" + t.layer_type + "'; known types: " + list});
    } else if (!seen_types.insert(t.layer_type).second) {
      out->push_back({paths.LayerTypeName(i, t.layer_type),
                      "layer type '" + t.layer_type + "' is configured twice"});
    }
    ValidateLayerConfig(t.config, paths.LayerType(i, t.layer_type), paths, out);
  }
  for (size_t i = 0; i < config.layer_quant_config.size(); ++i) {
    const NamedLayerQuantConfig& n = config.layer_quant_config[i];
    if (n.pattern.empty()) {
      out->push_back({paths.NamedPattern("layer_quant_config", i, n.pattern),
                      "a layer name glob must not be empty"});
    } else if (Status s = CheckGlob(n.pattern); !s.ok()) {
      out->push_back({paths.NamedPattern("layer_quant_config", i, n.pattern), s.message()});
    }
    ValidateLayerConfig(n.config, paths.Named("layer_quant_config", i, n.pattern), paths, out);
  }
  for (size_t i = 0; i < config.kv_cache_quant_config.size(); ++i) {
    const NamedLayerQuantConfig& n = config.kv_cache_quant_config[i];
    const std::string path = paths.Named("kv_cache_quant_config", i, n.pattern);
    if (n.pattern.empty()) {
      out->push_back({paths.NamedPattern("kv_cache_quant_config", i, n.pattern),
                      "a kv-cache layer glob must not be empty (e.g. \"*k_proj\")"});
    } else if (Status s = CheckGlob(n.pattern); !s.ok()) {
      out->push_back({paths.NamedPattern("kv_cache_quant_config", i, n.pattern), s.message()});
    }
    if (!n.config.output_tensors) {
      out->push_back(
          {path + ".output_tensors",
           "a kv_cache_quant_config entry quantizes the layer's output_tensors; set them "
           "(e.g. fp8_e4m3 per_tensor)"});
    }
    ValidateLayerConfig(n.config, path, paths, out);
  }
  for (size_t i = 0; i < config.exclude.size(); ++i) {
    const std::string& e = config.exclude[i];
    if (e.empty() || e == "re:") {
      out->push_back({paths.Exclude(i), "an exclude glob must not be empty"});
    } else if (Status s = CheckExcludePattern(e); !s.ok()) {
      out->push_back({paths.Exclude(i), s.message()});
    }
  }
  // Resolution matches every layer against every pattern: keep the product
  // bounded.
  const size_t patterns = config.exclude.size() + config.layer_quant_config.size() +
                          config.kv_cache_quant_config.size();
  if (patterns > kMaxNamePatterns) {
    const std::pair<const char*, size_t> lists[] = {
        {"exclude", config.exclude.size()},
        {"layer_quant_config", config.layer_quant_config.size()},
        {"kv_cache_quant_config", config.kv_cache_quant_config.size()}};
    const auto longest = std::max_element(
        std::begin(lists), std::end(lists),
        [](const auto& a, const auto& b) { return a.second < b.second; });
    out->push_back({prefix + longest->first,
                    "the config holds " + std::to_string(patterns) +
                        " layer name patterns (exclude " + std::to_string(lists[0].second) +
                        ", layer_quant_config " + std::to_string(lists[1].second) +
                        ", kv_cache_quant_config " + std::to_string(lists[2].second) +
                        "); at most " + std::to_string(kMaxNamePatterns)});
  }
  std::set<AlgorithmKind> seen_algos;
  for (size_t i = 0; i < config.algorithms.size(); ++i) {
    const AlgorithmConfig& a = config.algorithms[i];
    const std::string path = paths.Algorithm(i, a.kind());
    if (!seen_algos.insert(a.kind()).second) {
      out->push_back({path, std::string(AlgorithmKindName(a.kind())) + " is listed twice"});
    }
    ValidateAlgorithm(a, path, out);
  }
  if (!(config.min_kv_scale >= 0.0) || !std::isfinite(config.min_kv_scale)) {
    out->push_back({paths.MinKvScale(), "min_kv_scale must be a finite number >= 0; got " +
                                            FormatDouble(config.min_kv_scale)});
  }
}

Status ViolationsStatus(std::vector<FieldViolation> violations) {
  if (violations.empty()) return OkStatus();
  std::string message = std::to_string(violations.size()) +
                        (violations.size() == 1 ? " violation" : " violations") +
                        " in the quantization config; the first: " + violations[0].field + ": " +
                        violations[0].description;
  Status s = InvalidArgumentError(std::move(message)).WithReason("INVALID_QUANT_CONFIG");
  for (FieldViolation& v : violations) s.AddViolation(std::move(v.field), std::move(v.description));
  return s;
}

Status ValidateConfig(const QuantConfig& config, PathStyle style, const std::string& prefix) {
  std::vector<FieldViolation> v;
  CollectViolations(config, style, prefix, &v);
  return ViolationsStatus(std::move(v));
}

LayerCheck ValidateForLayers(const QuantConfig& config, const std::vector<LayerInfo>& layers,
                             PathStyle style, const std::string& prefix,
                             const Deadline& deadline) {
  LayerCheck check;
  std::vector<FieldViolation> violations;
  CollectViolations(config, style, prefix, &violations);
  const Paths paths{style, prefix};

  // Problems per (spec field path, description head), listing the layers.
  struct Group {
    std::string head;
    std::vector<std::string> layers;
  };
  std::map<std::string, Group> groups;
  std::vector<std::string> group_order;
  auto note = [&](const std::string& field, const std::string& key, const std::string& head,
                  const std::string& layer) {
    auto it = groups.find(field + "|" + key);
    if (it == groups.end()) {
      group_order.push_back(field + "|" + key);
      it = groups.emplace(field + "|" + key, Group{head, {}}).first;
    }
    it->second.layers.push_back(layer);
  };

  for (const LayerInfo& l : layers) {
    if (deadline.Expired()) {
      check.out_of_time = true;
      break;
    }
    const ResolvedLayer r = ResolveLayer(config, l.name, l.type);
    if (!r.quantized) continue;
    const std::string base = OriginPath(config, r, paths);
    const std::string desc = l.name + " (" + l.type + " " + std::to_string(l.out_features) + "x" +
                             std::to_string(l.in_features) + ")";
    if (r.config.weight) {
      const QuantSpec& w = *r.config.weight;
      const int axis = EffectiveChAxis(w);
      const int64_t size = WeightAxisSize(l, axis);
      if (size == -2 && !quant::IsCastType(w.dtype) &&
          (w.qscheme != QScheme::kPerTensor || IsMxType(w.dtype))) {
        note(base + ".weight.ch_axis", "axis" + std::to_string(axis),
             "ch_axis " + std::to_string(axis) + " is out of range for the weight of", desc);
      } else if (size >= 0 && w.qscheme == QScheme::kPerGroup && !IsMxType(w.dtype) &&
                 w.group_size && *w.group_size > 0 && size % *w.group_size != 0) {
        note(base + ".weight.group_size",
             std::to_string(*w.group_size) + "/" + std::to_string(size),
             "group_size " + std::to_string(*w.group_size) + " does not divide the width " +
                 std::to_string(size) + " (axis " + std::to_string(axis) + ") of",
             desc);
      }
    }
    if (r.config.input_tensors) {
      const QuantSpec& a = *r.config.input_tensors;
      if (a.qscheme == QScheme::kPerGroup && !IsMxType(a.dtype) && a.group_size &&
          *a.group_size > 0 && l.in_features > 0 && l.in_features % *a.group_size != 0) {
        note(base + ".input_tensors.group_size",
             std::to_string(*a.group_size) + "/" + std::to_string(l.in_features),
             "group_size " + std::to_string(*a.group_size) + " does not divide the input width " +
                 std::to_string(l.in_features) + " of",
             desc);
      }
    }
  }
  for (const std::string& key : group_order) {
    const Group& g = groups[key];
    std::string names;
    const size_t shown = std::min<size_t>(g.layers.size(), 3);
    for (size_t i = 0; i < shown; ++i) names += (i ? ", " : "") + g.layers[i];
    if (g.layers.size() > shown)
      names += " and " + std::to_string(g.layers.size() - shown) + " more";
    const std::string field = key.substr(0, key.find('|'));
    violations.push_back(
        {field,
         g.head +
             (g.layers.size() > 1 ? " " + std::to_string(g.layers.size()) + " layers: " : " ") +
             names});
  }

  // True also once out of time, so that no warning is made up.
  auto matches_any = [&](const std::string& pattern, bool exclude) {
    for (const LayerInfo& l : layers) {
      if (check.out_of_time || deadline.Expired()) {
        check.out_of_time = true;
        return true;
      }
      if (exclude ? ExcludeMatch(pattern, l.name) : GlobMatch(pattern, l.name)) return true;
    }
    return false;
  };
  for (const NamedLayerQuantConfig& n : config.layer_quant_config) {
    if (!n.pattern.empty() && !matches_any(n.pattern, false)) {
      check.warnings.push_back("layer_quant_config glob '" + n.pattern + "' matches no layer");
    }
  }
  for (const NamedLayerQuantConfig& n : config.kv_cache_quant_config) {
    if (!n.pattern.empty() && !matches_any(n.pattern, false)) {
      check.warnings.push_back("kv_cache_quant_config glob '" + n.pattern + "' matches no layer");
    }
  }
  for (const std::string& e : config.exclude) {
    if (!e.empty() && !matches_any(e, true)) {
      check.warnings.push_back("exclude glob '" + e + "' matches no layer");
    }
  }
  check.status = ViolationsStatus(std::move(violations));
  return check;
}

std::string DescribeConfig(const QuantConfig& config) {
  auto layer = [](const LayerQuantConfig& c) {
    std::string out;
    const std::pair<const char*, const std::optional<QuantSpec>*> parts[] = {
        {"weight", &c.weight},
        {"input", &c.input_tensors},
        {"output", &c.output_tensors},
        {"bias", &c.bias}};
    for (const auto& [name, spec] : parts) {
      if (!spec->has_value()) continue;
      out += (out.empty() ? "" : "; ") + std::string(name) + " " + DescribeSpec(**spec);
    }
    return out.empty() ? std::string("not quantized") : out;
  };
  std::string out = "global: " + layer(config.global_quant_config) + "\n";
  for (const auto& t : config.layer_type_quant_config) {
    out += "type " + t.layer_type + ": " + layer(t.config) + "\n";
  }
  for (const auto& n : config.layer_quant_config) {
    out += "layers " + n.pattern + ": " + layer(n.config) + "\n";
  }
  for (const auto& n : config.kv_cache_quant_config) {
    out += "kv cache " + n.pattern + ": " +
           (n.config.output_tensors ? DescribeSpec(*n.config.output_tensors) : "-") + "\n";
  }
  if (!config.exclude.empty()) {
    out += "exclude:";
    for (const std::string& e : config.exclude) out += " " + e;
    out += "\n";
  }
  if (!config.algorithms.empty()) {
    out += "algorithms:";
    for (const auto& a : config.algorithms) out += " " + std::string(AlgorithmKindName(a.kind()));
    out += "\n";
  }
  return out;
}

}  // namespace quantd::config
