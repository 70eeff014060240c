// Unicode NFC normalization (through ICU), for tokenizers whose
// tokenizer.json asks for it (Qwen2).
#ifndef QUANTD_WORKER_IO_TOKENIZER_UNICODE_NORMALIZER_H_
#define QUANTD_WORKER_IO_TOKENIZER_UNICODE_NORMALIZER_H_

#include <string>
#include <string_view>

namespace quantd::io {

// NFC of UTF-8 `text`. Ill-formed UTF-8 is returned unchanged (byte-level
// BPE still encodes every byte).
std::string NormalizeNfc(std::string_view text);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_TOKENIZER_UNICODE_NORMALIZER_H_
