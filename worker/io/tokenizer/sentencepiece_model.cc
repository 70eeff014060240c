#include "worker/io/tokenizer/sentencepiece_model.h"

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <sstream>

namespace quantd::io {
namespace {

// A protobuf wire-format reader over a byte range.
class Wire {
 public:
  Wire(std::string_view bytes, const std::string& where) : s_(bytes), where_(where) {}
  bool done() const { return pos_ >= s_.size(); }

  Status Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= s_.size()) return Truncated();
      const uint8_t b = static_cast<uint8_t>(s_[pos_++]);
      *v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return OkStatus();
    }
    return DataLossError(where_ + ": malformed varint");
  }
  Status Tag(uint32_t* field, uint32_t* wire_type) {
    uint64_t tag;
    QD_RETURN_IF_ERROR(Varint(&tag));
    *field = static_cast<uint32_t>(tag >> 3);
    *wire_type = static_cast<uint32_t>(tag & 7);
    if (*field == 0) return DataLossError(where_ + ": field number 0");
    return OkStatus();
  }
  Status Bytes(std::string_view* out) {
    uint64_t len;
    QD_RETURN_IF_ERROR(Varint(&len));
    if (len > s_.size() - pos_) return Truncated();
    *out = s_.substr(pos_, len);
    pos_ += len;
    return OkStatus();
  }
  Status Fixed32(uint32_t* v) {
    if (s_.size() - pos_ < 4) return Truncated();
    std::memcpy(v, s_.data() + pos_, 4);
    pos_ += 4;
    return OkStatus();
  }
  Status Skip(uint32_t wire_type) {
    uint64_t v;
    std::string_view b;
    uint32_t f;
    switch (wire_type) {
      case 0:
        return Varint(&v);
      case 1:
        if (s_.size() - pos_ < 8) return Truncated();
        pos_ += 8;
        return OkStatus();
      case 2:
        return Bytes(&b);
      case 5:
        return Fixed32(&f);
      default:
        return DataLossError(where_ + ": unsupported wire type " + std::to_string(wire_type));
    }
  }

 private:
  Status Truncated() { return DataLossError(where_ + ": truncated protobuf"); }
  std::string_view s_;
  size_t pos_ = 0;
  const std::string& where_;
};

Status ParsePiece(std::string_view bytes, const std::string& where, SpmVocab* vocab) {
  Wire w(bytes, where);
  std::string piece;
  float score = 0;
  int32_t type = 1;
  while (!w.done()) {
    uint32_t field = 0, wt = 0;
    QD_RETURN_IF_ERROR(w.Tag(&field, &wt));
    if (field == 1 && wt == 2) {
      std::string_view s;
      QD_RETURN_IF_ERROR(w.Bytes(&s));
      piece = std::string(s);
    } else if (field == 2 && wt == 5) {
      uint32_t bits = 0;
      QD_RETURN_IF_ERROR(w.Fixed32(&bits));
      std::memcpy(&score, &bits, 4);
    } else if (field == 3 && wt == 0) {
      uint64_t v;
      QD_RETURN_IF_ERROR(w.Varint(&v));
      type = static_cast<int32_t>(v);
    } else {
      QD_RETURN_IF_ERROR(w.Skip(wt));
    }
  }
  vocab->pieces.push_back(std::move(piece));
  vocab->scores.push_back(score);
  vocab->types.push_back(type);
  return OkStatus();
}

Status ParseTrainerSpec(std::string_view bytes, const std::string& where, SentencePieceModel* m) {
  Wire w(bytes, where);
  while (!w.done()) {
    uint32_t field = 0, wt = 0;
    QD_RETURN_IF_ERROR(w.Tag(&field, &wt));
    if (wt != 0 || (field != 3 && field != 35 && (field < 40 || field > 43))) {
      QD_RETURN_IF_ERROR(w.Skip(wt));
      continue;
    }
    uint64_t v;
    QD_RETURN_IF_ERROR(w.Varint(&v));
    const int32_t i =
        static_cast<int32_t>(static_cast<uint32_t>(v));  // int32 sign via 2's complement
    switch (field) {
      case 3:
        m->model_type = i;
        break;
      case 35:
        m->byte_fallback = v != 0;
        break;
      case 40:
        m->unk_id = i;
        break;
      case 41:
        m->bos_id = i;
        break;
      case 42:
        m->eos_id = i;
        break;
      case 43:
        m->pad_id = i;
        break;
    }
  }
  return OkStatus();
}

