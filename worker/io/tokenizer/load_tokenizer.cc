#include "worker/io/tokenizer/load_tokenizer.h"

#include <sys/stat.h>

#include <fstream>

#include "worker/common/bounded_json.h"
#include "worker/io/gguf/gguf_model_dir.h"
#include "worker/io/tokenizer/gguf_tokenizer.h"
#include "worker/io/tokenizer/sentencepiece_model.h"
#include "worker/io/tokenizer/special_tokens.h"
#include "worker/io/tokenizer/tokenizer_json.h"

namespace quantd::io {
namespace {

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePiece(const std::string& dir,
                                                       const SpecialTokenConfig& special) {
  NativeSentencePieceOptions options;
  options.add_bos = special.add_bos;
  options.add_eos = special.add_eos;
  options.bos_piece = special.bos_token;
  options.eos_piece = special.eos_token;
  options.bos_id = special.bos_token_id;
  options.eos_id = special.eos_token_id;
  QD_ASSIGN_OR_RETURN(auto tok, LoadNativeSentencePiece(dir + "/tokenizer.model", options));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromDir(const std::string& dir) {
  // A GGUF read as a model directory (gguf_model_dir.h): its own tokenizer,
  // as llama.cpp reads it, whatever files were made beside it for exports.
  if (gguf::HasGgufModel(dir)) {
    return LoadTokenizerFromGgufPath(dir + "/" + gguf::kGgufModelFileName);
  }
  QD_ASSIGN_OR_RETURN(SpecialTokenConfig special, ReadSpecialTokenConfig(dir));
  if (IsRegularFile(dir + "/tokenizer.model")) return LoadSentencePiece(dir, special);
  const std::string json_path = dir + "/tokenizer.json";
  if (IsRegularFile(json_path)) {
    std::ifstream in(json_path, std::ios::binary);
    // Never read whole: ParseTokenizerJson refuses what is past the limit.
    const std::string text = ReadAtMost(in, json_limits::kTokenizerJson);
    if (in.bad()) return DataLossError("reading " + json_path + " failed");
    return ParseTokenizerJson(text, special, json_path);
  }
  return NotFoundError("model directory " + dir +
                       " has no tokenizer.model (SentencePiece) or tokenizer.json (BPE)");
}

}  // namespace quantd::io
