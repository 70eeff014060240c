#include "worker/io/tokenizer/hf_tokenizer_files.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "worker/io/tokenizer/bpe_tokenizer.h"
#include "worker/io/tokenizer/sentencepiece_model.h"
#include "worker/io/tokenizer/spm_bpe_tokenizer.h"

namespace quantd::io {
namespace {

using nlohmann::json;

json TextOr(const std::vector<std::string>& vocab, int32_t id) {
  if (id < 0 || id >= static_cast<int32_t>(vocab.size())) return nullptr;
  return vocab[id];
}

// tokenizer_config.json: what Transformers' tokenizer classes read besides
// the vocabulary file.
std::string TokenizerConfig(const std::vector<std::string>& vocab, const Tokenizer& tokenizer,
                            bool add_eos, std::optional<int32_t> unk_id, const char* cls) {
  json c = json::object();
  c["tokenizer_class"] = cls;
  c["add_bos_token"] = tokenizer.add_bos();
  c["add_eos_token"] = add_eos;
  c["bos_token"] = TextOr(vocab, tokenizer.bos_id());
  c["eos_token"] = TextOr(vocab, tokenizer.eos_id());
  if (unk_id) c["unk_token"] = TextOr(vocab, *unk_id);
  c["clean_up_tokenization_spaces"] = false;
  return c.dump(2) + "\n";
}

std::string SentencePieceFile(const SpmBpeTokenizer& spm) {
  SentencePieceModel m;
  m.vocab = spm.vocab();
  m.model_type = 2;  // BPE
  m.byte_fallback = std::any_of(m.vocab.types.begin(), m.vocab.types.end(), [](int32_t t) {
    return t == static_cast<int32_t>(SpmPieceType::kByte);
  });
  m.unk_id = spm.options().unk_id;
  m.bos_id = spm.bos_id();
  m.eos_id = spm.eos_id();
  m.pad_id = -1;
  m.normalizer_name = "identity";
  m.add_dummy_prefix = spm.options().add_dummy_prefix;
  m.remove_extra_whitespaces = false;
  m.escape_whitespaces = true;
  return SerializeSentencePieceModel(m);
}

StatusOr<std::string> TokenizerJson(const BpeTokenizer& bpe) {
  const BpeVocab& v = bpe.vocab();
  const BpeOptions& o = bpe.options();
  if (o.normalizer) {
    return UnimplementedError("a BPE tokenizer with a normalizer has no tokenizer.json form here");
  }
  json vocab = json::object();
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    // A repeated token text keeps its first id, as Hugging Face's does.
    if (!vocab.contains(v.tokens[id])) vocab[v.tokens[id]] = id;
  }
  json merges = json::array();
  for (const std::string& m : v.merges) {
    const size_t space = m.find(' ');
    if (space == std::string::npos)
      return InvalidArgumentError("BPE merge '" + m + "' has no space");
    merges.push_back(json::array({m.substr(0, space), m.substr(space + 1)}));
  }
  auto added = [&](int32_t id, bool lstrip, bool rstrip, bool special) {
    return json{{"id", id},          {"content", v.tokens[id]}, {"single_word", false},
                {"lstrip", lstrip},  {"rstrip", rstrip},        {"normalized", false},
                {"special", special}};
  };
  std::vector<json> added_tokens;
  std::vector<int32_t> seen;
  for (int32_t id : v.control_tokens) {
    added_tokens.push_back(added(id, false, false, true));
    seen.push_back(id);
  }
  for (const BpeAddedToken& t : v.added_tokens) {
    if (std::find(seen.begin(), seen.end(), t.id) != seen.end()) continue;
    added_tokens.push_back(added(t.id, t.lstrip, t.rstrip, false));
  }
  std::sort(added_tokens.begin(), added_tokens.end(),
            [](const json& a, const json& b) { return a["id"] < b["id"]; });

  json post;
  if (bpe.add_bos() || bpe.add_eos()) {
    json single = json::array(), pair = json::array(), special = json::object();
    auto mark = [&](int32_t id) {
      const std::string& text = v.tokens[id];
      special[text] = {{"id", text}, {"ids", {id}}, {"tokens", {text}}};
      return json{{"SpecialToken", {{"id", text}, {"type_id", 0}}}};
    };
    for (int seq = 0; seq < 2; ++seq) {
      json& out = seq == 0 ? single : pair;
      for (int part = 0; part <= seq; ++part) {
        if (bpe.add_bos()) out.push_back(mark(bpe.bos_id()));
        out.push_back({{"Sequence", {{"id", part == 0 ? "A" : "B"}, {"type_id", part}}}});
        if (bpe.add_eos()) out.push_back(mark(bpe.eos_id()));
      }
    }
    post = {{"type", "TemplateProcessing"},
            {"single", single},
            {"pair", pair},
            {"special_tokens", special}};
  } else {
    post = {{"type", "ByteLevel"},
            {"add_prefix_space", true},
            {"trim_offsets", false},
            {"use_regex", true}};
  }
  json root = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added_tokens},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", o.pretokenizer_pattern}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"},
           {"add_prefix_space", o.add_prefix_space},
           {"trim_offsets", true},
           {"use_regex", false}}}}}},
      {"post_processor", post},
      {"decoder",
       {{"type", "ByteLevel"},
        {"add_prefix_space", true},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", o.ignore_merges},
        {"vocab", vocab},
        {"merges", merges}}},
  };
  return root.dump() + "\n";
}

}  // namespace

StatusOr<std::vector<std::pair<std::string, std::string>>> HfTokenizerFiles(
    const Tokenizer& tokenizer) {
  std::vector<std::pair<std::string, std::string>> files;
  if (const auto* spm = dynamic_cast<const SpmBpeTokenizer*>(&tokenizer)) {
    files.emplace_back("tokenizer.model", SentencePieceFile(*spm));
    files.emplace_back("tokenizer_config.json",
                       TokenizerConfig(spm->vocab().pieces, tokenizer, spm->add_eos(),
                                       spm->options().unk_id, "LlamaTokenizer"));
    return files;
  }
  if (const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tokenizer)) {
    QD_ASSIGN_OR_RETURN(std::string text, TokenizerJson(*bpe));
    files.emplace_back("tokenizer.json", std::move(text));
    files.emplace_back("tokenizer_config.json",
                       TokenizerConfig(bpe->vocab().tokens, tokenizer, bpe->add_eos(), std::nullopt,
                                       "PreTrainedTokenizerFast"));
    return files;
  }
  return UnimplementedError(
      "only native SentencePiece-BPE and byte-level BPE tokenizers have Hugging Face files here");
}

}  // namespace quantd::io