Status ParseNormalizerSpec(std::string_view bytes, const std::string& where,
                           SentencePieceModel* m) {
  Wire w(bytes, where);
  while (!w.done()) {
    uint32_t field = 0, wt = 0;
    QD_RETURN_IF_ERROR(w.Tag(&field, &wt));
    if ((field == 1 || field == 2) && wt == 2) {
      std::string_view s;
      QD_RETURN_IF_ERROR(w.Bytes(&s));
      if (field == 1) m->normalizer_name = std::string(s);
      if (field == 2) m->has_precompiled_charsmap = !s.empty();
    } else if (field >= 3 && field <= 5 && wt == 0) {
      uint64_t v;
      QD_RETURN_IF_ERROR(w.Varint(&v));
      if (field == 3) m->add_dummy_prefix = v != 0;
      if (field == 4) m->remove_extra_whitespaces = v != 0;
      if (field == 5) m->escape_whitespaces = v != 0;
    } else {
      QD_RETURN_IF_ERROR(w.Skip(wt));
    }
  }
  return OkStatus();
}

}  // namespace

Status CheckModelSize(uint64_t size, const std::string& source) {
  if (size <= kMaxSentencePieceModelBytes) return OkStatus();
  return InvalidArgumentError("SentencePiece model " + source + " is " + std::to_string(size) +
                              " bytes; at most " + std::to_string(kMaxSentencePieceModelBytes));
}

StatusOr<SentencePieceModel> ParseSentencePieceModel(std::string_view bytes,
                                                     const std::string& source) {
  QD_RETURN_IF_ERROR(CheckModelSize(bytes.size(), source));
  SentencePieceModel m;
  Wire w(bytes, source);
  while (!w.done()) {
    uint32_t field = 0, wt = 0;
    QD_RETURN_IF_ERROR(w.Tag(&field, &wt));
    if (wt == 2 && field >= 1 && field <= 3) {
      std::string_view sub;
      QD_RETURN_IF_ERROR(w.Bytes(&sub));
      Status s = field == 1   ? ParsePiece(sub, source, &m.vocab)
                 : field == 2 ? ParseTrainerSpec(sub, source, &m)
                              : ParseNormalizerSpec(sub, source, &m);
      QD_RETURN_IF_ERROR(s);
    } else {
      QD_RETURN_IF_ERROR(w.Skip(wt));
    }
  }
  if (m.vocab.pieces.empty())
    return DataLossError(source + " has no pieces; not a SentencePiece model");
  return m;
}

namespace {

// Protobuf wire-format writing: tags, varints, fixed32 and nested messages.
class WireOut {
 public:
  void Varint(uint32_t field, uint64_t v) {
    Tag(field, 0);
    Raw(v);
  }
  // int32 fields: a negative value is its 64-bit two's complement.
  void Int32(uint32_t field, int32_t v) { Varint(field, static_cast<uint64_t>(int64_t{v})); }
  void Float(uint32_t field, float v) {
    Tag(field, 5);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
  }
  void Bytes(uint32_t field, std::string_view bytes) {
    Tag(field, 2);
    Raw(bytes.size());
    out_.append(bytes);
  }
  const std::string& str() const { return out_; }

