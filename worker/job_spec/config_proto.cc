#include "worker/job_spec/config_proto.h"

#include <map>
#include <utility>

#include "worker/common/name_pattern.h"
#include "worker/config/presets.h"
#include "worker/config/quark_json.h"

namespace quantd::config {
namespace {

namespace pb = quantd::v1;
using quant::DataType;
using quant::MxScaleMode;
using quant::ObserverType;
using quant::QScheme;
using quant::RoundMethod;
using quant::ScaleType;
using quant::ZeroPointType;

// One table per enum: engine value <-> proto value.
const std::pair<DataType, pb::DataType> kDataTypes[] = {
    {DataType::kInt2, pb::INT2},
    {DataType::kInt3, pb::INT3},
    {DataType::kInt4, pb::INT4},
    {DataType::kInt8, pb::INT8},
    {DataType::kUInt2, pb::UINT2},
    {DataType::kUInt3, pb::UINT3},
    {DataType::kUInt4, pb::UINT4},
    {DataType::kUInt8, pb::UINT8},
    {DataType::kFp8E4M3, pb::FP8_E4M3},
    {DataType::kFp8E5M2, pb::FP8_E5M2},
    {DataType::kMxFp8E4M3, pb::MXFP8_E4M3},
    {DataType::kMxFp8E5M2, pb::MXFP8_E5M2},
    {DataType::kMxFp6E3M2, pb::MXFP6_E3M2},
    {DataType::kMxFp6E2M3, pb::MXFP6_E2M3},
    {DataType::kMxFp4, pb::MXFP4},
    {DataType::kMxInt8, pb::MXINT8},
    {DataType::kFloat16, pb::FP16},
    {DataType::kBFloat16, pb::BF16},
};
const std::pair<QScheme, pb::QScheme> kQSchemes[] = {
    {QScheme::kPerTensor, pb::PER_TENSOR},
    {QScheme::kPerChannel, pb::PER_CHANNEL},
    {QScheme::kPerGroup, pb::PER_GROUP},
};
const std::pair<RoundMethod, pb::RoundMethod> kRoundMethods[] = {
    {RoundMethod::kHalfEven, pb::HALF_EVEN},
    {RoundMethod::kRound, pb::ROUND},
    {RoundMethod::kFloor, pb::FLOOR},
};
// The reference's default "float" (the input's own float type) is the
// proto's unspecified value.
const std::pair<ScaleType, pb::ScaleType> kScaleTypes[] = {
    {ScaleType::kFloat, pb::SCALE_TYPE_UNSPECIFIED},
    {ScaleType::kFloat32, pb::FLOAT32},
    {ScaleType::kFloat16, pb::FLOAT16},
    {ScaleType::kBFloat16, pb::BFLOAT16},
    {ScaleType::kPowerOf2, pb::POWER_OF_2},
};
const std::pair<ObserverType, pb::ObserverType> kObservers[] = {
    {ObserverType::kMinMax, pb::MIN_MAX},
    {ObserverType::kPercentile, pb::PERCENTILE},
    {ObserverType::kMse, pb::MSE},
};
const std::pair<MxScaleMode, pb::MxScaleMode> kMxScaleModes[] = {
    {MxScaleMode::kEven, pb::MX_SCALE_EVEN},
    {MxScaleMode::kFloor, pb::MX_SCALE_FLOOR},
    {MxScaleMode::kCeil, pb::MX_SCALE_CEIL},
};
const std::pair<ZeroPointType, pb::ZeroPointType> kZeroPointTypes[] = {
    {ZeroPointType::kInt32, pb::ZP_INT32},
    {ZeroPointType::kFloat32, pb::ZP_FLOAT32},
};

template <typename E, typename P, size_t N>
P ToP(const std::pair<E, P> (&table)[N], E e) {
  for (const auto& [engine, proto] : table) {
    if (engine == e) return proto;
  }
  return table[0].second;
}

// The engine value of proto value `p`; nullopt for a value the table does
// not hold (unspecified, or a newer client's value).
template <typename E, typename P, size_t N>
std::optional<E> FromP(const std::pair<E, P> (&table)[N], int p) {
  for (const auto& [engine, proto] : table) {
    if (static_cast<int>(proto) == p) return engine;
  }
  return std::nullopt;
}

pb::LayerQuantConfig LayerToProto(const LayerQuantConfig& c) {
  pb::LayerQuantConfig out;
  if (c.input_tensors) *out.mutable_input_tensors() = SpecToProto(*c.input_tensors);
  if (c.output_tensors) *out.mutable_output_tensors() = SpecToProto(*c.output_tensors);
  if (c.weight) *out.mutable_weight() = SpecToProto(*c.weight);
  if (c.bias) *out.mutable_bias() = SpecToProto(*c.bias);
  return out;
}

// The options a source may leave unset are set only when it set them
// (AlgorithmConfig::given).
pb::AlgorithmConfig AlgorithmToProto(const AlgorithmConfig& a) {
  pb::AlgorithmConfig out;
  if (const auto* g = std::get_if<GptqOptions>(&a.options)) {
    pb::GptqConfig* p = out.mutable_gptq();
    if (a.Given("damp_percent")) p->set_damp_percent(g->damp_percent);
    if (a.Given("block_size")) p->set_block_size(static_cast<int32_t>(g->block_size));
    p->set_act_order(g->act_order);
    p->set_static_groups(g->static_groups);
  } else if (const auto* w = std::get_if<AwqOptions>(&a.options)) {
    pb::AwqConfig* p = out.mutable_awq();
    if (a.Given("grid_size")) p->set_grid_size(w->grid);
    p->set_skip_clip_search(!w->clip);
    if (a.Given("clip_max_tokens")) {
      p->set_clip_max_tokens(static_cast<int32_t>(w->clip_max_tokens));
    }
  } else if (const auto* s = std::get_if<SmoothQuantOptions>(&a.options)) {
    pb::SmoothQuantConfig* p = out.mutable_smooth_quant();
    if (a.Given("alpha")) p->set_alpha(s->alpha);
    for (const auto& [glob, alpha] : s->alpha_overrides) (*p->mutable_layer_alpha())[glob] = alpha;
  } else if (const auto* as = std::get_if<AutoSmoothQuantOptions>(&a.options)) {
    pb::AutoSmoothQuantConfig* p = out.mutable_auto_smooth_quant();
    if (a.Given("alpha_step")) p->set_alpha_step(as->alpha_step);
  } else if (const auto* r = std::get_if<RotationOptions>(&a.options)) {
    pb::RotationConfig* p = out.mutable_rotation();
    if (a.Given("seed")) p->set_seed(r->seed);
    p->set_online_hadamard(r->online_down_proj);
  }
  return out;
}

class ProtoReader {
 public:
  explicit ProtoReader(std::vector<FieldViolation>* out) : out_(out) {}

