// render_chat_template TEMPLATE_FILE CONTEXT_JSON_FILE: prints the
// rendering to stdout, or the error to stderr and exits 1.
#include <fstream>
#include <iostream>
#include <sstream>

#include "worker/io/chat_template/chat_template.h"

namespace {
bool ReadFile(const char* path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: render_chat_template TEMPLATE_FILE CONTEXT_JSON_FILE\n";
    return 2;
  }
  std::string source, context;
  if (!ReadFile(argv[1], &source) || !ReadFile(argv[2], &context)) {
    std::cerr << "cannot read the inputs\n";
    return 2;
  }
  // Ordered, so that dicts keep the file's key order as transformers does.
  const nlohmann::ordered_json ctx =
      nlohmann::ordered_json::parse(context, nullptr, /*allow_exceptions=*/false);
  if (ctx.is_discarded()) {
    std::cerr << "context is not JSON\n";
    return 2;
  }
  auto t = quantd::io::ChatTemplate::Parse(source);
  if (!t.ok()) {
    std::cerr << t.status() << "\n";
    return 1;
  }
  auto out = t->Render(ctx);
  if (!out.ok()) {
    std::cerr << out.status() << "\n";
    return 1;
  }
  std::cout << *out;
  return 0;
}
