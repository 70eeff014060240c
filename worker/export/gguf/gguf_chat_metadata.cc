#include "worker/export/gguf/gguf_chat_metadata.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "worker/common/bounded_json.h"
#include "worker/io/gguf/gguf_model_dir.h"
#include "worker/io/tokenizer/bpe_tokenizer.h"
#include "worker/io/tokenizer/spm_bpe_tokenizer.h"

namespace quantd::exporter {

namespace fs = std::filesystem;
using gguf::GgufValue;
using nlohmann::json;

namespace {

constexpr size_t kMaxTemplateBytes = gguf::kMaxChatTemplateBytes;

Status Bad(const std::string& file, const std::string& why) {
  return InvalidArgumentError(file + ": " + why);
}

// A template name as a metadata key suffix: letters, digits, '_' and '-'.
bool PlainName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

int32_t TokenId(const io::Tokenizer& tokenizer, const std::string& token) {
  const std::vector<std::string>* vocab = nullptr;
  if (const auto* spm = dynamic_cast<const io::SpmBpeTokenizer*>(&tokenizer))
    vocab = &spm->vocab().pieces;
  if (const auto* bpe = dynamic_cast<const io::BpeTokenizer*>(&tokenizer))
    vocab = &bpe->vocab().tokens;
  if (vocab == nullptr) return -1;
  for (size_t i = 0; i < vocab->size(); ++i)
    if ((*vocab)[i] == token) return static_cast<int32_t>(i);
  return -1;
}

Status AddTemplates(const json& value, const std::string& file, GgufChatMetadata* out) {
  if (value.is_string()) {
    if (value.get_ref<const std::string&>().size() > kMaxTemplateBytes)
      return Bad(file, "chat_template is over 1 MiB");
    out->kv.emplace_back("tokenizer.chat_template", GgufValue::String(value.get<std::string>()));
    return OkStatus();
  }
  if (!value.is_array()) return Bad(file, "chat_template is neither a string nor a list");
  for (const json& t : value) {
    if (!t.is_object() || !t.value("name", json()).is_string() ||
        !t.value("template", json()).is_string())
      return Bad(file, "chat_template list entries must be {\"name\", \"template\"} strings");
    const std::string name = t["name"], text = t["template"];
    if (text.size() > kMaxTemplateBytes)
      return Bad(file, "chat_template " + name + " is over 1 MiB");
    if (name == "default") {
      out->kv.emplace_back("tokenizer.chat_template", GgufValue::String(text));
    } else if (PlainName(name)) {
      out->kv.emplace_back("tokenizer.chat_template." + name, GgufValue::String(text));
    } else {
      return Bad(file, "chat_template name '" + name + "' is not a plain name");
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<GgufChatMetadata> HfChatMetadata(const std::string& model_dir,
                                          const io::Tokenizer& tokenizer) {
  GgufChatMetadata out;
  json config = json::object();
  const std::string config_path = (fs::path(model_dir) / "tokenizer_config.json").string();
  if (fs::is_regular_file(config_path)) {
    // The tokenizer loader's limit for the same file (special_tokens.h).
    std::ifstream in(config_path, std::ios::binary);
    const std::string text = ReadAtMost(in, json_limits::kTokenizerConfig);
    if (in.bad()) return Bad(config_path, "read failed");
    QD_ASSIGN_OR_RETURN(config, ParseBoundedJson(text, JsonBounds{json_limits::kTokenizerConfig},
                                                 config_path, StatusCode::kInvalidArgument));
    if (!config.is_object()) return Bad(config_path, "not a JSON object");
  }
  // chat_template.jinja (newer Transformers) wins over the config's entry.
  const std::string jinja = (fs::path(model_dir) / "chat_template.jinja").string();
  if (fs::is_regular_file(jinja)) {
    std::ifstream in(jinja, std::ios::binary);
    std::string text = ReadAtMost(in, kMaxTemplateBytes);
    if (in.bad()) return Bad(jinja, "read failed");
    if (text.size() > kMaxTemplateBytes) return Bad(jinja, "over 1 MiB");
    out.kv.emplace_back("tokenizer.chat_template", GgufValue::String(std::move(text)));
  } else if (config.contains("chat_template") && !config["chat_template"].is_null()) {
    QD_RETURN_IF_ERROR(AddTemplates(config["chat_template"], config_path, &out));
  }
  json pad = config.value("pad_token", json());
  if (pad.is_object()) pad = pad.value("content", json());
  if (pad.is_string()) {
    const int32_t id = TokenId(tokenizer, pad.get<std::string>());
    if (id >= 0) {
      out.kv.emplace_back("tokenizer.ggml.padding_token_id",
                          GgufValue::Uint32(static_cast<uint32_t>(id)));
    } else {
      out.notes.push_back("gguf: the pad token of " + config_path +
                          " is not in the vocabulary; tokenizer.ggml.padding_token_id is not set");
    }
  }
  return out;
}

}  // namespace quantd::exporter
