#include "worker/io/tokenizer/tokenizer_json.h"

#include <nlohmann/json.hpp>
#include <unordered_map>

#include "worker/common/bounded_json.h"
#include "worker/io/tokenizer/bpe_tokenizer.h"
#include "worker/io/tokenizer/pretokenizer.h"
#include "worker/io/tokenizer/unicode_normalizer.h"

namespace quantd::io {
namespace {

using nlohmann::json;

struct PreTokenizerSpec {
  std::string pattern;
  bool add_prefix_space = false;
};

Status Unsupported(const std::string& source, const std::string& what) {
  return UnimplementedError(source + ": " + what +
                            " is not supported (supported: byte-level BPE with a ByteLevel or "
                            "Split+ByteLevel pre-tokenizer)");
}

std::string TypeOf(const json& j) {
  auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

StatusOr<PreTokenizerSpec> ReadPreTokenizer(const json& pre, const std::string& source) {
  if (pre.is_null() || !pre.is_object()) {
    return Unsupported(source, "a tokenizer.json without a pre_tokenizer");
  }
  const std::string type = TypeOf(pre);
  if (type == "ByteLevel") {
    PreTokenizerSpec spec;
    if (!pre.value("use_regex", true)) {
      return Unsupported(source, "a ByteLevel pre-tokenizer without its regex and no Split");
    }
    spec.pattern = kGpt2Pattern;
    spec.add_prefix_space = pre.value("add_prefix_space", false);
    return spec;
  }
  if (type != "Sequence") return Unsupported(source, "pre-tokenizer '" + type + "'");
  const json& items = pre.value("pretokenizers", json::array());
  if (items.size() != 2 || TypeOf(items[0]) != "Split" || TypeOf(items[1]) != "ByteLevel") {
    return Unsupported(source, "pre-tokenizer Sequence " + pre.dump().substr(0, 200));
  }
  const json& split = items[0];
  const json& byte_level = items[1];
  if (split.value("behavior", "") != "Isolated" || split.value("invert", false)) {
    return Unsupported(source, "Split behavior '" + split.value("behavior", "") + "'");
  }
  if (byte_level.value("use_regex", true)) {
    return Unsupported(source, "a Split followed by a ByteLevel that also splits by regex");
  }
  const json& pattern = split.value("pattern", json::object());
  PreTokenizerSpec spec;
  if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
    spec.pattern = pattern["Regex"].get<std::string>();
  } else {
    return Unsupported(source, "Split pattern " + pattern.dump().substr(0, 200));
  }
  spec.add_prefix_space = byte_level.value("add_prefix_space", false);
  return spec;
}

// BOS/EOS from a TemplateProcessing post-processor: a SpecialToken before
// the sequence adds BOS, one after it adds EOS.
void ReadTemplate(const json& post, const std::unordered_map<std::string, int32_t>& ids,
                  std::optional<int32_t>* bos, std::optional<int32_t>* eos) {
  if (!post.is_object()) return;
  const json* processor = &post;
  json found;
  if (TypeOf(post) == "Sequence") {
    for (const auto& p : post.value("processors", json::array())) {
      if (TypeOf(p) == "TemplateProcessing") found = p;
    }
    if (found.is_null()) return;
    processor = &found;
  }
  if (TypeOf(*processor) != "TemplateProcessing") return;
  const json& single = processor->value("single", json::array());
  bool seen_sequence = false;
  for (const auto& piece : single) {
    if (piece.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    if (!piece.contains("SpecialToken")) continue;
    const std::string name = piece["SpecialToken"].value("id", "");
    int32_t id = -1;
    const json& specials = processor->value("special_tokens", json::object());
    if (specials.contains(name) && !specials[name].value("ids", json::array()).empty()) {
      id = specials[name]["ids"][0].get<int32_t>();
    } else if (auto it = ids.find(name); it != ids.end()) {
      id = it->second;
    }
    if (id < 0) continue;
    if (!seen_sequence) {
      *bos = id;
    } else {
      *eos = id;
    }
  }
}

StatusOr<std::unique_ptr<Tokenizer>> Build(const json& root, const SpecialTokenConfig& special,
                                           const std::string& source) {
  if (!root.is_object()) return InvalidArgumentError(source + " is not a JSON object");
  const json& model = root.value("model", json::object());
  const std::string model_type = TypeOf(model);
  if (model_type != "BPE" && !(model_type.empty() && model.contains("merges"))) {
    return Unsupported(source, "tokenizer model '" + model_type + "'");
  }
  if (model.value("byte_fallback", false)) {
    return Unsupported(source,
                       "a BPE model with byte_fallback (SentencePiece-style; use "
                       "tokenizer.model)");
  }
  const json& vocab_json = model.value("vocab", json::object());
  if (!vocab_json.is_object() || vocab_json.empty()) {
    return InvalidArgumentError(source + ": model.vocab must be a non-empty object");
  }

  // Ids may leave holes (and added tokens may extend the range): size the
  // table by the largest id.
  std::unordered_map<std::string, int32_t> ids;
  int64_t max_id = -1;
  auto note = [&](const std::string& token, const json& id_json) -> Status {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 ||
        id_json.get<int64_t>() > (1 << 24)) {
      return InvalidArgumentError(source + ": token '" + token + "' has an invalid id " +
                                  id_json.dump());
    }
    const int32_t id = id_json.get<int32_t>();
    ids[token] = id;
    max_id = std::max<int64_t>(max_id, id);
    return OkStatus();
  };
  for (auto it = vocab_json.begin(); it != vocab_json.end(); ++it) {
    QD_RETURN_IF_ERROR(note(it.key(), it.value()));
  }
  BpeVocab vocab;
  const json& added = root.value("added_tokens", json::array());
  for (const auto& a : added) {
    if (!a.is_object() || !a.contains("content") || !a["content"].is_string()) {
      return InvalidArgumentError(source + ": added_tokens entries need a string \"content\"");
    }
    const std::string content = a["content"].get<std::string>();
    QD_RETURN_IF_ERROR(note(content, a.value("id", json())));
  }
  // Real vocabularies are dense; a sparse id far past the entry count would
  // only allocate memory for holes.
  const int64_t entries = static_cast<int64_t>(ids.size());
  if (max_id >= 4 * entries + 1024) {
    return InvalidArgumentError(source + ": token id " + std::to_string(max_id) +
                                " is far beyond the " + std::to_string(entries) +
                                " tokens of the vocabulary");
  }
  vocab.tokens.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [token, id] : ids) vocab.tokens[id] = token;
  for (const auto& a : added) {
    BpeAddedToken t;
    t.id = a["id"].get<int32_t>();
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    vocab.added_tokens.push_back(t);
    if (a.value("special", false)) vocab.control_tokens.push_back(t.id);
  }

