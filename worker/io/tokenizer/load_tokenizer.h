// LoadTokenizerFromDir: the tokenizer of a Hugging Face model directory.
//
// Picks the vocabulary file the directory has (tokenizer.model, SentencePiece;
// tokenizer.json, byte-level BPE) and applies the directory's special-token
// settings (tokenizer_config.json, config.json), so callers need not know
// which format a model ships.
#ifndef QUANTD_WORKER_IO_TOKENIZER_LOAD_TOKENIZER_H_
#define QUANTD_WORKER_IO_TOKENIZER_LOAD_TOKENIZER_H_

#include <memory>
#include <string>

#include "worker/common/status.h"
#include "worker/io/tokenizer/tokenizer.h"

namespace quantd::io {

// tokenizer.model is preferred when both files exist; it is read natively
// (sentencepiece_model.h: BPE models with the identity normalizer, such as
// Llama's), so no libsentencepiece/libprotobuf clash can occur in the worker.
// A directory with a model.gguf (a GGUF job's view, see
// worker/io/gguf/gguf_model_dir.h) gets the GGUF's embedded tokenizer.
// NOT_FOUND when the directory has none of these; INVALID_ARGUMENT or
// DATA_LOSS (naming the file) when one is malformed; UNIMPLEMENTED for other
// SentencePiece model types or a tokenizer.json that is not byte-level BPE.
StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromDir(const std::string& dir);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_TOKENIZER_LOAD_TOKENIZER_H_
