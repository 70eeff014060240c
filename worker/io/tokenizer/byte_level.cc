#include "worker/io/tokenizer/byte_level.h"

#include <array>
#include <unordered_map>

namespace quantd::io {
namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the
// other 68 bytes to U+0100 onwards in byte order.
const std::array<char32_t, 256>& ByteToCodePoint() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) t[b] = printable(b) ? static_cast<char32_t>(b) : next++;
    return t;
  }();
  return table;
}

const std::unordered_map<char32_t, unsigned char>& CodePointToByte() {
  static const auto* table = [] {
    auto* m = new std::unordered_map<char32_t, unsigned char>();
    for (int b = 0; b < 256; ++b) (*m)[ByteToCodePoint()[b]] = static_cast<unsigned char>(b);
    return m;
  }();
  return *table;
}

}  // namespace

int Utf8SequenceLength(unsigned char lead) {
  static constexpr int kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

char32_t NextCodePoint(std::string_view s, size_t* pos) {
  const auto lead = static_cast<unsigned char>(s[*pos]);
  const int len = Utf8SequenceLength(lead);
  if (len == 1 || *pos + len > s.size()) {
    ++*pos;
    return lead;
  }
  char32_t cp = lead & (0xFF >> (len + 1));
  for (int k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(s[*pos + k]);
    if ((c & 0xC0) != 0x80) {
      ++*pos;
      return lead;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  *pos += len;
  return cp;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string BytesToByteLevel(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) AppendUtf8(ByteToCodePoint()[b], &out);
  return out;
}

std::string ByteLevelToBytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const char32_t cp = NextCodePoint(text, &pos);
    auto it = CodePointToByte().find(cp);
    if (it != CodePointToByte().end()) {
      out.push_back(static_cast<char>(it->second));
    } else {
      out.append(text.substr(start, pos - start));
    }
  }
  return out;
}

}  // namespace quantd::io
