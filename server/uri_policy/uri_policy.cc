#include "server/uri_policy/uri_policy.h"

#include <limits.h>
#include <stdlib.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/common/errors.h"

namespace quantd::server {
namespace {

struct ParsedUri {
  std::string scheme;
  std::string authority;
  std::string path;  // percent-decoded
};

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = absl::ascii_tolower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Splits scheme://authority/path and decodes %XX in the path. An error
// string says why the URI is unusable.
std::string Parse(absl::string_view uri, ParsedUri* out) {
  size_t sep = uri.find("://");
  if (sep == absl::string_view::npos || sep == 0) return "is not an absolute URI (scheme://...)";
  out->scheme = absl::AsciiStrToLower(uri.substr(0, sep));
  absl::string_view rest = uri.substr(sep + 3);
  size_t slash = rest.find('/');
  absl::string_view authority = slash == absl::string_view::npos ? rest : rest.substr(0, slash);
  absl::string_view raw_path = slash == absl::string_view::npos ? "/" : rest.substr(slash);
  if (absl::StrContains(authority, '@')) return "must not carry credentials (user@host)";
  out->authority = absl::AsciiStrToLower(authority);
  if (out->scheme == "file" && out->authority == "localhost") out->authority.clear();
  // Query and fragment never select a different file; they are not part of
  // the path to check.
  raw_path = raw_path.substr(0, raw_path.find_first_of("?#"));
  std::string path;
  for (size_t i = 0; i < raw_path.size(); ++i) {
    if (raw_path[i] == '%') {
      int hi = i + 2 < raw_path.size() ? HexValue(raw_path[i + 1]) : -1;
      int lo = hi >= 0 ? HexValue(raw_path[i + 2]) : -1;
      if (lo < 0) return "has a malformed %-escape";
      char c = static_cast<char>(hi * 16 + lo);
      if (c == '\0') return "contains a NUL byte";
      path.push_back(c);
      i += 2;
    } else {
      path.push_back(raw_path[i]);
    }
  }
  for (absl::string_view segment : absl::StrSplit(path, '/')) {
    if (segment == ".." || segment == ".") return "must not contain '.' or '..' path segments";
  }
  out->path = path;
  return "";
}

// realpath of the longest existing prefix, plus the components that do not
// exist yet (an output directory is created later).
std::string Resolve(const std::string& path) {
  std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  for (size_t keep = parts.size() + 1; keep-- > 0;) {
    std::string prefix = "/" + absl::StrJoin(parts.begin(), parts.begin() + keep, "/");
    char buf[PATH_MAX];
    if (realpath(prefix.c_str(), buf) != nullptr) {
      std::string resolved = buf;
      for (size_t i = keep; i < parts.size(); ++i) {
        if (resolved.back() != '/') resolved.push_back('/');
        resolved += parts[i];
      }
      return resolved;
    }
  }
  return path;
}

bool Under(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root || absl::StartsWith(path, root + "/");
}

}  // namespace

absl::StatusOr<UriPolicy> UriPolicy::Create(const std::vector<std::string>& roots) {
  UriPolicy policy;
  for (const std::string& root : roots) {
    ParsedUri parsed;
    std::string problem = Parse(root, &parsed);
    auto bad = [&](absl::string_view why) {
      return MakeError(absl::StatusCode::kInvalidArgument, "INVALID_URI_ROOT",
                       absl::StrCat("allowed URI root \"", root, "\" ", why));
    };
    if (!problem.empty()) return bad(problem);
    Root r{parsed.scheme, parsed.authority, parsed.path};
    if (r.scheme == "file") {
      if (!r.authority.empty()) {
        return bad("names a host; use file:///absolute/path");
      }
      char buf[PATH_MAX];
      if (realpath(r.path.c_str(), buf) == nullptr) return bad("does not exist");
      r.path = buf;
    } else if (r.authority.empty()) {
      return bad("needs a host");
    }
    while (r.path.size() > 1 && r.path.back() == '/') r.path.pop_back();
    policy.roots_.push_back(std::move(r));
    policy.display_roots_.push_back(root);
  }
  return policy;
}

absl::Status UriPolicy::CheckUri(absl::string_view field, absl::string_view uri) const {
  ParsedUri parsed;
  std::string problem = Parse(uri, &parsed);
  std::string path = parsed.path;
  if (problem.empty() && parsed.scheme == "file") {
    if (!parsed.authority.empty()) {
      problem = "names a host; use file:///absolute/path";
    } else {
      path = Resolve(parsed.path);
    }
  }
  if (problem.empty()) {
    for (const Root& root : roots_) {
      if (root.scheme == parsed.scheme && root.authority == parsed.authority &&
          Under(path, root.path)) {
        return absl::OkStatus();
      }
    }
    problem =
        absl::StrCat("is outside the allowed roots (", absl::StrJoin(display_roots_, ", "), ")");
    if (parsed.scheme == "file" && path != parsed.path) {
      absl::StrAppend(&problem, "; it resolves to ", path);
    }
  }
  std::string description = absl::StrCat("\"", uri, "\" ", problem);
  absl::Status status = MakeError(absl::StatusCode::kPermissionDenied, "URI_NOT_ALLOWED",
                                  absl::StrCat(field, ": ", description));
  AddViolations(status, {{std::string(field), description}});
  return status;
}

absl::Status UriPolicy::CheckSpec(const v1::JobSpec& spec) const {
  const std::pair<const char*, const std::string*> fields[] = {
      {"spec.model_uri", &spec.model_uri()},
      {"spec.calibration.dataset_uri", &spec.calibration().dataset_uri()},
      {"spec.evaluation.dataset_uri", &spec.evaluation().dataset_uri()},
      {"spec.export.output_uri", &spec.export_().output_uri()},
  };
  for (const auto& [field, uri] : fields) {
    if (uri->empty()) continue;
    absl::Status s = CheckUri(field, *uri);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace quantd::server
