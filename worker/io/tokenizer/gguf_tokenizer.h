// LoadTokenizerFromGguf: the tokenizer embedded in a GGUF file's metadata.
//
// tokenizer.ggml.model "llama" is a SentencePiece BPE vocabulary (pieces,
// scores, types) and becomes an SpmBpeTokenizer; "gpt2" is byte-level BPE
// (tokens, merges, and the pre-tokenizer named by tokenizer.ggml.pre) and
// becomes a BpeTokenizer. BOS/EOS ids and add_bos/add_eos come from the
// tokenizer.ggml.* keys, with llama.cpp's defaults when absent. Special tokens
// written in the text are tokenized as text, as llama.cpp does by default.
#ifndef QUANTD_WORKER_IO_TOKENIZER_GGUF_TOKENIZER_H_
#define QUANTD_WORKER_IO_TOKENIZER_GGUF_TOKENIZER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/gguf/gguf_file.h"
#include "worker/io/tokenizer/tokenizer.h"

namespace quantd::io {

// INVALID_ARGUMENT naming the key when the tokenizer metadata is missing or
// inconsistent; UNIMPLEMENTED for other tokenizer models (e.g. "bert") or
// pre-tokenizers (the supported ones are listed in the message).
StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromGguf(const gguf::GgufFile& file);
StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromGgufPath(const std::string& path);

// llama.cpp's tokenizer.ggml.* metadata for `tokenizer`, to embed it in a
// GGUF: model, pre, tokens, scores, token_type, merges, special ids and
// add_bos/add_eos. Works for SpmBpeTokenizer and for BpeTokenizer with a
// GPT-2, Llama-3 or Qwen2 pre-tokenizer (SentencePieceTokenizer: convert
// with ToNative() first); UNIMPLEMENTED otherwise.
StatusOr<std::vector<std::pair<std::string, gguf::GgufValue>>> TokenizerGgufMetadata(
    const Tokenizer& tokenizer);

// The regex a GGUF tokenizer.ggml.pre name stands for; UNIMPLEMENTED when
// unknown.
StatusOr<std::string> PreTokenizerPatternForGguf(const std::string& pre);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_TOKENIZER_GGUF_TOKENIZER_H_