  const json& merges = model.value("merges", json::array());
  if (!merges.is_array()) return InvalidArgumentError(source + ": model.merges must be an array");
  vocab.merges.reserve(merges.size());
  for (const auto& m : merges) {
    if (m.is_string()) {
      vocab.merges.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      vocab.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    } else {
      return InvalidArgumentError(source + ": merge " + m.dump().substr(0, 100) +
                                  " is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }

  BpeOptions o;
  QD_ASSIGN_OR_RETURN(PreTokenizerSpec pre,
                      ReadPreTokenizer(root.value("pre_tokenizer", json()), source));
  o.pretokenizer_pattern = pre.pattern;
  o.add_prefix_space = pre.add_prefix_space;
  o.ignore_merges = model.value("ignore_merges", false);
  const json& normalizer = root.value("normalizer", json());
  if (!normalizer.is_null()) {
    if (TypeOf(normalizer) != "NFC") {
      return Unsupported(source, "normalizer '" + TypeOf(normalizer) + "'");
    }
    o.normalizer = [](std::string_view text) { return NormalizeNfc(text); };
  }

  // Special tokens: the post-processor's template, then tokenizer_config.json
  // names, then config.json ids.
  std::optional<int32_t> bos, eos;
  ReadTemplate(root.value("post_processor", json()), ids, &bos, &eos);
  o.add_bos = bos.has_value();
  o.add_eos = eos.has_value();
  auto by_name = [&](const std::optional<std::string>& name) -> std::optional<int32_t> {
    if (!name) return std::nullopt;
    auto it = ids.find(*name);
    if (it == ids.end()) return std::nullopt;
    return it->second;
  };
  if (auto id = by_name(special.bos_token)) bos = id;
  if (!bos && special.bos_token_id) bos = special.bos_token_id;
  if (auto id = by_name(special.eos_token)) eos = id;
  if (!eos && special.eos_token_id) eos = special.eos_token_id;
  if (special.add_bos) o.add_bos = *special.add_bos && bos.has_value();
  if (special.add_eos) o.add_eos = *special.add_eos && eos.has_value();
  o.bos_id = bos.value_or(-1);
  o.eos_id = eos.value_or(-1);

  auto t = BpeTokenizer::Create(std::move(vocab), o);
  if (!t.ok()) return Status(t.status()).Prepend(source + ": ");
  return std::unique_ptr<Tokenizer>(std::move(t).value());
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> ParseTokenizerJson(const std::string& json_text,
                                                        const SpecialTokenConfig& special,
                                                        const std::string& source) {
  QD_ASSIGN_OR_RETURN(json root,
                      ParseBoundedJson(json_text, JsonBounds{json_limits::kTokenizerJson}, source));
  try {
    return Build(root, special, source);
  } catch (const json::exception& e) {
    // Wrong JSON types inside otherwise valid JSON.
    return InvalidArgumentError(source + ": " + e.what());
  }
}

}  // namespace quantd::io
