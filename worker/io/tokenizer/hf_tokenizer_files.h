// The Hugging Face tokenizer files of a native tokenizer.
//
// A model that arrives without them (a GGUF file, whose vocabulary is
// metadata) still needs them in its Hugging Face and ONNX exports, or
// Transformers and vLLM cannot tokenize for it. HfTokenizerFiles writes what
// those loaders read for the same vocabulary and special tokens:
//   - SpmBpeTokenizer: tokenizer.model, a SentencePiece BPE ModelProto
//     (identity normalizer, byte fallback when the vocabulary has byte
//     pieces), as Llama's own;
//   - BpeTokenizer: tokenizer.json, byte-level BPE with a Split(regex) +
//     ByteLevel pre-tokenizer, the control tokens as special added tokens
//     and a TemplateProcessing post-processor when BOS/EOS are added;
// and both a tokenizer_config.json naming the special tokens and whether
// BOS/EOS are added.
#ifndef QUANTD_WORKER_IO_TOKENIZER_HF_TOKENIZER_FILES_H_
#define QUANTD_WORKER_IO_TOKENIZER_HF_TOKENIZER_FILES_H_

#include <string>
#include <utility>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/tokenizer/tokenizer.h"

namespace quantd::io {

// (file name, contents). UNIMPLEMENTED for other tokenizers (a BpeTokenizer
// with a normalizer function has no tokenizer.json form here).
StatusOr<std::vector<std::pair<std::string, std::string>>> HfTokenizerFiles(
    const Tokenizer& tokenizer);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_TOKENIZER_HF_TOKENIZER_FILES_H_
