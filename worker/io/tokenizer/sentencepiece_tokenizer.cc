#include "worker/io/tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "worker/io/tokenizer/sentencepiece_model.h"

namespace quantd::io {

SentencePieceTokenizer::SentencePieceTokenizer(
    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp)
    : sp_(std::move(sp)) {
  bos_id_ = sp_->bos_id();
  eos_id_ = sp_->eos_id();
  add_bos_ = bos_id_ >= 0;
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Load(
    const std::string& model_path, const SentencePieceOptions& options) {
  struct stat st;
  if (stat(model_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return NotFoundError("SentencePiece model " + model_path + " not found");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxSentencePieceModelBytes) {
    return InvalidArgumentError("SentencePiece model " + model_path + " is " +
                                std::to_string(st.st_size) + " bytes; at most " +
                                std::to_string(kMaxSentencePieceModelBytes));
  }
  std::ifstream in(model_path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in || in.bad())
    return DataLossError("reading SentencePiece model " + model_path + " failed");
  return FromSerializedModel(bytes.str(), model_path, options);
}

StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::FromSerializedModel(
    std::string_view serialized, const std::string& source, const SentencePieceOptions& options) {
  // The library parses with its bundled protobuf; bound what it is handed.
  if (serialized.size() > kMaxSentencePieceModelBytes) {
    return InvalidArgumentError("SentencePiece model " + source + " is " +
                                std::to_string(serialized.size()) + " bytes; at most " +
                                std::to_string(kMaxSentencePieceModelBytes));
  }
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto status = sp->LoadFromSerializedProto(serialized);
  if (!status.ok()) {
    return InvalidArgumentError(source + " is not a SentencePiece model: " + status.ToString());
  }
  std::unique_ptr<SentencePieceTokenizer> tok(new SentencePieceTokenizer(std::move(sp)));
  QD_RETURN_IF_ERROR(tok->ApplyOptions(options, source));
  return tok;
}

Status SentencePieceTokenizer::ApplyOptions(const SentencePieceOptions& options,
                                            const std::string& source) {
  auto check_id = [&](const char* what, int32_t id) -> Status {
    if (id < -1 || id >= vocab_size()) {
      return InvalidArgumentError(source + ": " + what + " " + std::to_string(id) +
                                  " is outside the vocabulary of " + std::to_string(vocab_size()) +
                                  " pieces");
    }
    return OkStatus();
  };
  if (options.bos_id) {
    QD_RETURN_IF_ERROR(check_id("bos id", *options.bos_id));
    bos_id_ = *options.bos_id;
  }
  if (options.eos_id) {
    QD_RETURN_IF_ERROR(check_id("eos id", *options.eos_id));
    eos_id_ = *options.eos_id;
  }
  if (options.bos_piece && PieceToId(*options.bos_piece) >= 0) {
    bos_id_ = PieceToId(*options.bos_piece);
  }
  if (options.eos_piece && PieceToId(*options.eos_piece) >= 0) {
    eos_id_ = PieceToId(*options.eos_piece);
  }
  add_bos_ = options.add_bos.value_or(bos_id_ >= 0) && bos_id_ >= 0;
  add_eos_ = options.add_eos.value_or(false) && eos_id_ >= 0;
  return OkStatus();
}

std::vector<int32_t> SentencePieceTokenizer::Encode(std::string_view text) const {
  std::vector<int> ids;
  // Encoding only fails for an unloaded model, which the factory rules out.
  if (!sp_->Encode(text, &ids).ok()) return {};
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::vector<int> valid;
  valid.reserve(ids.size());
  const int32_t n = vocab_size();
  for (int32_t id : ids) {
    if (id >= 0 && id < n) valid.push_back(id);
  }
  std::string text;
  if (!sp_->Decode(valid, &text).ok()) return {};
  return text;
}

int32_t SentencePieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }

int32_t SentencePieceTokenizer::PieceToId(std::string_view piece) const {
  const int id = sp_->PieceToId(piece);
  if (id == sp_->unk_id() && piece != sp_->IdToPiece(id)) return -1;
  return id;
}

std::string SentencePieceTokenizer::IdToPiece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return sp_->IdToPiece(id);
}

}  // namespace quantd::io

namespace quantd::io {

SpmVocab SentencePieceTokenizer::ExportVocab() const {
  SpmVocab v;
  const int n = sp_->GetPieceSize();
  for (int id = 0; id < n; ++id) {
    v.pieces.push_back(sp_->IdToPiece(id));
    v.scores.push_back(sp_->GetScore(id));
    SpmPieceType type = SpmPieceType::kNormal;
    if (sp_->IsUnknown(id)) {
      type = SpmPieceType::kUnknown;
    } else if (sp_->IsControl(id)) {
      type = SpmPieceType::kControl;
    } else if (sp_->IsByte(id)) {
      type = SpmPieceType::kByte;
    } else if (sp_->IsUnused(id)) {
      type = SpmPieceType::kUnused;
    }
    v.types.push_back(static_cast<int32_t>(type));
  }
  return v;
}

StatusOr<std::unique_ptr<SpmBpeTokenizer>> SentencePieceTokenizer::ToNative() const {
  SpmBpeOptions o;
  o.unk_id = sp_->unk_id();
  o.bos_id = bos_id_;
  o.eos_id = eos_id_;
  o.add_bos = add_bos_;
  o.add_eos = add_eos_;
  return SpmBpeTokenizer::Create(ExportVocab(), o);
}

}  // namespace quantd::io
