// What llama.cpp's converter takes from a Hugging Face model's tokenizer
// files beyond the vocabulary: the chat template (tokenizer.chat_template,
// from chat_template.jinja or tokenizer_config.json's chat_template; named
// templates as tokenizer.chat_template.<name>) and the padding token
// (tokenizer.ggml.padding_token_id, from tokenizer_config.json's pad_token
// looked up in the vocabulary). llama-server formats chat with the template.
#ifndef QUANTD_WORKER_EXPORT_GGUF_GGUF_CHAT_METADATA_H_
#define QUANTD_WORKER_EXPORT_GGUF_GGUF_CHAT_METADATA_H_

#include <string>
#include <utility>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/gguf/gguf_file.h"
#include "worker/io/tokenizer/tokenizer.h"

namespace quantd::exporter {

struct GgufChatMetadata {
  std::vector<std::pair<std::string, gguf::GgufValue>> kv;
  // What could not be carried over (a pad token missing from the vocabulary).
  std::vector<std::string> notes;
};

// Files that are absent give nothing. INVALID_ARGUMENT naming the file for
// a tokenizer_config.json that is not a bounded JSON object, a chat template
// that is not a string (or a list of {name, template}), or a template file
// over 1 MiB.
StatusOr<GgufChatMetadata> HfChatMetadata(const std::string& model_dir,
                                          const io::Tokenizer& tokenizer);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_GGUF_GGUF_CHAT_METADATA_H_
