// Prints the OpenAPI document quantd serves at /openapi.json.
#include <cstdio>
#include <string>

#include "server/openapi/openapi.h"

int main(int argc, char** argv) {
  if (argc != 1) {
    std::fprintf(stderr, "usage: %s (prints quantd's OpenAPI document)\n", argv[0]);
    return 2;
  }
  const std::string document = quantd::openapi::QuantizationServiceDocument();
  std::fwrite(document.data(), 1, document.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
