// Writes the Hugging Face tokenizer files that quantd makes for a GGUF
// model (worker/io/tokenizer/hf_tokenizer_files.h) for a GGUF vocabulary,
// for the peer check in hf_tokenizer_peer_test.sh.
//
//   hf_tokenizer_files VOCAB.gguf OUT_DIR
#include <filesystem>
#include <fstream>
#include <iostream>

#include "worker/io/tokenizer/gguf_tokenizer.h"
#include "worker/io/tokenizer/hf_tokenizer_files.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: hf_tokenizer_files VOCAB.gguf OUT_DIR\n";
    return 2;
  }
  auto tokenizer = quantd::io::LoadTokenizerFromGgufPath(argv[1]);
  if (!tokenizer.ok()) {
    std::cerr << tokenizer.status().message() << "\n";
    return 1;
  }
  auto files = quantd::io::HfTokenizerFiles(**tokenizer);
  if (!files.ok()) {
    std::cerr << files.status().message() << "\n";
    return 1;
  }
  std::filesystem::create_directories(argv[2]);
  for (const auto& [name, text] : *files) {
    std::ofstream out(std::filesystem::path(argv[2]) / name, std::ios::binary);
    out << text;
    if (!out) {
      std::cerr << "cannot write " << name << "\n";
      return 1;
    }
  }
  return 0;
}
