// Reads a SentencePiece tokenizer.model (a serialized ModelProto) natively.
//
// libsentencepiece bundles its own protobuf runtime, which crashes at start-up
// in any process that also loads libprotobuf (LibTorch and gRPC both do), so
// the engine reads the model with this small protobuf wire-format parser and
// tokenizes with SpmBpeTokenizer. Only what BPE models need is read: pieces
// (text, score, type), the trainer's model type, special ids and byte
// fallback, and the normalizer flags. libsentencepiece stays as the test
// reference (SentencePieceTokenizer) in processes without libprotobuf.
#ifndef QUANTD_WORKER_IO_TOKENIZER_SENTENCEPIECE_MODEL_H_
#define QUANTD_WORKER_IO_TOKENIZER_SENTENCEPIECE_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "worker/common/status.h"
#include "worker/io/tokenizer/spm_bpe_tokenizer.h"

namespace quantd::io {

struct SentencePieceModel {
  SpmVocab vocab;
  int32_t model_type = 1;  // TrainerSpec.ModelType: 1 unigram, 2 BPE, 3 word, 4 char
  bool byte_fallback = false;
  int32_t unk_id = 0;
  int32_t bos_id = 1;
  int32_t eos_id = 2;
  int32_t pad_id = -1;
  std::string normalizer_name;
  bool has_precompiled_charsmap = false;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// Largest tokenizer.model accepted, checked before the bytes are read or
// handed to a parser (real ones are 0.5 to ~5 MB; 256k-piece vocabularies
// stay under 20 MB).
inline constexpr size_t kMaxSentencePieceModelBytes = size_t{64} << 20;

// DATA_LOSS (naming `source`) for bytes that are not a well-formed ModelProto;
// INVALID_ARGUMENT for more than kMaxSentencePieceModelBytes.
StatusOr<SentencePieceModel> ParseSentencePieceModel(std::string_view bytes,
                                                     const std::string& source);

// The ModelProto bytes of `model` (a tokenizer.model): the fields
// ParseSentencePieceModel reads, plus the special pieces' text
// (TrainerSpec unk/bos/eos_piece) that libsentencepiece looks ids up by.
std::string SerializeSentencePieceModel(const SentencePieceModel& model);

// A native tokenizer for a BPE model with the identity normalizer (Llama's
// and stories260K's). UNIMPLEMENTED, naming the feature, for unigram/word/char
// models and for normalization rules (precompiled charsmaps such as
// nmt_nfkc). `options` overrides special tokens as in SentencePieceOptions.
struct NativeSentencePieceOptions {
  std::optional<bool> add_bos;
  std::optional<bool> add_eos;
  std::optional<std::string> bos_piece;
  std::optional<std::string> eos_piece;
  std::optional<int32_t> bos_id;
  std::optional<int32_t> eos_id;
};
StatusOr<std::unique_ptr<SpmBpeTokenizer>> NativeSentencePieceTokenizer(
    const SentencePieceModel& model, const NativeSentencePieceOptions& options,
    const std::string& source);
// Reads and parses `path` (NOT_FOUND when missing).
StatusOr<std::unique_ptr<SpmBpeTokenizer>> LoadNativeSentencePiece(
    const std::string& path, const NativeSentencePieceOptions& options = {});

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_TOKENIZER_SENTENCEPIECE_MODEL_H_
