// llama.cpp's tokenizer test vectors (tests/golden/tokenizers): texts each
// followed by "\n__ggml_vocab_test__\n" in <vocab>.gguf.inp, and one line of
// ids per text in <vocab>.gguf.out (made with Hugging Face's tokenizers,
// special tokens not added). For tests.
#ifndef QUANTD_WORKER_IO_TOKENIZER_VOCAB_CASES_H_
#define QUANTD_WORKER_IO_TOKENIZER_VOCAB_CASES_H_

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace quantd::io {

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

inline std::string ReadVocabFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<VocabCase> ReadVocabCases(const std::string& gguf_path) {
  const std::string inp = ReadVocabFile(gguf_path + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t end = inp.find(sep, pos);
    if (end == std::string::npos) break;
    texts.push_back(inp.substr(pos, end - pos));
    pos = end + sep.size();
  }
  std::istringstream out(ReadVocabFile(gguf_path + ".out"));
  std::vector<VocabCase> cases;
  std::string line;
  for (const auto& text : texts) {
    std::getline(out, line);
    std::istringstream ids(line);
    VocabCase c{text, {}};
    int32_t id;
    while (ids >> id) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_TOKENIZER_VOCAB_CASES_H_
