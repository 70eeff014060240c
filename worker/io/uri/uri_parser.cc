#include "worker/io/uri/uri_parser.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace quantd::io {
namespace {

// A ref with slashes is short (refs/convert/parquet, refs/pr/12).
constexpr size_t kMaxHubRevisionBytes = 255;
constexpr size_t kMaxHubRevisionDepth = 8;

constexpr char kForms[] =
    "expected file:///abs/path, hf://ORG/NAME[@REV], hf://datasets/ORG/NAME[@REV][?QUERY], "
    "http(s)://host/path or s3://BUCKET/KEY";

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

Status Invalid(const std::string& uri, const std::string& why) {
  return Status(StatusCode::kInvalidArgument, QuoteUri(uri) + " " + why, "INVALID_URI");
}

Status Escapes(const std::string& uri) {
  return Status(StatusCode::kPermissionDenied,
                QuoteUri(uri) + " contains a '.' or '..' path segment (also when percent-encoded)",
                "URI_NOT_ALLOWED");
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Decodes one path segment (no '/' in it). An encoded '/' would make one
// segment two after decoding, so it is refused rather than decoded.
StatusOr<std::string> DecodeSegment(const std::string& raw, const std::string& uri) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(raw[i]);
    if (c == '%') {
      const int hi = i + 2 < raw.size() ? HexValue(raw[i + 1]) : -1;
      const int lo = hi >= 0 ? HexValue(raw[i + 2]) : -1;
      if (lo < 0) return Invalid(uri, "has a malformed %-escape");
      c = static_cast<unsigned char>(hi * 16 + lo);
      i += 2;
      if (c == '/') return Invalid(uri, "encodes a '/' (%2F) inside a path segment");
    }
    if (c == 0) return Invalid(uri, "contains a NUL byte");
    if (c < 0x20 || c == 0x7f) return Invalid(uri, "contains a control character");
    out.push_back(static_cast<char>(c));
  }
  return out;
}

// Decodes every segment of `raw` ("/a/b%20c"), drops empty ones and refuses
// '.' and '..'. Returns "/a/b c" ("/" when there is no segment).
StatusOr<std::string> DecodePath(const std::string& raw, const std::string& uri) {
  std::string path;
  size_t start = 0;
  while (start <= raw.size()) {
    size_t end = raw.find('/', start);
    if (end == std::string::npos) end = raw.size();
    QD_ASSIGN_OR_RETURN(std::string segment, DecodeSegment(raw.substr(start, end - start), uri));
    if (segment == "." || segment == "..") return Escapes(uri);
    if (!segment.empty()) path += "/" + segment;
    start = end + 1;
  }
  if (path.empty()) path = "/";
  if (path.size() > kMaxUriPathBytes) {
    return Invalid(uri, "has a path longer than " + std::to_string(kMaxUriPathBytes) + " bytes");
  }
  return path;
}

bool IsHubName(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 96) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.';
  });
}

// A Hub revision: a branch, tag or commit, or a ref with slashes such as the
// Hub's Parquet conversion `refs/convert/parquet`, written as is or with
// %2F as huggingface_hub writes it. Each segment is a Hub name, so the ref
// file the cache keeps for it (refs/<revision>) stays inside refs/.
StatusOr<std::string> ParseHubRevision(const std::string& raw, const std::string& uri) {
  std::string revision;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '%' && i + 2 < raw.size() && raw[i + 1] == '2' &&
        (raw[i + 2] == 'F' || raw[i + 2] == 'f')) {
      revision.push_back('/');
      i += 2;
    } else {
      revision.push_back(raw[i]);
    }
  }
  bool valid = revision.size() <= kMaxHubRevisionBytes;
  size_t depth = 0;
  for (size_t start = 0; valid && start <= revision.size(); ++depth) {
    size_t end = revision.find('/', start);
    if (end == std::string::npos) end = revision.size();
    valid = depth < kMaxHubRevisionDepth && IsHubName(revision.substr(start, end - start));
    start = end + 1;
  }
  if (!valid) {
    return Invalid(uri, "has an invalid revision '" + QuoteUri(raw) +
                            "'; expected a branch, tag, commit or ref such as "
                            "refs/convert/parquet");
  }
  return revision;
}

bool IsSchemeName(const std::string& s) {
  if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '+' || c == '-' || c == '.';
  });
}

StatusOr<ParsedUri> ParseFile(ParsedUri p, const std::string& rest, const std::string& uri) {
  if (rest.find('?') != std::string::npos) {
    return Invalid(uri, "has a query ('?'); a file URI is a path only (write a '?' in a name as %3F)");
  }
  if (rest.find('#') != std::string::npos) {
    return Invalid(uri,
                   "has a fragment ('#'); a file URI is a path only (write a '#' in a name as %23)");
  }
  const size_t slash = rest.find('/');
  const std::string host = slash == std::string::npos ? rest : rest.substr(0, slash);
  if (!host.empty() && Lower(host) != "localhost") {
    return Invalid(uri, "names the host '" + host + "'; file URIs are local (file:///abs/path)");
  }
  if (slash == std::string::npos) return Invalid(uri, std::string("has no absolute path; ") + kForms);
  QD_ASSIGN_OR_RETURN(p.path, DecodePath(rest.substr(slash), uri));
  return p;
}

