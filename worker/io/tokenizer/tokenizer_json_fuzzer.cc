// libFuzzer entry point for the tokenizer.json parser: parse, then encode and
// decode a fixed text with whatever tokenizer the input describes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "worker/io/tokenizer/tokenizer_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quantd::io;
  auto tok =
      ParseTokenizerJson(std::string(reinterpret_cast<const char*>(data), size), {}, "fuzz.json");
  if (!tok.ok()) return 0;
  const auto ids =
      (*tok)->Encode("Hello world, it's 12345!\n\n  x\xC3\xA9<|endoftext|> \xF0\x9F\x98\x80");
  (void)(*tok)->Decode(ids);
  return 0;
}
