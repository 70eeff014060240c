// GPT-2's byte-level alphabet: every byte 0..255 as one printable Unicode
// character, so byte-level BPE vocabularies (GPT-2, Llama 3, Qwen2) can hold
// arbitrary bytes as text ("Ġ" is the space byte 0x20).
#ifndef QUANTD_WORKER_IO_TOKENIZER_BYTE_LEVEL_H_
#define QUANTD_WORKER_IO_TOKENIZER_BYTE_LEVEL_H_

#include <string>
#include <string_view>

namespace quantd::io {

// Each byte of `bytes` as its alphabet character, UTF-8 encoded.
std::string BytesToByteLevel(std::string_view bytes);
// The inverse. Characters outside the alphabet are copied through unchanged
// (added tokens such as "<|endoftext|>" are plain text).
std::string ByteLevelToBytes(std::string_view text);

// UTF-8 helpers shared by the tokenizers.
// Length of the UTF-8 sequence that starts with `lead` (1 for stray bytes).
int Utf8SequenceLength(unsigned char lead);
// Decodes the code point at `pos` (advancing it); invalid bytes decode as
// themselves (U+0080..U+00FF) one at a time, so no input is dropped.
char32_t NextCodePoint(std::string_view s, size_t* pos);
void AppendUtf8(char32_t cp, std::string* out);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_TOKENIZER_BYTE_LEVEL_H_
