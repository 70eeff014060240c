#include "worker/common/name_pattern.h"

#include <re2/re2.h>

#include <bitset>
#include <cctype>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace quantd {
namespace {

// One element of a parsed glob: a single character (literal, '?' or a
// bracket expression) or '*'.
struct GlobToken {
  bool star = false;
  std::bitset<256> chars;  // which bytes a non-star token matches
};

bool InClass(std::string_view name, unsigned char c) {
  if (name == "alpha") return std::isalpha(c);
  if (name == "digit") return std::isdigit(c);
  if (name == "alnum") return std::isalnum(c);
  if (name == "upper") return std::isupper(c);
  if (name == "lower") return std::islower(c);
  if (name == "space") return std::isspace(c);
  if (name == "blank") return c == ' ' || c == '\t';
  if (name == "punct") return std::ispunct(c);
  if (name == "print") return std::isprint(c);
  if (name == "graph") return std::isgraph(c);
  if (name == "cntrl") return std::iscntrl(c);
  if (name == "xdigit") return std::isxdigit(c);
  return false;
}

bool KnownClass(std::string_view name) {
  for (const char* k : {"alpha", "digit", "alnum", "upper", "lower", "space", "blank", "punct",
                        "print", "graph", "cntrl", "xdigit"}) {
    if (name == k) return true;
  }
  return false;
}

// Parses the bracket expression starting at pattern[i] == '['. Returns the
// index after its ']' and fills `t`, or nullopt when it is unterminated
// (fnmatch then takes the '[' literally). `bad` is set for a pattern that
// can match nothing (an unknown [:class:]).
std::optional<size_t> ParseBracket(std::string_view p, size_t i, GlobToken* t, bool* bad) {
  size_t j = i + 1;
  bool negate = false;
  if (j < p.size() && (p[j] == '!' || p[j] == '^')) {
    negate = true;
    ++j;
  }
  std::bitset<256> set;
  bool first = true;
  while (true) {
    if (j >= p.size()) return std::nullopt;
    unsigned char c = static_cast<unsigned char>(p[j]);
    if (c == ']' && !first) {
      ++j;
      break;
    }
    first = false;
    if (c == '[' && j + 1 < p.size() && p[j + 1] == ':') {
      const size_t end = p.find(":]", j + 2);
      if (end == std::string_view::npos) return std::nullopt;
      const std::string_view cls = p.substr(j + 2, end - (j + 2));
      if (!KnownClass(cls)) *bad = true;
      for (int b = 0; b < 256; ++b) {
        if (InClass(cls, static_cast<unsigned char>(b))) set.set(b);
      }
      j = end + 2;
      continue;
    }
    if (c == '\\') {
      if (j + 1 >= p.size()) return std::nullopt;
      c = static_cast<unsigned char>(p[++j]);
    }
    ++j;
    // A range "c-d" unless the '-' is last before ']'.
    if (j + 1 < p.size() && p[j] == '-' && p[j + 1] != ']') {
      unsigned char hi = static_cast<unsigned char>(p[j + 1]);
      j += 2;
      if (hi == '\\') {
        if (j >= p.size()) return std::nullopt;
        hi = static_cast<unsigned char>(p[j++]);
      }
      for (int b = c; b <= hi; ++b) set.set(b);
      continue;
    }
    set.set(c);
  }
  t->chars = negate ? ~set : set;
  return j;
}

// The tokens of a glob, or nullopt for a pattern that matches nothing.
std::optional<std::vector<GlobToken>> ParseGlob(std::string_view p) {
  std::vector<GlobToken> tokens;
  tokens.reserve(p.size());
  for (size_t i = 0; i < p.size();) {
    GlobToken t;
    const char c = p[i];
    if (c == '*') {
      t.star = true;
      ++i;
      if (tokens.empty() || !tokens.back().star) tokens.push_back(t);
      continue;
    }
    if (c == '?') {
      t.chars.set();
      ++i;
    } else if (c == '[') {
      bool bad = false;
      if (std::optional<size_t> next = ParseBracket(p, i, &t, &bad)) {
        if (bad) return std::nullopt;
        i = *next;
      } else {
        t.chars.set(static_cast<unsigned char>('['));
        ++i;
      }
    } else if (c == '\\') {
      if (i + 1 >= p.size()) return std::nullopt;  // a trailing '\' matches nothing
      t.chars.set(static_cast<unsigned char>(p[i + 1]));
      i += 2;
    } else {
      t.chars.set(static_cast<unsigned char>(c));
      ++i;
    }
    tokens.push_back(t);
  }
  return tokens;
}

std::string Shown(std::string_view s) {
  constexpr size_t kShown = 80;
  return s.size() <= kShown ? std::string(s) : std::string(s.substr(0, kShown)) + "...";
}

Status LengthError(std::string_view what, size_t size) {
  return InvalidArgumentError(std::string(what) + " is " + std::to_string(size) +
                              " characters; at most " + std::to_string(kMaxPatternLength));
}

std::unique_ptr<RE2> CompileRegex(std::string_view regex) {
  RE2::Options options;
  options.set_encoding(RE2::Options::EncodingUTF8);
  options.set_log_errors(false);
  options.set_max_mem(kPatternRegexMaxMem);
  return std::make_unique<RE2>(re2::StringPiece(regex.data(), regex.size()), options);
}

// Compiled regexes by pattern, shared by every thread. Configs hold at most
// kMaxNamePatterns each; the cache is emptied rather than grown past a few
// configs' worth.
std::shared_ptr<const RE2> CachedRegex(std::string_view regex) {
  constexpr size_t kMaxCached = 4 * kMaxNamePatterns;
  static std::mutex mu;
  static auto* cache = new std::unordered_map<std::string, std::shared_ptr<const RE2>>();
  std::string key(regex);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache->find(key);
    if (it != cache->end()) return it->second;
  }
  std::shared_ptr<const RE2> re = CompileRegex(regex);
  std::lock_guard<std::mutex> lock(mu);
  if (cache->size() >= kMaxCached) cache->clear();
  cache->emplace(std::move(key), re);
  return re;
}

}  // namespace

