// Hugging Face tokenizer.json for byte-level BPE models (GPT-2, Llama 3,
// Qwen2, and others built the same way).
//
// Reads the model (vocab, merges, ignore_merges), added tokens (split out of
// the text before pre-tokenization, with their lstrip/rstrip flags), the
// pre-tokenizer (ByteLevel with the GPT-2 regex, or a Sequence of a regex
// Split and a regex-free ByteLevel), the NFC normalizer, and the
// post-processor's BOS/EOS template. tokenizer_config.json settings, when
// given, override the template (add_bos_token / add_eos_token, token names).
// Anything else, e.g. a WordPiece model or a Metaspace pre-tokenizer, is
// UNIMPLEMENTED with the component named.
#ifndef QUANTD_WORKER_IO_TOKENIZER_TOKENIZER_JSON_H_
#define QUANTD_WORKER_IO_TOKENIZER_TOKENIZER_JSON_H_

#include <memory>
#include <string>

#include "worker/common/status.h"
#include "worker/io/tokenizer/special_tokens.h"
#include "worker/io/tokenizer/tokenizer.h"

namespace quantd::io {

// `source` names the file in messages. INVALID_ARGUMENT for malformed JSON or
// an inconsistent vocabulary.
StatusOr<std::unique_ptr<Tokenizer>> ParseTokenizerJson(const std::string& json_text,
                                                        const SpecialTokenConfig& special,
                                                        const std::string& source);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_TOKENIZER_TOKENIZER_JSON_H_
