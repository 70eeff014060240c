#include "server/http/path_template.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace quantd::server::http {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool IsFieldPath(absl::string_view s) {
  if (s.empty()) return false;
  for (absl::string_view part : absl::StrSplit(s, '.')) {
    if (part.empty() || absl::ascii_isdigit(part[0])) return false;
    for (char c : part) {
      if (!absl::ascii_isalnum(c) && c != '_') return false;
    }
  }
  return true;
}

quantd::Status BadTemplate(absl::string_view text, absl::string_view why) {
  return quantd::InvalidArgumentError(absl::StrCat("path template \"", text, "\": ", why));
}

}  // namespace

std::optional<std::string> PercentDecode(absl::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (in.size() - i < 3) return std::nullopt;
      int hi = HexValue(in[i + 1]);
      int lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

quantd::StatusOr<SplitPath> SplitRequestPath(absl::string_view raw_path) {
  if (raw_path.empty() || raw_path[0] != '/') {
    return quantd::InvalidArgumentError("the request path must start with '/'");
  }
  SplitPath out;
  std::vector<absl::string_view> raw = absl::StrSplit(raw_path.substr(1), '/');
  absl::string_view& last = raw.back();
  std::optional<absl::string_view> raw_verb;
  if (size_t colon = last.rfind(':'); colon != absl::string_view::npos) {
    raw_verb = last.substr(colon + 1);
    last = last.substr(0, colon);
  }
  auto decode = [](absl::string_view s) -> quantd::StatusOr<std::string> {
    std::optional<std::string> decoded = PercentDecode(s, /*plus_is_space=*/false);
    if (!decoded.has_value()) {
      return quantd::InvalidArgumentError("the request path has a malformed %-escape");
    }
    for (char c : *decoded) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        return quantd::InvalidArgumentError("the request path holds a control character");
      }
    }
    return *decoded;
  };
  for (absl::string_view segment : raw) {
    QD_ASSIGN_OR_RETURN(std::string decoded, decode(segment));
    out.segments.push_back(std::move(decoded));
  }
  if (raw_verb.has_value()) {
    QD_ASSIGN_OR_RETURN(out.verb, decode(*raw_verb));
  }
  return out;
}

quantd::StatusOr<PathTemplate> PathTemplate::Parse(absl::string_view text) {
  PathTemplate t;
  t.text_ = std::string(text);
  if (text.empty() || text[0] != '/') return BadTemplate(text, "must start with '/'");
  absl::string_view rest = text.substr(1);
  // The verb follows the last ':' outside braces.
  size_t close = rest.rfind('}');
  size_t colon = rest.rfind(':');
  if (colon != absl::string_view::npos && (close == absl::string_view::npos || colon > close)) {
    t.verb_ = std::string(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
    if (t.verb_.empty()) return BadTemplate(text, "empty verb");
  }
  size_t i = 0;
  auto parse_segment = [&](absl::string_view s) -> quantd::Status {
    if (s == "**") return BadTemplate(text, "\"**\" is not supported");
    if (s.empty()) return BadTemplate(text, "empty segment");
    if (s == "*") {
      t.segments_.push_back({"", true});
    } else {
      if (s.find_first_of("{}=*:") != absl::string_view::npos) {
        return BadTemplate(text, absl::StrCat("bad literal segment \"", s, "\""));
      }
      t.segments_.push_back({std::string(s), false});
    }
    return quantd::OkStatus();
  };
  while (i < rest.size()) {
    if (rest[i] == '{') {
      size_t end = rest.find('}', i);
      if (end == absl::string_view::npos) return BadTemplate(text, "unclosed '{'");
      absl::string_view inner = rest.substr(i + 1, end - i - 1);
      absl::string_view field = inner, pattern = "*";
      if (size_t eq = inner.find('='); eq != absl::string_view::npos) {
        field = inner.substr(0, eq);
        pattern = inner.substr(eq + 1);
      }
      if (!IsFieldPath(field)) return BadTemplate(text, absl::StrCat("bad field \"", field, "\""));
      Variable v;
      v.field = std::string(field);
      v.first = t.segments_.size();
      for (absl::string_view s : absl::StrSplit(pattern, '/')) {
        QD_RETURN_IF_ERROR(parse_segment(s));
      }
      v.count = t.segments_.size() - v.first;
      for (const Variable& other : t.variables_) {
        if (other.field == v.field) return BadTemplate(text, "a field bound twice");
      }
      t.variables_.push_back(std::move(v));
      i = end + 1;
    } else {
      size_t end = rest.find('/', i);
      if (end == absl::string_view::npos) end = rest.size();
      absl::string_view s = rest.substr(i, end - i);
      if (s.find('{') != absl::string_view::npos) {
        return BadTemplate(text, "a variable must be a whole segment");
      }
      QD_RETURN_IF_ERROR(parse_segment(s));
      i = end;
    }
    if (i < rest.size()) {
      if (rest[i] != '/') return BadTemplate(text, "a variable must be a whole segment");
      ++i;
      if (i == rest.size()) return BadTemplate(text, "trailing '/'");
    }
  }
  if (t.segments_.empty()) return BadTemplate(text, "no segments");
  return t;
}

std::optional<PathTemplate::Matched> PathTemplate::Match(const SplitPath& path) const {
  if (path.verb != verb_ || path.segments.size() != segments_.size()) return std::nullopt;
  for (size_t i = 0; i < segments_.size(); ++i) {
    if (!segments_[i].wildcard && segments_[i].literal != path.segments[i]) return std::nullopt;
  }
  Matched m;
  for (const Variable& v : variables_) {
    std::vector<absl::string_view> parts;
    bool bad = false;
    for (size_t i = v.first; i < v.first + v.count; ++i) {
      const std::string& s = path.segments[i];
      if (segments_[i].wildcard && (s.empty() || absl::StrContains(s, '/'))) bad = true;
      parts.push_back(s);
    }
    std::string value = absl::StrJoin(parts, "/");
    if (bad) {
      m.violations.push_back(
          {v.field, absl::StrCat("the path segment bound to ", v.field,
                                 " must be non-empty and must not contain '/' (not even as %2F)")});
    }
    m.bindings.push_back({v.field, std::move(value)});
  }
  return m;
}

std::vector<std::string> PathTemplate::Fields() const {
  std::vector<std::string> out;
  for (const Variable& v : variables_) out.push_back(v.field);
  return out;
}

}  // namespace quantd::server::http