bool GlobMatch(std::string_view pattern, std::string_view name) {
  const std::optional<std::vector<GlobToken>> tokens = ParseGlob(pattern);
  if (!tokens) return false;
  const std::vector<GlobToken>& t = *tokens;
  // Greedy with one backtrack point: every token but '*' takes exactly one
  // character, so only the latest '*' ever needs to take more.
  size_t p = 0, n = 0;
  size_t star = std::string_view::npos, star_n = 0;
  while (n < name.size()) {
    if (p < t.size() && t[p].star) {
      star = p++;
      star_n = n;
    } else if (p < t.size() && t[p].chars.test(static_cast<unsigned char>(name[n]))) {
      ++p;
      ++n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++star_n;
    } else {
      return false;
    }
  }
  while (p < t.size() && t[p].star) ++p;
  return p == t.size();
}

Status CheckGlob(std::string_view pattern) {
  if (pattern.size() > kMaxPatternLength) return LengthError("the glob", pattern.size());
  return OkStatus();
}

Status CheckRegex(std::string_view regex) {
  if (regex.size() > kMaxPatternLength) return LengthError("the regular expression", regex.size());
  const std::shared_ptr<const RE2> re = CachedRegex(regex);
  if (!re->ok()) {
    std::string why = re->error();
    if (re->error_code() == RE2::ErrorPatternTooLarge) {
      why += "; its program exceeds " + std::to_string(kPatternRegexMaxMem >> 10) + " KiB";
    }
    return InvalidArgumentError("'" + Shown(regex) + "' is not a valid regular expression (RE2: " +
                                why + ")");
  }
  return OkStatus();
}

bool RegexMatchesPrefix(std::string_view regex, std::string_view name) {
  if (regex.size() > kMaxPatternLength) return false;
  const std::shared_ptr<const RE2> re = CachedRegex(regex);
  if (!re->ok()) return false;
  return re->Match(re2::StringPiece(name.data(), name.size()), 0, name.size(), RE2::ANCHOR_START,
                   nullptr, 0);
}

}  // namespace quantd
