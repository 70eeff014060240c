// A GGUF file as a job's model.
//
// A job given `file:///models/x.gguf` reads its model through a view
// directory (worker/io/uri/model_files.h) that holds the checked file under
// the name model.gguf. The engine reads a model directory, so
// WriteGgufModelDir adds beside it what a Hugging Face directory would hold
// and the GGUF carries as metadata: config.json (BuildHfConfigJson), the
// tokenizer's Hugging Face files (hf_tokenizer_files.h: tokenizer.model or
// tokenizer.json, and tokenizer_config.json with the chat template and pad
// token) and chat_template.jinja. The weights are then read with
// GgufTensorSource (models/registry.h: OpenModelWeights) and the tokenizer
// from the GGUF's own vocabulary (load_tokenizer.h); the exports copy the
// made files, so Transformers and vLLM load the same config, vocabulary and
// template as llama.cpp.
#ifndef QUANTD_WORKER_IO_GGUF_GGUF_MODEL_DIR_H_
#define QUANTD_WORKER_IO_GGUF_GGUF_MODEL_DIR_H_

#include <cstddef>
#include <string>

#include "worker/common/status.h"

namespace quantd::gguf {

// The name of the GGUF file in a model directory.
inline constexpr char kGgufModelFileName[] = "model.gguf";

// The largest chat template a model may carry (its text is copied into
// every export's metadata).
inline constexpr size_t kMaxChatTemplateBytes = size_t{1} << 20;

// Whether `dir` holds a model.gguf regular file.
bool HasGgufModel(const std::string& dir);

// Whether the regular file at `path` starts with GGUF's magic.
bool LooksLikeGguf(const std::string& path);

// Writes those files into `dir`, which holds model.gguf and none of them.
// DATA_LOSS / INVALID_ARGUMENT as ParseGguf and LoadTokenizerFromGguf
// (INVALID_ARGUMENT too for a chat template over kMaxChatTemplateBytes);
// UNIMPLEMENTED for an architecture without a Hugging Face mapping (the
// message lists the ones read), a tokenizer model quantd does not read, and
// one part of a split GGUF (split.count > 1); FAILED_PRECONDITION when a
// file cannot be written.
Status WriteGgufModelDir(const std::string& dir);

}  // namespace quantd::gguf

#endif  // QUANTD_WORKER_IO_GGUF_GGUF_MODEL_DIR_H_