  void Add(std::string field, std::string what) {
    out_->push_back({std::move(field), std::move(what)});
  }

  template <typename E, typename P, size_t N>
  void Enum(const std::pair<E, P> (&table)[N], int value, int unspecified, const char* enum_name,
            const std::string& path, E* target) {
    if (value == unspecified) return;  // keep the default
    if (std::optional<E> e = FromP(table, value)) {
      *target = *e;
    } else {
      Add(path, "unknown " + std::string(enum_name) + " value " + std::to_string(value));
    }
  }

  std::optional<QuantSpec> Spec(const pb::QuantizationSpec& p, const std::string& path,
                                quant::TensorRole role) {
    const size_t before = out_->size();
    QuantSpec s;
    bool dtype_known = false;
    if (p.dtype() == pb::DATA_TYPE_UNSPECIFIED) {
      Add(path + ".dtype",
          "dtype is required (int2..int8, uint2..uint8, fp8_e4m3, fp8_e5m2, the "
          "MX formats, fp16 or bf16)");
    } else if (std::optional<DataType> t = FromP(kDataTypes, p.dtype())) {
      s.dtype = *t;
      dtype_known = true;
    } else {
      Add(path + ".dtype", "unknown dtype value " + std::to_string(p.dtype()));
    }
    bool qscheme_known = true;
    if (p.qscheme() == pb::QSCHEME_UNSPECIFIED) {
      // MX formats are block (per_group) formats whatever the caller says.
      if (quant::IsMxType(s.dtype)) s.qscheme = QScheme::kPerGroup;
    } else {
      const size_t n = out_->size();
      Enum(kQSchemes, p.qscheme(), pb::QSCHEME_UNSPECIFIED, "qscheme", path + ".qscheme",
           &s.qscheme);
      qscheme_known = out_->size() == n;
    }
    if (p.has_ch_axis()) s.ch_axis = p.ch_axis();
    if (p.has_group_size()) s.group_size = p.group_size();
    if (p.has_symmetric()) s.symmetric = p.symmetric();
    s.is_dynamic = p.is_dynamic();
    Enum(kRoundMethods, p.round_method(), pb::ROUND_METHOD_UNSPECIFIED, "round_method",
         path + ".round_method", &s.round_method);
    if (p.scale_type() != pb::SCALE_TYPE_UNSPECIFIED) {
      Enum(kScaleTypes, p.scale_type(), pb::SCALE_TYPE_UNSPECIFIED, "scale_type",
           path + ".scale_type", &s.scale_type);
    }
    Enum(kObservers, p.observer(), pb::OBSERVER_TYPE_UNSPECIFIED, "observer", path + ".observer",
         &s.observer);
    if (p.has_percentile()) s.percentile = p.percentile();
    Enum(kMxScaleModes, p.mx_scale_mode(), pb::MX_SCALE_MODE_UNSPECIFIED, "mx_scale_mode",
         path + ".mx_scale_mode", &s.mx_scale_mode);
    Enum(kZeroPointTypes, p.zero_point_type(), pb::ZERO_POINT_TYPE_UNSPECIFIED, "zero_point_type",
         path + ".zero_point_type", &s.zero_point_type);
    if (out_->size() == before) return s;  // validated with the config
    // Not usable; still name the rest of its mistakes, once per field.
    std::vector<FieldViolation> more;
    quant::ValidatePartialSpec(s, role, path, dtype_known, qscheme_known, &more);
    for (FieldViolation& f : more) {
      bool seen = false;
      for (size_t i = before; i < out_->size(); ++i) seen = seen || (*out_)[i].field == f.field;
      if (!seen) out_->push_back(std::move(f));
    }
    return std::nullopt;
  }

