// SentencePieceTokenizer: a Tokenizer over a SentencePiece model
// (tokenizer.model), through libsentencepiece.
//
// This is the reference implementation for Llama-2-style vocabularies: the
// ids are exactly those of the model's own tokenizer, including its
// normalizer (dummy prefix, whitespace escaping) and byte fallback.
#ifndef QUANTD_WORKER_IO_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_
#define QUANTD_WORKER_IO_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/tokenizer/spm_bpe_tokenizer.h"
#include "worker/io/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}  // namespace sentencepiece

namespace quantd::io {

// Overrides of what the SentencePiece model itself says; unset fields keep
// the model's values (bos/eos from its trainer spec, add_bos true when the
// model has a BOS piece, as Llama's tokenizers do). A special token named by
// its piece text wins over one named by id; a piece the vocabulary lacks is
// ignored (tokenizer_config.json may name tokens a model does not use).
struct SentencePieceOptions {
  std::optional<bool> add_bos;
  std::optional<bool> add_eos;
  std::optional<std::string> bos_piece;
  std::optional<std::string> eos_piece;
  std::optional<int32_t> bos_id;
  std::optional<int32_t> eos_id;
};

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Loads a tokenizer.model file. NOT_FOUND when the file is missing;
  // INVALID_ARGUMENT when it is not a SentencePiece model or an override id
  // is outside the vocabulary.
  static StatusOr<std::unique_ptr<SentencePieceTokenizer>> Load(
      const std::string& model_path, const SentencePieceOptions& options = {});
  // Same, from the serialized ModelProto bytes; `source` names it in errors.
  static StatusOr<std::unique_ptr<SentencePieceTokenizer>> FromSerializedModel(
      std::string_view serialized, const std::string& source,
      const SentencePieceOptions& options = {});

  ~SentencePieceTokenizer() override;

  std::vector<int32_t> Encode(std::string_view text) const override;
  // Ids outside the vocabulary are skipped.
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  bool add_bos() const override { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  int32_t vocab_size() const override;

  // The id of a piece, or -1 when the vocabulary lacks it (a piece that
  // maps to <unk> without being "<unk>" is absent).
  int32_t PieceToId(std::string_view piece) const;
  std::string IdToPiece(int32_t id) const;
  // Pieces, scores and types, e.g. to write the vocabulary into a GGUF.
  SpmVocab ExportVocab() const;
  // The native equivalent (same ids for BPE models with the identity
  // normalizer, e.g. Llama's), sharing this tokenizer's special tokens.
  StatusOr<std::unique_ptr<SpmBpeTokenizer>> ToNative() const;

 private:
  explicit SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp);
  Status ApplyOptions(const SentencePieceOptions& options, const std::string& source);

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
};

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_
