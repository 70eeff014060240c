#include "worker/io/tokenizer/pretokenizer.h"

#include <re2/re2.h>

#include "worker/io/tokenizer/byte_level.h"

namespace quantd::io {

const char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char kLlama3Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char kQwen2Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

// Unicode White_Space, the set Oniguruma's and llama.cpp's \s use.
constexpr char kWhitespaceItems[] =
    R"(\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

bool IsWhitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

}  // namespace

StatusOr<std::string> TranslatePatternForRe2(std::string_view pattern, bool* whitespace_group) {
  *whitespace_group = false;
  constexpr std::string_view kIdiom = R"(\s+(?!\S)|\s+)";
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (!in_class && pattern.substr(i, kIdiom.size()) == kIdiom) {
      if (*whitespace_group) {
        return UnimplementedError("pre-tokenizer pattern uses \\s+(?!\\S) more than once");
      }
      // RE2 numbers groups by their opening parenthesis; the idiom is the
      // last alternative in every known pattern, so make it group 1 by
      // turning earlier capturing groups into non-capturing ones below.
      out += std::string("([") + kWhitespaceItems + "]+)";
      *whitespace_group = true;
      i += kIdiom.size() - 1;
      continue;
    }
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char n = pattern[i + 1];
      if (n == 's') {
        out += in_class ? std::string(kWhitespaceItems) : std::string("[") + kWhitespaceItems + "]";
      } else if (n == 'S') {
        if (in_class) return UnimplementedError("\\S inside a character class is not supported");
        out += std::string("[^") + kWhitespaceItems + "]";
      } else {
        out += c;
        out += n;
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' or '^]' right after '[' is literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') {
        out += '^';
        ++i;
      }
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') {
        out += ']';
        ++i;
      }
      continue;
    }
    if (c == ']' && in_class) {
      in_class = false;
      out += c;
      continue;
    }
    if (c == '(' && !in_class && i + 1 < pattern.size()) {
      if (pattern[i + 1] == '?') {
        if (i + 2 < pattern.size() &&
            (pattern[i + 2] == '=' || pattern[i + 2] == '!' || pattern[i + 2] == '<')) {
          return UnimplementedError(
              "pre-tokenizer pattern uses a lookaround other than "
              "\\s+(?!\\S)|\\s+: " +
              std::string(pattern));
        }
        out += c;
        continue;
      }
      out += "(?:";  // keep group 1 for the whitespace idiom
      continue;
    }
    out += c;
  }
  return out;
}

RegexPreTokenizer::~RegexPreTokenizer() = default;

StatusOr<std::unique_ptr<RegexPreTokenizer>> RegexPreTokenizer::Create(std::string_view pattern) {
  if (pattern.size() > kMaxPreTokenizerPatternLength) {
    return InvalidArgumentError("pre-tokenizer pattern is " + std::to_string(pattern.size()) +
                                " characters; at most " +
                                std::to_string(kMaxPreTokenizerPatternLength));
  }
  std::unique_ptr<RegexPreTokenizer> p(new RegexPreTokenizer());
  QD_ASSIGN_OR_RETURN(p->translated_, TranslatePatternForRe2(pattern, &p->has_whitespace_group_));
  RE2::Options options;
  options.set_encoding(RE2::Options::EncodingUTF8);
  options.set_log_errors(false);
  options.set_max_mem(kPreTokenizerRegexMaxMem);
  p->re_ = std::make_unique<RE2>(p->translated_, options);
  if (!p->re_->ok()) {
    return InvalidArgumentError("pre-tokenizer pattern does not compile: " + p->re_->error() +
                                " (pattern " + std::string(pattern) + ")");
  }
  return p;
}

std::vector<std::string_view> RegexPreTokenizer::Split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  re2::StringPiece input(text.data(), text.size());
  re2::StringPiece groups[2];
  const int n_groups = has_whitespace_group_ ? 2 : 1;
  size_t pos = 0;
  while (pos < text.size()) {
    if (!re_->Match(input, pos, text.size(), RE2::UNANCHORED, groups, n_groups)) {
      pieces.push_back(text.substr(pos));
      break;
    }
    const size_t start = static_cast<size_t>(groups[0].data() - text.data());
    size_t end = start + groups[0].size();
    if (start > pos) pieces.push_back(text.substr(pos, start - pos));
    if (end == start) {
      // An empty match: step over one character so the scan advances.
      size_t next = start;
      NextCodePoint(text, &next);
      pieces.push_back(text.substr(start, next - start));
      pos = next;
      continue;
    }
    if (has_whitespace_group_ && groups[1].data() != nullptr && end < text.size()) {
      // `\s+(?!\S)`: the run is followed by a non-space; give back its last
      // character unless that would leave nothing (then `\s+` matched one).
      size_t last = start, cursor = start, count = 0;
      while (cursor < end) {
        last = cursor;
        NextCodePoint(text, &cursor);
        ++count;
      }
      size_t after = end;
      const char32_t next_cp = NextCodePoint(text, &after);
      if (count >= 2 && !IsWhitespace(next_cp)) end = last;
    }
    pieces.push_back(text.substr(start, end - start));
    pos = end;
  }
  return pieces;
}

}  // namespace quantd::io