  LayerQuantConfig Layer(const pb::LayerQuantConfig& p, const std::string& path) {
    LayerQuantConfig c;
    using quant::TensorRole;
    if (p.has_input_tensors()) {
      c.input_tensors = Spec(p.input_tensors(), path + ".input_tensors", TensorRole::kInput);
    }
    if (p.has_output_tensors()) {
      c.output_tensors = Spec(p.output_tensors(), path + ".output_tensors", TensorRole::kOutput);
    }
    if (p.has_weight()) c.weight = Spec(p.weight(), path + ".weight", TensorRole::kWeight);
    if (p.has_bias()) c.bias = Spec(p.bias(), path + ".bias", TensorRole::kBias);
    return c;
  }

  // The proto's AlgorithmConfig oneof as typed options; a proto `optional`
  // field that is set is marked given.
  std::optional<AlgorithmConfig> Algorithm(const pb::AlgorithmConfig& p, const std::string& path) {
    AlgorithmConfig a;
    auto given = [&a](const char* field, bool has, auto value, auto* target) {
      if (!has) return;
      *target = value;
      a.given.insert(field);
    };
    switch (p.algorithm_case()) {
      case pb::AlgorithmConfig::kGptq: {
        const pb::GptqConfig& in = p.gptq();
        GptqOptions g;
        given("damp_percent", in.has_damp_percent(), in.damp_percent(), &g.damp_percent);
        given("block_size", in.has_block_size(), in.block_size(), &g.block_size);
        g.act_order = in.act_order();
        g.static_groups = in.static_groups();
        a.options = g;
        break;
      }
      case pb::AlgorithmConfig::kAwq: {
        const pb::AwqConfig& in = p.awq();
        AwqOptions w;
        given("grid_size", in.has_grid_size(), in.grid_size(), &w.grid);
        w.clip = !in.skip_clip_search();
        given("clip_max_tokens", in.has_clip_max_tokens(), in.clip_max_tokens(),
              &w.clip_max_tokens);
        a.options = w;
        break;
      }
      case pb::AlgorithmConfig::kSmoothQuant: {
        const pb::SmoothQuantConfig& in = p.smooth_quant();
        SmoothQuantOptions s;
        given("alpha", in.has_alpha(), in.alpha(), &s.alpha);
        // A proto map has no order; sort by glob so the config is stable.
        const std::map<std::string, double> sorted(in.layer_alpha().begin(),
                                                   in.layer_alpha().end());
        s.alpha_overrides.assign(sorted.begin(), sorted.end());
        a.options = std::move(s);
        break;
      }
      case pb::AlgorithmConfig::kAutoSmoothQuant: {
        const pb::AutoSmoothQuantConfig& in = p.auto_smooth_quant();
        AutoSmoothQuantOptions as;
        given("alpha_step", in.has_alpha_step(), in.alpha_step(), &as.alpha_step);
        a.options = as;
        break;
      }
      case pb::AlgorithmConfig::kRotation: {
        const pb::RotationConfig& in = p.rotation();
        RotationOptions r;
        given("seed", in.has_seed(), in.seed(), &r.seed);
        r.online_down_proj = in.online_hadamard();
        a.options = r;
        break;
      }
      case pb::AlgorithmConfig::ALGORITHM_NOT_SET:
        Add(path, "set one of gptq, awq, smooth_quant, auto_smooth_quant, rotation");
        return std::nullopt;
    }
    return a;
  }