 private:
  void Tag(uint32_t field, uint32_t wire_type) { Raw((uint64_t{field} << 3) | wire_type); }
  void Raw(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  std::string out_;
};

}  // namespace

std::string SerializeSentencePieceModel(const SentencePieceModel& model) {
  // Field numbers: sentencepiece_model.proto (ModelProto.pieces 1,
  // trainer_spec 2, normalizer_spec 3; SentencePiece piece 1, score 2,
  // type 3; TrainerSpec model_type 3, vocab_size 4, byte_fallback 35,
  // unk/bos/eos/pad_id 40-43, unk/bos/eos_piece 45-47; NormalizerSpec
  // name 1, add_dummy_prefix 3, remove_extra_whitespaces 4,
  // escape_whitespaces 5).
  const SpmVocab& v = model.vocab;
  const int32_t n = static_cast<int32_t>(v.pieces.size());
  WireOut out;
  for (int32_t id = 0; id < n; ++id) {
    WireOut piece;
    piece.Bytes(1, v.pieces[id]);
    piece.Float(2, id < static_cast<int32_t>(v.scores.size()) ? v.scores[id] : 0.0f);
    piece.Varint(3, static_cast<uint64_t>(id < static_cast<int32_t>(v.types.size())
                                              ? v.types[id]
                                              : static_cast<int32_t>(SpmPieceType::kNormal)));
    out.Bytes(1, piece.str());
  }
  WireOut trainer;
  trainer.Varint(3, static_cast<uint64_t>(model.model_type));
  trainer.Int32(4, n);
  trainer.Varint(35, model.byte_fallback ? 1 : 0);
  trainer.Int32(40, model.unk_id);
  trainer.Int32(41, model.bos_id);
  trainer.Int32(42, model.eos_id);
  trainer.Int32(43, model.pad_id);
  const std::pair<uint32_t, int32_t> special[] = {
      {45, model.unk_id}, {46, model.bos_id}, {47, model.eos_id}};
  for (const auto& [field, id] : special) {
    if (id >= 0 && id < n) trainer.Bytes(field, v.pieces[id]);
  }
  out.Bytes(2, trainer.str());
  WireOut normalizer;
  normalizer.Bytes(1, model.normalizer_name);
  normalizer.Varint(3, model.add_dummy_prefix ? 1 : 0);
  normalizer.Varint(4, model.remove_extra_whitespaces ? 1 : 0);
  normalizer.Varint(5, model.escape_whitespaces ? 1 : 0);
  out.Bytes(3, normalizer.str());
  return out.str();
}

StatusOr<std::unique_ptr<SpmBpeTokenizer>> NativeSentencePieceTokenizer(
    const SentencePieceModel& model, const NativeSentencePieceOptions& options,
    const std::string& source) {
  if (model.model_type != 2) {
    static const char* kNames[] = {"?", "unigram", "BPE", "word", "char"};
    const char* name =
        model.model_type >= 1 && model.model_type <= 4 ? kNames[model.model_type] : "unknown";
    return UnimplementedError(source + ": SentencePiece " + name +
                              " models are not supported natively (supported: BPE)");
  }
  if (model.has_precompiled_charsmap) {
    return UnimplementedError(source + ": SentencePiece normalization rule '" +
                              model.normalizer_name +
                              "' is not supported natively (supported: identity)");
  }
  if (model.remove_extra_whitespaces || !model.escape_whitespaces) {
    return UnimplementedError(source +
                              ": SentencePiece remove_extra_whitespaces / unescaped whitespace "
                              "are not supported natively (Llama-style models use neither)");
  }
  const int32_t n = static_cast<int32_t>(model.vocab.pieces.size());
  auto find_piece = [&](const std::optional<std::string>& piece) -> std::optional<int32_t> {
    if (!piece) return std::nullopt;
    for (int32_t id = 0; id < n; ++id) {
      if (model.vocab.pieces[id] == *piece) return id;
    }
    return std::nullopt;
  };
  SpmBpeOptions o;
  o.add_dummy_prefix = model.add_dummy_prefix;
  o.unk_id = model.unk_id;
  o.bos_id = model.bos_id;
  o.eos_id = model.eos_id;
  if (options.bos_id) o.bos_id = *options.bos_id;
  if (options.eos_id) o.eos_id = *options.eos_id;
  if (auto id = find_piece(options.bos_piece)) o.bos_id = *id;
  if (auto id = find_piece(options.eos_piece)) o.eos_id = *id;
  o.add_bos = options.add_bos.value_or(o.bos_id >= 0) && o.bos_id >= 0;
  o.add_eos = options.add_eos.value_or(false) && o.eos_id >= 0;
  auto t = SpmBpeTokenizer::Create(model.vocab, o);
  if (!t.ok()) return Status(t.status()).Prepend(source + ": ");
  return std::move(t).value();
}

StatusOr<std::unique_ptr<SpmBpeTokenizer>> LoadNativeSentencePiece(
    const std::string& path, const NativeSentencePieceOptions& options) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return NotFoundError("SentencePiece model " + path + " not found");
  }
  QD_RETURN_IF_ERROR(CheckModelSize(static_cast<uint64_t>(st.st_size), path));
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return DataLossError("reading SentencePiece model " + path + " failed");
  QD_ASSIGN_OR_RETURN(SentencePieceModel model, ParseSentencePieceModel(bytes.str(), path));
  return NativeSentencePieceTokenizer(model, options, path);
}

}  // namespace quantd::io
