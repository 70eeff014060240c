#include "worker/io/tokenizer/special_tokens.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "worker/common/bounded_json.h"

namespace quantd::io {
namespace {

using nlohmann::json;

// Reads a small file, at most `max_bytes` + 1 of it (the parser refuses a
// longer one); nullopt when it does not exist.
StatusOr<std::optional<std::string>> ReadOptionalFile(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::optional<std::string>();
  std::string text = ReadAtMost(in, max_bytes);
  if (in.bad()) return DataLossError("reading " + path + " failed");
  return std::optional<std::string>(std::move(text));
}

StatusOr<json> ParseJson(const std::string& text, const std::string& where, size_t max_bytes) {
  QD_ASSIGN_OR_RETURN(json j, ParseBoundedJson(text, JsonBounds{max_bytes}, where));
  if (!j.is_object()) return InvalidArgumentError(where + " is not a JSON object");
  return j;
}

// A special token in tokenizer_config.json is either a string or an
// AddedToken object {"content": "<s>", ...}; null means "none".
Status ReadTokenText(const json& j, const char* key, const std::string& where,
                     std::optional<std::string>* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return OkStatus();
  if (it->is_string()) {
    *out = it->get<std::string>();
    return OkStatus();
  }
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) {
      *out = content->get<std::string>();
      return OkStatus();
    }
  }
  return InvalidArgumentError(where + ": " + key +
                              " must be a string or an object with a string \"content\"");
}

Status ReadBool(const json& j, const char* key, const std::string& where,
                std::optional<bool>* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return OkStatus();
  if (!it->is_boolean()) return InvalidArgumentError(where + ": " + key + " must be a boolean");
  *out = it->get<bool>();
  return OkStatus();
}

// config.json ids are an integer, null, or (Llama 3.1 eos) a list of integers.
Status ReadTokenId(const json& j, const char* key, const std::string& where,
                   std::optional<int32_t>* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return OkStatus();
  const json* v = &*it;
  if (v->is_array()) {
    if (v->empty()) return OkStatus();
    v = &(*v)[0];
  }
  if (!v->is_number_integer()) {
    return InvalidArgumentError(where + ": " + key + " must be an integer or a list of integers");
  }
  int64_t id = v->get<int64_t>();
  if (id < 0 || id > INT32_MAX) {
    return InvalidArgumentError(where + ": " + key + " " + std::to_string(id) + " is out of range");
  }
  *out = static_cast<int32_t>(id);
  return OkStatus();
}

}  // namespace

StatusOr<SpecialTokenConfig> ParseSpecialTokenConfig(
    const std::optional<std::string>& tokenizer_config_json,
    const std::optional<std::string>& config_json, const std::string& source) {
  SpecialTokenConfig cfg;
  if (tokenizer_config_json) {
    const std::string where = source + "/tokenizer_config.json";
    QD_ASSIGN_OR_RETURN(json j,
                        ParseJson(*tokenizer_config_json, where, json_limits::kTokenizerConfig));
    QD_RETURN_IF_ERROR(ReadBool(j, "add_bos_token", where, &cfg.add_bos));
    QD_RETURN_IF_ERROR(ReadBool(j, "add_eos_token", where, &cfg.add_eos));
    QD_RETURN_IF_ERROR(ReadTokenText(j, "bos_token", where, &cfg.bos_token));
    QD_RETURN_IF_ERROR(ReadTokenText(j, "eos_token", where, &cfg.eos_token));
  }
  if (config_json) {
    const std::string where = source + "/config.json";
    QD_ASSIGN_OR_RETURN(json j, ParseJson(*config_json, where, json_limits::kModelConfig));
    QD_RETURN_IF_ERROR(ReadTokenId(j, "bos_token_id", where, &cfg.bos_token_id));
    QD_RETURN_IF_ERROR(ReadTokenId(j, "eos_token_id", where, &cfg.eos_token_id));
  }
  return cfg;
}

StatusOr<SpecialTokenConfig> ReadSpecialTokenConfig(const std::string& dir) {
  QD_ASSIGN_OR_RETURN(auto tok_cfg, ReadOptionalFile(dir + "/tokenizer_config.json",
                                                     json_limits::kTokenizerConfig));
  QD_ASSIGN_OR_RETURN(auto cfg, ReadOptionalFile(dir + "/config.json", json_limits::kModelConfig));
  return ParseSpecialTokenConfig(tok_cfg, cfg, dir);
}

}  // namespace quantd::io
