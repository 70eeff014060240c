// RegexPreTokenizer: splits text into the words that byte-level BPE merges
// within, using the regexes of GPT-2, Llama 3 and Qwen2 (or any pattern from a
// tokenizer.json Split pre-tokenizer).
//
// Those patterns are written for Oniguruma/PCRE. RE2 (linear time, no
// backtracking) runs them after two translations: `\s`/`\S` become explicit
// Unicode White_Space classes (RE2's `\s` is ASCII-only), and the one
// lookahead they use, `\s+(?!\S)|\s+`, becomes a captured `\s+` whose match is
// shortened afterwards, as llama.cpp does: a whitespace run followed by a
// non-space gives up its last character (unless it is one character long), so
// " word" keeps its leading space. Text between matches is kept as its own
// piece, like Hugging Face's "Isolated" split behaviour.
#ifndef QUANTD_WORKER_IO_TOKENIZER_PRETOKENIZER_H_
#define QUANTD_WORKER_IO_TOKENIZER_PRETOKENIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "worker/common/status.h"

namespace re2 {
class RE2;
}  // namespace re2

namespace quantd::io {

// The patterns llama.cpp and Hugging Face use, by GGUF tokenizer.ggml.pre name.
extern const char kGpt2Pattern[];
extern const char kLlama3Pattern[];
extern const char kQwen2Pattern[];

// Bounds on a pattern from a tokenizer file: its length before translation
// (the known ones are under 200 characters), and RE2's max_mem for the
// translated program and its DFA cache (RE2's default, stated: past it a
// pattern does not compile, and a DFA out of memory falls back to RE2's
// linear NFA).
inline constexpr size_t kMaxPreTokenizerPatternLength = 1024;
inline constexpr int64_t kPreTokenizerRegexMaxMem = int64_t{8} << 20;

class RegexPreTokenizer {
 public:
  // INVALID_ARGUMENT when the pattern is too long or RE2 rejects the
  // translated pattern; UNIMPLEMENTED for lookarounds other than the
  // `\s+(?!\S)|\s+` idiom.
  static StatusOr<std::unique_ptr<RegexPreTokenizer>> Create(std::string_view pattern);
  ~RegexPreTokenizer();

  // Pieces of `text` in order; their concatenation is `text`.
  std::vector<std::string_view> Split(std::string_view text) const;

  // The RE2 pattern actually compiled (for tests and error messages).
  const std::string& translated() const { return translated_; }

 private:
  RegexPreTokenizer() = default;
  std::unique_ptr<re2::RE2> re_;
  std::string translated_;
  bool has_whitespace_group_ = false;
};

// Translates a PCRE-style pre-tokenizer pattern for RE2 (see above). Sets
// `whitespace_group` when the lookahead idiom became capture group 1.
StatusOr<std::string> TranslatePatternForRe2(std::string_view pattern, bool* whitespace_group);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_TOKENIZER_PRETOKENIZER_H_