  // The algorithms that could be read, each with its index in `list`.
  std::vector<std::pair<int, AlgorithmConfig>> Algorithms(
      const google::protobuf::RepeatedPtrField<pb::AlgorithmConfig>& list,
      const std::string& path) {
    std::vector<std::pair<int, AlgorithmConfig>> out;
    for (int i = 0; i < list.size(); ++i) {
      if (auto a = Algorithm(list[i], path + "[" + std::to_string(i) + "]")) out.push_back({i, *a});
    }
    return out;
  }

  // ValidateConfig's algorithm rules, with paths at each algorithm's own
  // index in the request (unreadable entries leave gaps).
  void ValidateAlgorithms(const std::vector<std::pair<int, AlgorithmConfig>>& algos,
                          const std::string& path) {
    std::vector<AlgorithmKind> seen;
    for (const auto& [i, a] : algos) {
      const std::string at = path + "[" + std::to_string(i) + "]";
      for (AlgorithmKind k : seen) {
        if (k == a.kind()) Add(at, std::string(AlgorithmKindName(a.kind())) + " is listed twice");
      }
      seen.push_back(a.kind());
      QuantConfig one;
      one.algorithms = {a};
      std::vector<FieldViolation> v;
      CollectViolations(one, PathStyle::kProto, "", &v);
      const std::string first = "algorithms[0]";
      for (FieldViolation& f : v) Add(at + f.field.substr(first.size()), std::move(f.description));
    }
  }

  QuantConfig Config(const pb::QuantConfig& p, const std::string& prefix) {
    QuantConfig c;
    c.global_quant_config = Layer(p.global_quant_config(), prefix + "global_quant_config");
    for (int i = 0; i < p.layer_type_quant_config_size(); ++i) {
      const auto& t = p.layer_type_quant_config(i);
      c.layer_type_quant_config.push_back(
          {t.layer_type(), Layer(t.config(), prefix + "layer_type_quant_config[" +
                                                 std::to_string(i) + "].config")});
    }
    for (int i = 0; i < p.layer_quant_config_size(); ++i) {
      const auto& n = p.layer_quant_config(i);
      c.layer_quant_config.push_back(
          {n.pattern(),
           Layer(n.config(), prefix + "layer_quant_config[" + std::to_string(i) + "].config")});
    }
    for (int i = 0; i < p.kv_cache_quant_config_size(); ++i) {
      const auto& n = p.kv_cache_quant_config(i);
      c.kv_cache_quant_config.push_back(
          {n.pattern(),
           Layer(n.config(), prefix + "kv_cache_quant_config[" + std::to_string(i) + "].config")});
    }
    c.exclude.assign(p.exclude().begin(), p.exclude().end());
    algorithms_ = Algorithms(p.algorithms(), prefix + "algorithms");
    for (const auto& [i, a] : algorithms_) c.algorithms.push_back(a);
    c.min_kv_scale = p.min_kv_scale();
    return c;
  }

