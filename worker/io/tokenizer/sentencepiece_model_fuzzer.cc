// Fuzzes the native tokenizer.model reader (a protobuf wire-format parser)
// and the SentencePiece BPE tokenizer it builds: any bytes give a Status or
// a tokenizer that encodes and decodes a fixed text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "worker/io/tokenizer/sentencepiece_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quantd::io;
  auto model = ParseSentencePieceModel(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.model");
  if (!model.ok()) {
    if (model.status().code() != quantd::StatusCode::kDataLoss) __builtin_trap();
    return 0;
  }
  auto tok = NativeSentencePieceTokenizer(*model, {}, "fuzz.model");
  if (!tok.ok()) return 0;
  const auto ids = (*tok)->Encode("Hello world, it's 12345!\n\n  x\xC3\xA9 \xF0\x9F\x98\x80");
  (void)(*tok)->Decode(ids);
  return 0;
}
