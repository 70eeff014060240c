#include "worker/io/tokenizer/gguf_tokenizer.h"

#include "worker/io/tokenizer/bpe_tokenizer.h"
#include "worker/io/tokenizer/pretokenizer.h"
#include "worker/io/tokenizer/spm_bpe_tokenizer.h"

namespace quantd::io {
namespace {

using gguf::GgufFile;

// llama.cpp writes 0xFFFFFFFF (or -1) for "no such token".
StatusOr<int32_t> OptionalId(const GgufFile& f, const std::string& key, int32_t fallback) {
  if (!f.Find(key)) return fallback;
  QD_ASSIGN_OR_RETURN(int64_t id, f.GetInt(key));
  if (id < 0 || id >= 0xFFFFFFFFll) return -1;
  if (id > INT32_MAX) return InvalidArgumentError(f.where() + ": " + key + " is out of range");
  return static_cast<int32_t>(id);
}

StatusOr<std::vector<int32_t>> TokenTypes(const GgufFile& f, size_t n) {
  std::vector<int32_t> types(n, static_cast<int32_t>(SpmPieceType::kNormal));
  if (!f.Find("tokenizer.ggml.token_type")) return types;
  QD_ASSIGN_OR_RETURN(std::vector<int64_t> raw, f.GetIntArray("tokenizer.ggml.token_type"));
  if (raw.size() != n) {
    return InvalidArgumentError(f.where() + ": tokenizer.ggml.token_type has " +
                                std::to_string(raw.size()) + " entries for " + std::to_string(n) +
                                " tokens");
  }
  for (size_t i = 0; i < n; ++i) types[i] = static_cast<int32_t>(raw[i]);
  return types;
}

StatusOr<std::unique_ptr<Tokenizer>> LoadSpm(const GgufFile& f, std::vector<std::string> tokens) {
  SpmVocab vocab;
  const size_t n = tokens.size();
  vocab.pieces = std::move(tokens);
  if (f.Find("tokenizer.ggml.scores")) {
    QD_ASSIGN_OR_RETURN(std::vector<double> scores, f.GetFloatArray("tokenizer.ggml.scores"));
    if (scores.size() != n) {
      return InvalidArgumentError(f.where() + ": tokenizer.ggml.scores has " +
                                  std::to_string(scores.size()) + " entries for " +
                                  std::to_string(n) + " tokens");
    }
    vocab.scores.assign(scores.begin(), scores.end());
  } else {
    vocab.scores.assign(n, 0.0f);
  }
  QD_ASSIGN_OR_RETURN(vocab.types, TokenTypes(f, n));
  SpmBpeOptions o;
  QD_ASSIGN_OR_RETURN(o.unk_id, OptionalId(f, "tokenizer.ggml.unknown_token_id", 0));
  QD_ASSIGN_OR_RETURN(o.bos_id, OptionalId(f, "tokenizer.ggml.bos_token_id", 1));
  QD_ASSIGN_OR_RETURN(o.eos_id, OptionalId(f, "tokenizer.ggml.eos_token_id", 2));
  QD_ASSIGN_OR_RETURN(o.add_bos, f.GetBoolOr("tokenizer.ggml.add_bos_token", true));
  QD_ASSIGN_OR_RETURN(o.add_eos, f.GetBoolOr("tokenizer.ggml.add_eos_token", false));
  QD_ASSIGN_OR_RETURN(o.add_dummy_prefix, f.GetBoolOr("tokenizer.ggml.add_space_prefix", true));
  o.add_bos = o.add_bos && o.bos_id >= 0;
  o.add_eos = o.add_eos && o.eos_id >= 0;
  auto t = SpmBpeTokenizer::Create(std::move(vocab), o);
  if (!t.ok()) return Status(t.status()).Prepend(f.where() + ": ");
  return std::unique_ptr<Tokenizer>(std::move(t).value());
}

StatusOr<std::unique_ptr<Tokenizer>> LoadBpe(const GgufFile& f, std::vector<std::string> tokens) {
  BpeVocab vocab;
  const size_t n = tokens.size();
  vocab.tokens = std::move(tokens);
  auto merges = f.GetStringArray("tokenizer.ggml.merges");
  if (!merges.ok()) {
    return InvalidArgumentError(f.where() + ": BPE tokenizer: " + merges.status().message());
  }
  vocab.merges = std::move(merges).value();
  QD_ASSIGN_OR_RETURN(std::vector<int32_t> types, TokenTypes(f, n));
  for (size_t id = 0; id < n; ++id) {
    if (types[id] == static_cast<int32_t>(SpmPieceType::kControl)) {
      vocab.control_tokens.push_back(static_cast<int32_t>(id));
    }
  }
  std::string pre = "default";
  if (f.Find("tokenizer.ggml.pre")) {
    QD_ASSIGN_OR_RETURN(pre, f.GetString("tokenizer.ggml.pre"));
  }
  BpeOptions o;
  QD_ASSIGN_OR_RETURN(o.pretokenizer_pattern, PreTokenizerPatternForGguf(pre));
  // llama.cpp's per-pre-tokenizer defaults: Llama 3 adds BOS and emits
  // whole-word tokens without merging.
  const bool llama3 = pre == "llama-bpe" || pre == "llama3";
  o.ignore_merges = llama3;
  QD_ASSIGN_OR_RETURN(o.bos_id, OptionalId(f, "tokenizer.ggml.bos_token_id", -1));
  QD_ASSIGN_OR_RETURN(o.eos_id, OptionalId(f, "tokenizer.ggml.eos_token_id", -1));
  QD_ASSIGN_OR_RETURN(o.add_bos, f.GetBoolOr("tokenizer.ggml.add_bos_token", llama3));
  QD_ASSIGN_OR_RETURN(o.add_eos, f.GetBoolOr("tokenizer.ggml.add_eos_token", false));
  o.add_bos = o.add_bos && o.bos_id >= 0;
  o.add_eos = o.add_eos && o.eos_id >= 0;
  auto t = BpeTokenizer::Create(std::move(vocab), o);
  if (!t.ok()) return Status(t.status()).Prepend(f.where() + ": ");
  return std::unique_ptr<Tokenizer>(std::move(t).value());
}

}  // namespace

StatusOr<std::string> PreTokenizerPatternForGguf(const std::string& pre) {
  if (pre == "default" || pre == "gpt-2" || pre == "gpt2") return std::string(kGpt2Pattern);
  if (pre == "llama-bpe" || pre == "llama3") return std::string(kLlama3Pattern);
  if (pre == "qwen2") return std::string(kQwen2Pattern);
  return UnimplementedError("GGUF pre-tokenizer '" + pre +
                            "' is not supported (supported: default, gpt-2, llama-bpe, qwen2)");
}

StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromGguf(const GgufFile& file) {
  auto model = file.GetString("tokenizer.ggml.model");
  if (!model.ok()) {
    return InvalidArgumentError(file.where() +
                                " has no usable tokenizer: " + model.status().message());
  }
  auto tokens = file.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok()) {
    return InvalidArgumentError(file.where() +
                                " has no usable tokenizer: " + tokens.status().message());
  }
  if (*model == "llama") return LoadSpm(file, std::move(tokens).value());
  if (*model == "gpt2") return LoadBpe(file, std::move(tokens).value());
  return UnimplementedError(file.where() + ": GGUF tokenizer model '" + *model +
                            "' is not supported (supported: llama (SentencePiece BPE), gpt2 "
                            "(byte-level BPE))");
}