  // The algorithms Config() read, with their indices.
  const std::vector<std::pair<int, AlgorithmConfig>>& algorithms() const { return algorithms_; }

 private:
  std::vector<FieldViolation>* out_;
  std::vector<std::pair<int, AlgorithmConfig>> algorithms_;
};

// Violations of `config` that a preset or quark_json source cannot blame on
// a config field: reported on the settings field that produced them.
std::string SettingsFieldFor(const std::string& field) {
  const size_t dot = field.rfind('.');
  const std::string leaf = dot == std::string::npos ? field : field.substr(dot + 1);
  return std::string(kSettingsPath) + (leaf == "group_size" ? ".group_size" : ".scheme");
}

}  // namespace

pb::QuantizationSpec SpecToProto(const QuantSpec& s) {
  pb::QuantizationSpec p;
  p.set_dtype(ToP(kDataTypes, s.dtype));
  p.set_qscheme(ToP(kQSchemes, s.qscheme));
  if (s.ch_axis) p.set_ch_axis(*s.ch_axis);
  if (s.group_size) p.set_group_size(*s.group_size);
  p.set_symmetric(s.symmetric);
  p.set_is_dynamic(s.is_dynamic);
  p.set_round_method(ToP(kRoundMethods, s.round_method));
  p.set_scale_type(ToP(kScaleTypes, s.scale_type));
  p.set_observer(ToP(kObservers, s.observer));
  if (s.percentile) p.set_percentile(*s.percentile);
  p.set_mx_scale_mode(ToP(kMxScaleModes, s.mx_scale_mode));
  p.set_zero_point_type(ToP(kZeroPointTypes, s.zero_point_type));
  return p;
}

pb::QuantConfig ToProto(const QuantConfig& c) {
  pb::QuantConfig p;
  *p.mutable_global_quant_config() = LayerToProto(c.global_quant_config);
  for (const auto& t : c.layer_type_quant_config) {
    pb::TypedLayerQuantConfig* out = p.add_layer_type_quant_config();
    out->set_layer_type(t.layer_type);
    *out->mutable_config() = LayerToProto(t.config);
  }
  for (const auto& n : c.layer_quant_config) {
    pb::NamedLayerQuantConfig* out = p.add_layer_quant_config();
    out->set_pattern(n.pattern);
    *out->mutable_config() = LayerToProto(n.config);
  }
  for (const auto& n : c.kv_cache_quant_config) {
    pb::NamedLayerQuantConfig* out = p.add_kv_cache_quant_config();
    out->set_pattern(n.pattern);
    *out->mutable_config() = LayerToProto(n.config);
  }
  for (const std::string& e : c.exclude) p.add_exclude(e);
  for (const auto& a : c.algorithms) *p.add_algorithms() = AlgorithmToProto(a);
  p.set_min_kv_scale(c.min_kv_scale);
  return p;
}

StatusOr<QuantSpec> SpecFromProto(const pb::QuantizationSpec& spec, const std::string& path) {
  std::vector<FieldViolation> v;
  ProtoReader reader(&v);
  std::optional<QuantSpec> s = reader.Spec(spec, path, quant::TensorRole::kWeight);
  if (s) quant::ValidateSpec(*s, quant::TensorRole::kWeight, path, &v);
  if (!v.empty()) return ViolationsStatus(std::move(v));
  return *s;
}

StatusOr<QuantConfig> FromProto(const pb::QuantConfig& config, const std::string& prefix) {
  std::vector<FieldViolation> v;
  ProtoReader reader(&v);
  QuantConfig c = reader.Config(config, prefix);
  QuantConfig without_algorithms = c;
  without_algorithms.algorithms.clear();
  CollectViolations(without_algorithms, PathStyle::kProto, prefix, &v);
  reader.ValidateAlgorithms(reader.algorithms(), prefix + "algorithms");
  if (!v.empty()) return ViolationsStatus(std::move(v));
  return c;
}

StatusOr<QuantConfig> ResolveQuantizationSettings(const pb::QuantizationSettings& s) {
  const std::string base = kSettingsPath;
  std::vector<FieldViolation> v;
  auto absorb = [&](const Status& status) {
    for (const FieldViolation& f : status.violations()) v.push_back(f);
    if (status.violations().empty() && !status.ok()) v.push_back({base, status.message()});
  };
  QuantConfig config;
  switch (s.source_case()) {
    case pb::QuantizationSettings::kScheme: {
      if (s.has_group_size() && s.group_size() <= 0 && s.group_size() != -1) {
        // Look the scheme up first, so an unknown name is reported too.
        auto preset = PresetConfig(s.scheme(), std::nullopt, base + ".scheme");
        if (!preset.ok()) absorb(preset.status());
        v.push_back({base + ".group_size",
                     "group_size must be positive (or -1 for the whole "
                     "input width); got " +
                         std::to_string(s.group_size())});
        break;
      }
      auto preset = PresetConfig(
          s.scheme(), s.has_group_size() ? std::optional<int>(s.group_size()) : std::nullopt,
          base + ".scheme", base + ".group_size");
      if (preset.ok()) {
        config = std::move(*preset);
        // A preset is valid by construction; what could fail is the group
        // size it was given, which ValidateConfig would blame on
        // global_quant_config.
        std::vector<FieldViolation> inner;
        CollectViolations(config, PathStyle::kProto, "", &inner);
        for (const FieldViolation& f : inner)
          v.push_back({SettingsFieldFor(f.field), f.description});
      } else {
        absorb(preset.status());
      }
      break;
    }
    case pb::QuantizationSettings::kConfig: {
      auto c = FromProto(s.config(), kConfigPath);
      if (c.ok()) {
        config = std::move(*c);
      } else {
        absorb(c.status());
      }
      break;
    }
    case pb::QuantizationSettings::kQuarkJson: {
      auto c = ParseQuarkJson(s.quark_json(), kQuarkJsonPath);
      if (c.ok()) {
        config = std::move(*c);
      } else {
        absorb(c.status());
      }
      break;
    }
    case pb::QuantizationSettings::SOURCE_NOT_SET:
      v.push_back({base,
                   "set one of scheme (a preset such as w_int4_per_group_sym), config or "
                   "quark_json (or leave quantization unset and name a llama.cpp recipe in "
                   "export.gguf_type)"});
      break;
  }
  if (s.source_case() != pb::QuantizationSettings::kScheme && s.has_group_size()) {
    v.push_back({base + ".group_size",
                 "group_size sizes the per-group presets; a config sets group_size in its specs"});
  }
  for (int i = 0; i < s.exclude_size(); ++i) {
    const std::string field = base + ".exclude[" + std::to_string(i) + "]";
    if (s.exclude(i).empty()) {
      v.push_back({field, "an exclude glob must not be empty"});
    } else if (Status bad = CheckExcludePattern(s.exclude(i)); !bad.ok()) {
      v.push_back({field, bad.message()});
    } else {
      config.exclude.push_back(s.exclude(i));
    }
  }
  if (s.exclude_size() > 0) {
    const size_t patterns = config.exclude.size() + config.layer_quant_config.size() +
                            config.kv_cache_quant_config.size();
    if (patterns > kMaxNamePatterns) {
      v.push_back({base + ".exclude",
                   "with the config's own, the settings hold " + std::to_string(patterns) +
                       " layer name patterns; at most " + std::to_string(kMaxNamePatterns)});
    }
  }
  if (s.algorithms_size() > 0) {
    ProtoReader reader(&v);
    const auto extra = reader.Algorithms(s.algorithms(), base + ".algorithms");
    reader.ValidateAlgorithms(extra, base + ".algorithms");
    for (const auto& [i, a] : extra) {
      for (const AlgorithmConfig& own : config.algorithms) {
        if (own.kind() == a.kind()) {
          reader.Add(base + ".algorithms[" + std::to_string(i) + "]",
                     std::string(AlgorithmKindName(a.kind())) +
                         " is already in the config's own algorithms; set it in one place");
        }
      }
    }
    for (const auto& [i, a] : extra) config.algorithms.push_back(a);
  }
  if (s.fp8_kv_cache()) AddFp8KvCache(config);
  if (!v.empty()) return ViolationsStatus(std::move(v));
  return config;
}

StatusOr<QuantConfig> ResolveRecipeAlgorithms(const pb::QuantizationSettings& s) {
  std::vector<FieldViolation> v;
  QuantConfig config;
  ProtoReader reader(&v);
  const std::string path = std::string(kSettingsPath) + ".algorithms";
  const auto algorithms = reader.Algorithms(s.algorithms(), path);
  reader.ValidateAlgorithms(algorithms, path);
  if (!v.empty()) return ViolationsStatus(std::move(v));
  for (const auto& [i, a] : algorithms) config.algorithms.push_back(a);
  return config;
}

bool HoldsOnlyRecipeSettings(const pb::QuantizationSettings& s) {
  return s.source_case() == pb::QuantizationSettings::SOURCE_NOT_SET && !s.has_group_size() &&
         s.exclude_size() == 0 && !s.fp8_kv_cache();
}

LayerCheck ValidateSettingsForLayers(const pb::QuantizationSettings& s, const QuantConfig& resolved,
                                     const std::vector<LayerInfo>& layers,
                                     const Deadline& deadline) {
  switch (s.source_case()) {
    case pb::QuantizationSettings::kConfig:
      return ValidateForLayers(resolved, layers, PathStyle::kProto, kConfigPath, deadline);
    case pb::QuantizationSettings::kQuarkJson:
      return ValidateForLayers(resolved, layers, PathStyle::kReferenceJson, kQuarkJsonPath,
                               deadline);
    default:
      break;
  }
  LayerCheck check = ValidateForLayers(resolved, layers, PathStyle::kProto, "", deadline);
  if (check.status.ok()) return check;
  std::vector<FieldViolation> v;
  for (const FieldViolation& f : check.status.violations()) {
    v.push_back({SettingsFieldFor(f.field), s.scheme() + ": " + f.description});
  }
  check.status = ViolationsStatus(std::move(v));
  return check;
}

std::string DescribeSettings(const pb::QuantizationSettings& s, const QuantConfig& resolved) {
  std::string out;
  if (s.source_case() == pb::QuantizationSettings::kScheme) {
    out = s.scheme();
    const auto& w = resolved.global_quant_config.weight;
    if (w && w->qscheme == QScheme::kPerGroup && !quant::IsMxType(w->dtype) && w->group_size) {
      out += " (group " + std::to_string(*w->group_size) + ")";
    }
  } else {
    out = s.source_case() == pb::QuantizationSettings::kConfig ? "config: " : "quark_json: ";
    std::string global = DescribeConfig(resolved);
    global = global.substr(0, global.find('\n'));
    out += global;
    const size_t globs =
        resolved.layer_quant_config.size() + resolved.layer_type_quant_config.size();
    if (globs > 0) out += " (+" + std::to_string(globs) + " layer configs)";
  }
  if (!resolved.kv_cache_quant_config.empty() &&
      resolved.kv_cache_quant_config[0].config.output_tensors) {
    out += ", kv cache " +
           quant::DescribeSpec(*resolved.kv_cache_quant_config[0].config.output_tensors);
  }
  if (!resolved.algorithms.empty()) {
    out += ", algorithms";
    for (const auto& a : resolved.algorithms) out += " " + std::string(AlgorithmKindName(a.kind()));
  }
  return out;
}

}  // namespace quantd::config
