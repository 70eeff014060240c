// BpeTokenizer: byte-level BPE (GPT-2, Llama 3, Qwen2), natively.
//
// Text is split into added/special tokens and plain runs; each run is cut into
// words by the model's RegexPreTokenizer, each word's bytes are written in
// GPT-2's byte-level alphabet, and adjacent symbols are merged by merge rank
// (lowest first, leftmost on ties) until no ranked pair remains, exactly like
// Hugging Face tokenizers and llama.cpp. Built from GGUF metadata
// (gguf_tokenizer.h) or a tokenizer.json (tokenizer_json.h).
#ifndef QUANTD_WORKER_IO_TOKENIZER_BPE_TOKENIZER_H_
#define QUANTD_WORKER_IO_TOKENIZER_BPE_TOKENIZER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/tokenizer/pretokenizer.h"
#include "worker/io/tokenizer/tokenizer.h"

namespace quantd::io {

// A token matched verbatim in the input before normalization and
// pre-tokenization (a Hugging Face added token). lstrip/rstrip: it also
// swallows the whitespace on that side.
struct BpeAddedToken {
  int32_t id = -1;
  bool lstrip = false;
  bool rstrip = false;
};

struct BpeVocab {
  std::vector<std::string> tokens;  // id -> token text (byte-level alphabet)
  // "left right" pairs, highest priority first (rank = index).
  std::vector<std::string> merges;
  // Hugging Face added tokens, special or not. Empty for llama.cpp's default
  // of not parsing special tokens in text.
  std::vector<BpeAddedToken> added_tokens;
  // Control tokens, left out of Decode (BOS, EOS, ...).
  std::vector<int32_t> control_tokens;
};

struct BpeOptions {
  std::string pretokenizer_pattern;  // e.g. kGpt2Pattern
  // Applied to each run of text between added tokens (e.g. NFC); none when
  // empty.
  std::function<std::string(std::string_view)> normalizer;
  // Prepend a space to each run that does not start with one (ByteLevel
  // add_prefix_space).
  bool add_prefix_space = false;
  // A word that is itself a token is emitted whole, without merging
  // (Llama 3's tokenizer.json "ignore_merges").
  bool ignore_merges = false;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  bool add_bos = false;
  bool add_eos = false;
};

class BpeTokenizer : public Tokenizer {
 public:
  // INVALID_ARGUMENT when a merge is not "left right" with both sides
  // tokens, a token repeats, or a special id is outside the vocabulary.
  static StatusOr<std::unique_ptr<BpeTokenizer>> Create(BpeVocab vocab, const BpeOptions& options);

  std::vector<int32_t> Encode(std::string_view text) const override;
  // Token texts mapped back to bytes; control tokens and unknown ids are
  // skipped.
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int32_t bos_id() const override { return options_.bos_id; }
  int32_t eos_id() const override { return options_.eos_id; }
  bool add_bos() const override { return options_.add_bos; }
  bool add_eos() const { return options_.add_eos; }
  int32_t vocab_size() const override { return static_cast<int32_t>(vocab_.tokens.size()); }

  // -1 when absent.
  int32_t TokenToId(std::string_view token) const;
  const std::string& IdToToken(int32_t id) const { return vocab_.tokens.at(id); }
  const BpeVocab& vocab() const { return vocab_; }
  const BpeOptions& options() const { return options_; }

 private:
  BpeTokenizer() = default;
  void EncodeWord(std::string_view word_bytes, std::vector<int32_t>* out) const;
  int MergeRank(std::string_view left, std::string_view right) const;

  BpeVocab vocab_;
  BpeOptions options_;
  std::unique_ptr<RegexPreTokenizer> pretokenizer_;
  std::unordered_map<std::string, int32_t> token_to_id_;
  std::unordered_map<std::string, int> merge_rank_;           // key "left right"
  std::vector<std::pair<std::string, BpeAddedToken>> added_;  // longest first
  std::vector<bool> is_control_;
};

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_TOKENIZER_BPE_TOKENIZER_H_
