// Special-token settings of a Hugging Face model directory.
//
// tokenizer_config.json says whether BOS/EOS are added and names the special
// tokens by their text; config.json gives bos_token_id / eos_token_id. Every
// tokenizer loader (SentencePiece, tokenizer.json) reads them the same way, so
// a model directory behaves identically whatever its vocabulary format.
#ifndef QUANTD_WORKER_IO_TOKENIZER_SPECIAL_TOKENS_H_
#define QUANTD_WORKER_IO_TOKENIZER_SPECIAL_TOKENS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "worker/common/status.h"

namespace quantd::io {

// Each field is empty when no file of the directory sets it.
struct SpecialTokenConfig {
  std::optional<bool> add_bos;           // tokenizer_config.json add_bos_token
  std::optional<bool> add_eos;           // tokenizer_config.json add_eos_token
  std::optional<std::string> bos_token;  // tokenizer_config.json bos_token (text)
  std::optional<std::string> eos_token;  // tokenizer_config.json eos_token (text)
  std::optional<int32_t> bos_token_id;   // config.json bos_token_id
  std::optional<int32_t> eos_token_id;   // config.json eos_token_id (first when a list)
};

// Reads `dir`/tokenizer_config.json and `dir`/config.json; a missing file
// contributes nothing. A file that is not valid JSON, or a field of the wrong
// type, is INVALID_ARGUMENT naming the file and the field.
StatusOr<SpecialTokenConfig> ReadSpecialTokenConfig(const std::string& dir);

// Parses the two files' contents (nullopt: the file is absent). `source`
// names the directory in error messages.
StatusOr<SpecialTokenConfig> ParseSpecialTokenConfig(
    const std::optional<std::string>& tokenizer_config_json,
    const std::optional<std::string>& config_json, const std::string& source);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_TOKENIZER_SPECIAL_TOKENS_H_