StatusOr<ParsedUri> ParseHf(ParsedUri p, const std::string& rest, const std::string& uri) {
  std::string repo = rest;
  p.hub_type = "model";
  if (repo.rfind("datasets/", 0) == 0) {
    p.hub_type = "dataset";
    repo = repo.substr(9);
    // A dataset's query picks its split and field (hub_dataset.h).
    const size_t q = repo.find('?');
    if (q != std::string::npos) {
      p.query = repo.substr(q);
      repo = repo.substr(0, q);
    }
  }
  if (repo.find_first_of("?#") != std::string::npos) {
    return Invalid(uri, "has a query or fragment; only hf://datasets/ORG/NAME URIs take a query");
  }
  const size_t at = repo.find('@');
  p.revision = "main";
  if (at != std::string::npos) {
    QD_ASSIGN_OR_RETURN(p.revision, ParseHubRevision(repo.substr(at + 1), uri));
    repo = repo.substr(0, at);
  }
  while (!repo.empty() && repo.back() == '/') repo.pop_back();
  const size_t slash = repo.find('/');
  if (slash == std::string::npos) {
    p.path = repo;
  } else {
    p.host = repo.substr(0, slash);
    p.path = repo.substr(slash + 1);
    if (p.host == "." || p.host == "..") return Escapes(uri);
    if (!IsHubName(p.host)) {
      return Invalid(uri, "has an invalid organisation; expected hf://ORG/NAME[@REV]");
    }
  }
  if (p.path == "." || p.path == "..") return Escapes(uri);
  if (!IsHubName(p.path)) {
    return Invalid(uri, p.hub_type == "dataset"
                            ? "has an invalid dataset name; expected hf://datasets/ORG/NAME[@REV]"
                            : "has an invalid model name; expected hf://ORG/NAME[@REV]");
  }
  return p;
}

StatusOr<ParsedUri> ParseHttp(ParsedUri p, const std::string& rest, const std::string& uri) {
  const size_t end = rest.find_first_of("/?#");
  p.host = Lower(end == std::string::npos ? rest : rest.substr(0, end));
  if (p.host.empty() || p.host.find('@') != std::string::npos) {
    return Invalid(uri, "needs a host (credentials in URIs are not accepted)");
  }
  std::string raw = end == std::string::npos ? "" : rest.substr(end);
  raw = raw.substr(0, raw.find('#'));
  const size_t q = raw.find('?');
  if (q != std::string::npos) {
    p.query = raw.substr(q);
    raw = raw.substr(0, q);
  }
  QD_ASSIGN_OR_RETURN(p.path, DecodePath(raw, uri));
  return p;
}

// An S3 bucket name: 3 to 63 of [a-z0-9.-], starting and ending with a
// letter or digit.
bool IsBucketName(const std::string& s) {
  if (s.size() < 3 || s.size() > 63) return false;
  auto alnum = [](unsigned char c) { return std::islower(c) || std::isdigit(c); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [&](unsigned char c) { return alnum(c) || c == '.' || c == '-'; });
}

StatusOr<ParsedUri> ParseS3(ParsedUri p, const std::string& rest, const std::string& uri) {
  if (rest.find_first_of("?#") != std::string::npos) {
    return Invalid(uri, "has a query or fragment; expected s3://BUCKET/KEY");
  }
  const size_t slash = rest.find('/');
  p.host = slash == std::string::npos ? rest : rest.substr(0, slash);
  if (!IsBucketName(p.host)) {
    return Invalid(uri,
                   "names no valid bucket (3 to 63 of a-z, 0-9, '.', '-'); expected "
                   "s3://BUCKET/KEY");
  }
  QD_ASSIGN_OR_RETURN(p.path,
                      DecodePath(slash == std::string::npos ? "/" : rest.substr(slash), uri));
  return p;
}

}  // namespace

std::string QuoteUri(const std::string& uri) {
  static constexpr char kHex[] = "0123456789abcdef";
  constexpr size_t kMax = 256;
  std::string out = "'";
  for (size_t i = 0; i < uri.size() && i < kMax; ++i) {
    const unsigned char c = static_cast<unsigned char>(uri[i]);
    if (c < 0x20 || c >= 0x7f || c == '\\') {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (uri.size() > kMax) out += "...";
  return out + "'";
}

std::string PathToFileUri(const std::string& path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "file://";
  for (const char ch : path) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '%' || c == '?' || c == '#' || c < 0x20 || c == 0x7f) {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

bool PathIsUnder(const std::string& path, const std::string& root) {
  if (path.empty() || path[0] != '/' || root.empty()) return false;
  if (root == "/") return true;
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          path[root.size()] == '/');
}

StatusOr<ParsedUri> ParseUri(const std::string& uri) {
  if (uri.find('\0') != std::string::npos) return Invalid(uri, "contains a NUL byte");
  const size_t sep = uri.find("://");
  if (sep == std::string::npos || sep == 0) {
    return Invalid(uri, std::string("has no scheme; ") + kForms);
  }
  ParsedUri p;
  p.scheme = Lower(uri.substr(0, sep));
  if (!IsSchemeName(p.scheme)) return Invalid(uri, std::string("has no scheme; ") + kForms);
  const std::string rest = uri.substr(sep + 3);
  if (p.scheme == "file") return ParseFile(std::move(p), rest, uri);
  if (p.scheme == "hf") return ParseHf(std::move(p), rest, uri);
  if (p.scheme == "http" || p.scheme == "https") return ParseHttp(std::move(p), rest, uri);
  if (p.scheme == "s3") return ParseS3(std::move(p), rest, uri);
  return Invalid(uri, "has the scheme '" + p.scheme + "', which is not supported; " + kForms);
}

}  // namespace quantd::io
