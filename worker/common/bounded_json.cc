#include "worker/common/bounded_json.h"

#include <algorithm>

namespace quantd {

int JsonNestingDepth(std::string_view text) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      // Never below 0: a stray closer must not hide the openers after it.
      --depth;
    }
  }
  return deepest;
}

std::string ReadAtMost(std::istream& in, size_t max_bytes) {
  constexpr size_t kChunk = size_t{1} << 20;
  std::string out;
  while (out.size() <= max_bytes && in) {
    const size_t want = std::min(kChunk, max_bytes + 1 - out.size());
    const size_t have = out.size();
    out.resize(have + want);
    in.read(out.data() + have, static_cast<std::streamsize>(want));
    out.resize(have + static_cast<size_t>(in.gcount()));
  }
  return out;
}

Status CheckJsonBounds(std::string_view text, const JsonBounds& bounds, const std::string& what,
                       StatusCode code) {
  if (text.size() > bounds.max_bytes) {
    return Status(code, what + " is " + std::to_string(text.size()) + " bytes; at most " +
                            std::to_string(bounds.max_bytes));
  }
  const int depth = JsonNestingDepth(text);
  if (depth > bounds.max_depth) {
    return Status(code, what + " nests " + std::to_string(depth) + " levels deep; at most " +
                            std::to_string(bounds.max_depth));
  }
  return OkStatus();
}

}  // namespace quantd