StatusOr<std::vector<std::pair<std::string, gguf::GgufValue>>> TokenizerGgufMetadata(
    const Tokenizer& tokenizer) {
  using gguf::GgufValue;
  std::vector<std::pair<std::string, GgufValue>> kv;
  auto id_value = [](int32_t id) {
    return GgufValue::Uint32(id < 0 ? 0xFFFFFFFFu : static_cast<uint32_t>(id));
  };
  if (const auto* spm = dynamic_cast<const SpmBpeTokenizer*>(&tokenizer)) {
    const SpmVocab& v = spm->vocab();
    const SpmBpeOptions& o = spm->options();
    kv.emplace_back("tokenizer.ggml.model", GgufValue::String("llama"));
    kv.emplace_back("tokenizer.ggml.pre", GgufValue::String("default"));
    kv.emplace_back("tokenizer.ggml.tokens", GgufValue::StringArray(v.pieces));
    kv.emplace_back("tokenizer.ggml.scores", GgufValue::Float32Array(v.scores));
    kv.emplace_back("tokenizer.ggml.token_type", GgufValue::Int32Array(v.types));
    kv.emplace_back("tokenizer.ggml.unknown_token_id", id_value(o.unk_id));
    kv.emplace_back("tokenizer.ggml.add_space_prefix", GgufValue::Bool(o.add_dummy_prefix));
  } else if (const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tokenizer)) {
    const BpeVocab& v = bpe->vocab();
    const std::string& pattern = bpe->options().pretokenizer_pattern;
    std::string pre;
    if (pattern == kGpt2Pattern) {
      pre = "gpt-2";
    } else if (pattern == kLlama3Pattern) {
      pre = "llama-bpe";
    } else if (pattern == kQwen2Pattern) {
      pre = "qwen2";
    } else {
      return UnimplementedError("this tokenizer's pre-tokenizer regex has no llama.cpp name");
    }
    std::vector<int32_t> types(v.tokens.size(), static_cast<int32_t>(SpmPieceType::kNormal));
    for (int32_t id : v.control_tokens) types[id] = static_cast<int32_t>(SpmPieceType::kControl);
    for (const auto& added : v.added_tokens) {
      if (types[added.id] == static_cast<int32_t>(SpmPieceType::kNormal)) {
        types[added.id] = static_cast<int32_t>(SpmPieceType::kUserDefined);
      }
    }
    kv.emplace_back("tokenizer.ggml.model", GgufValue::String("gpt2"));
    kv.emplace_back("tokenizer.ggml.pre", GgufValue::String(pre));
    kv.emplace_back("tokenizer.ggml.tokens", GgufValue::StringArray(v.tokens));
    kv.emplace_back("tokenizer.ggml.token_type", GgufValue::Int32Array(types));
    kv.emplace_back("tokenizer.ggml.merges", GgufValue::StringArray(v.merges));
  } else {
    return UnimplementedError(
        "only native SentencePiece-BPE and byte-level BPE tokenizers can be written to GGUF");
  }
  kv.emplace_back("tokenizer.ggml.bos_token_id", id_value(tokenizer.bos_id()));
  kv.emplace_back("tokenizer.ggml.eos_token_id", id_value(tokenizer.eos_id()));
  kv.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::Bool(tokenizer.add_bos()));
  const auto* spm = dynamic_cast<const SpmBpeTokenizer*>(&tokenizer);
  const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tokenizer);
  kv.emplace_back("tokenizer.ggml.add_eos_token",
                  GgufValue::Bool(spm ? spm->add_eos() : bpe->add_eos()));
  return kv;
}

StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromGgufPath(const std::string& path) {
  QD_ASSIGN_OR_RETURN(gguf::GgufFile file, gguf::ReadGgufFile(path));
  return LoadTokenizerFromGguf(file);
}

}  // namespace quantd::io
