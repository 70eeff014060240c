// SpmBpeTokenizer: SentencePiece's BPE model, natively (no libsentencepiece).
//
// The vocabulary is pieces with scores and types (GGUF "llama" tokenizers,
// or a tokenizer.model). Encoding escapes spaces as U+2581, prepends one when
// the model adds a dummy prefix, then merges adjacent symbols whose
// concatenation is a piece, highest score first (leftmost on ties), as
// SentencePiece and llama.cpp do; symbols left without a piece fall back to
// their "<0xXX>" byte pieces (or <unk>).
#ifndef QUANTD_WORKER_IO_TOKENIZER_SPM_BPE_TOKENIZER_H_
#define QUANTD_WORKER_IO_TOKENIZER_SPM_BPE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/tokenizer/tokenizer.h"

namespace quantd::io {

// SentencePiece / llama.cpp token types.
enum class SpmPieceType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct SpmVocab {
  std::vector<std::string> pieces;
  std::vector<float> scores;   // same length as pieces
  std::vector<int32_t> types;  // SpmPieceType values; same length
};

struct SpmBpeOptions {
  bool add_dummy_prefix = true;  // "▁" before the text
  int32_t unk_id = 0;
  int32_t bos_id = 1;
  int32_t eos_id = 2;
  bool add_bos = true;
  bool add_eos = false;
};

class SpmBpeTokenizer : public Tokenizer {
 public:
  // INVALID_ARGUMENT when the arrays differ in length or an id is outside
  // the vocabulary.
  static StatusOr<std::unique_ptr<SpmBpeTokenizer>> Create(SpmVocab vocab,
                                                           const SpmBpeOptions& options);

  std::vector<int32_t> Encode(std::string_view text) const override;
  // Pieces joined with U+2581 turned back into spaces and byte pieces into
  // bytes; control and unknown ids are skipped, and the dummy-prefix space is
  // removed.
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int32_t bos_id() const override { return options_.bos_id; }
  int32_t eos_id() const override { return options_.eos_id; }
  bool add_bos() const override { return options_.add_bos; }
  bool add_eos() const { return options_.add_eos; }
  int32_t vocab_size() const override { return static_cast<int32_t>(vocab_.pieces.size()); }

  int32_t PieceToId(std::string_view piece) const;  // -1 when absent
  const SpmVocab& vocab() const { return vocab_; }
  const SpmBpeOptions& options() const { return options_; }

 private:
  SpmBpeTokenizer() = default;
  int32_t ByteToId(unsigned char byte) const;

  SpmVocab vocab_;
  SpmBpeOptions options_;
  std::unordered_map<std::string, int32_t> piece_to_id_;
  int32_t byte_ids_[256];
};

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_TOKENIZER_SPM_BPE_TOKENIZER_H_
