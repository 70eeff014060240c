#include "worker/io/uri/uri_roots.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

namespace quantd::io {
namespace {

std::vector<std::string> Segments(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string JoinPath(const std::string& dir, const std::string& rest) {
  if (rest.empty()) return dir;
  return dir == "/" ? rest : dir + rest;
}

// Replaces every {tenant} segment of `path` ("/{tenant}/out") by `tenant`.
std::string Substitute(const std::string& path, const std::string& tenant) {
  std::string out;
  for (const std::string& s : Segments(path)) out += "/" + (s == kTenantPlaceholder ? tenant : s);
  return out;
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

Status BadRoot(const std::string& spec, const std::string& why) {
  return Status(StatusCode::kInvalidArgument, "allowed root " + QuoteUri(spec) + " " + why,
                "INVALID_URI_ROOT");
}

Status Denied(const std::string& message) {
  return Status(StatusCode::kPermissionDenied, message, "URI_NOT_ALLOWED");
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  void Reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

bool IsSafeTenantSegment(const std::string& tenant) {
  if (tenant.empty() || tenant.size() > 128 || tenant[0] == '.') return false;
  return std::all_of(tenant.begin(), tenant.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '_' || c == '-';
  });
}

std::string ResolveExistingPrefix(const std::string& path) {
  const std::vector<std::string> parts = Segments(path);
  for (size_t keep = parts.size() + 1; keep-- > 0;) {
    std::string prefix;
    for (size_t i = 0; i < keep; ++i) prefix += "/" + parts[i];
    if (prefix.empty()) prefix = "/";
    char buf[PATH_MAX];
    if (realpath(prefix.c_str(), buf) == nullptr) continue;
    std::string resolved = buf;
    for (size_t i = keep; i < parts.size(); ++i) {
      if (resolved.back() != '/') resolved.push_back('/');
      resolved += parts[i];
    }
    return resolved;
  }
  return path;
}

StatusOr<UriRoots> UriRoots::Create(const std::vector<std::string>& roots,
                                    const std::string& artifacts_dir, const std::string& flag) {
  UriRoots out;
  out.flag_ = flag;
  for (const std::string& spec : roots) {
    if (spec.empty()) continue;
    const std::string uri = spec[0] == '/' ? "file://" + spec : spec;
    std::string parse_target = uri;
    // "hf://ORG/" names an organisation, which the URI form would read as a
    // model name.
    bool hf_org = false;
    const size_t repo_start = uri.rfind("hf://datasets/", 0) == 0 ? 14 : 5;
    if (uri.rfind("hf://", 0) == 0 && uri.size() > repo_start + 1 && uri.back() == '/' &&
        uri.find('/', repo_start) == uri.size() - 1) {
      hf_org = true;
      parse_target = uri.substr(0, uri.size() - 1);
    }
    auto parsed = ParseUri(parse_target);
    if (!parsed.ok()) return BadRoot(spec, "is not a usable URI: " + parsed.status().message());
    Root r;
    r.spec = spec;
    r.scheme = parsed->scheme;
    r.host = parsed->host;
    r.hub_type = parsed->hub_type;
    if (!parsed->query.empty()) return BadRoot(spec, "has a query; a root is a path prefix");
    if (r.scheme == "hf") {
      if (hf_org) {
        r.host = parsed->path;
        r.path = "/";
      } else {
        r.path = "/" + parsed->path;
      }
      if (parsed->revision != "main" || uri.find('@') != std::string::npos) {
        return BadRoot(spec, "names a revision; a root names an organisation or a model");
      }
    } else {
      const std::vector<std::string> segments = Segments(parsed->path);
      size_t first_tenant = segments.size();
      for (size_t i = 0; i < segments.size(); ++i) {
        if (segments[i] == kTenantPlaceholder) {
          first_tenant = std::min(first_tenant, i);
        } else if (segments[i].find(kTenantPlaceholder) != std::string::npos) {
          return BadRoot(spec, "uses {tenant} inside a path segment; it must be a whole segment "
                               "(file:///srv/out/{tenant})");
        }
      }
      r.per_tenant = first_tenant < segments.size();
      if (r.host.find(kTenantPlaceholder) != std::string::npos) {
        return BadRoot(spec, "uses {tenant} in the host; it may only be a path segment");
      }
      std::string fixed;
      for (size_t i = 0; i < first_tenant; ++i) fixed += "/" + segments[i];
      if (fixed.empty()) fixed = "/";
      for (size_t i = first_tenant; i < segments.size(); ++i) r.suffix += "/" + segments[i];
      r.path = fixed;
      if (r.scheme == "file") {
        char buf[PATH_MAX];
        if (realpath(fixed.c_str(), buf) == nullptr) {
          return BadRoot(spec, r.per_tenant ? "does not exist (its part before {tenant}, " + fixed +
                                                  ", must)"
                                            : "does not exist");
        }
        struct stat st;
        if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) return BadRoot(spec, "is not a directory");
        r.resolved = buf;
      } else {
        r.resolved = r.path;
      }
    }
    out.roots_.push_back(std::move(r));
    out.specs_.push_back(spec);
  }
  if (!artifacts_dir.empty()) {
    if (artifacts_dir[0] != '/') {
      return Status(StatusCode::kInvalidArgument,
                    "the artifacts directory must be absolute, got " + QuoteUri(artifacts_dir),
                    "INVALID_URI_ROOT");
    }
    auto parsed = ParseUri(PathToFileUri(artifacts_dir));
    if (!parsed.ok()) {
      return Status(StatusCode::kInvalidArgument,
                    "the artifacts directory " + QuoteUri(artifacts_dir) +
                        " is not a plain path: " + parsed.status().message(),
                    "INVALID_URI_ROOT");
    }
    out.artifacts_dir_ = parsed->path;
    out.artifacts_resolved_ = ResolveExistingPrefix(parsed->path);
  }
  return out;
}

bool UriRoots::PathsFor(const Root& root, const std::string& tenant, std::string* configured,
                        std::string* resolved) {
  if (!root.per_tenant) {
    *configured = JoinPath(root.path, root.suffix);
    *resolved = JoinPath(root.resolved, root.suffix);
    return true;
  }
  if (!IsSafeTenantSegment(tenant)) return false;
  const std::string rest = Substitute(root.suffix, tenant);
  *configured = JoinPath(root.path, rest);
  *resolved = JoinPath(root.resolved, rest);
  return true;
}

std::string UriRoots::NotAllowed(const std::string& uri, const std::string& tenant,
                                 const std::string& what) const {
  std::vector<std::string> allowed;
  bool tenant_roots = false;
  for (const Root& r : roots_) {
    if (what == "output" && r.scheme != "file" && r.scheme != "s3") continue;
    tenant_roots |= r.per_tenant;
    std::string configured, resolved;
    if (!PathsFor(r, tenant, &configured, &resolved)) continue;
    allowed.push_back(r.per_tenant ? r.spec + " (for tenant " + tenant + ": " + configured + ")"
                                   : r.spec);
  }
  std::string message;
  if (what == "input") {
    if (allowed.empty()) {
      message = QuoteUri(uri) +
                " is not under an allowed root: no roots allow this job to read inputs; the "
                "operator allows them with " +
                flag_ + " (e.g. " + flag_ + "=file:///srv/models)";
    } else {
      message = QuoteUri(uri) + " is outside the allowed roots (" + Join(allowed) + ")";
    }
  } else {
    if (!artifacts_dir_.empty()) allowed.push_back(JoinPath(artifacts_dir_, "/"));
    message = QuoteUri(uri) + " is outside the allowed output locations (" + Join(allowed) + ")";
    if (allowed.size() <= 1) {
      message += "; the operator allows other output directories with " + flag_;
    }
  }
  if (tenant_roots && !IsSafeTenantSegment(tenant)) {
    message += tenant.empty()
                   ? "; per-tenant roots ({tenant}) apply only to authenticated tenants"
                   : "; per-tenant roots ({tenant}) do not apply to the tenant " + QuoteUri(tenant) +
                         ", whose name is not a plain path segment";
  }
  return message;
}

Status UriRoots::CheckInput(const std::string& uri, const std::string& tenant) const {
  QD_ASSIGN_OR_RETURN(ParsedUri p, ParseUri(uri));
  if (p.scheme == "file") {
    const std::string resolved = ResolveExistingPrefix(p.path);
    for (const Root& r : roots_) {
      std::string configured, root_resolved;
      if (r.scheme != "file" || !PathsFor(r, tenant, &configured, &root_resolved)) continue;
      // A per-tenant directory may itself be a link the operator made.
      if (r.per_tenant) root_resolved = ResolveExistingPrefix(root_resolved);
      if (PathIsUnder(resolved, root_resolved)) return OkStatus();
    }
    std::string message = NotAllowed(uri, tenant, "input");
    if (resolved != p.path) message += "; it resolves to " + resolved;
    return Denied(message);
  }
  const std::string path = p.scheme == "hf" ? "/" + p.path : p.path;
  for (const Root& r : roots_) {
    std::string configured, resolved;
    if (r.scheme != p.scheme || r.host != p.host || r.hub_type != p.hub_type ||
        !PathsFor(r, tenant, &configured, &resolved)) {
      continue;
    }
    if (PathIsUnder(path, configured)) return OkStatus();
  }
  return Denied(NotAllowed(uri, tenant, "input"));
}

StatusOr<OutputLocation> UriRoots::CheckOutput(const std::string& uri,
                                               const std::string& tenant) const {
  QD_ASSIGN_OR_RETURN(ParsedUri p, ParseUri(uri));
  if (p.scheme == "s3") return CheckS3Output(p, uri, tenant);
  if (p.scheme != "file") {
    return Denied(QuoteUri(uri) +
                  " is not a file:// or s3:// URI; outputs are directories "
                  "or object prefixes");
  }
  struct Candidate {
    std::string base;   // opened as given
    std::string limit;  // the output must lie strictly below this
  };
  std::vector<Candidate> candidates;
  for (const Root& r : roots_) {
    std::string configured, resolved;
    if (r.scheme != "file" || !PathsFor(r, tenant, &configured, &resolved)) continue;
    candidates.push_back({r.path, configured});
    if (resolved != configured) candidates.push_back({r.resolved, resolved});
  }
  if (!artifacts_dir_.empty()) {
    candidates.push_back({artifacts_dir_, artifacts_dir_});
    if (artifacts_resolved_ != artifacts_dir_) {
      candidates.push_back({artifacts_resolved_, artifacts_resolved_});
    }
  }
  // The most specific root wins: the fewer components are walked below a
  // trusted base, the fewer can refuse the output.
  bool is_a_root = false;
  const Candidate* best = nullptr;
  for (const Candidate& c : candidates) {
    if (p.path == c.limit) is_a_root = true;
    if (p.path == c.limit || !PathIsUnder(p.path, c.limit)) continue;
    if (best == nullptr || c.base.size() > best->base.size()) best = &c;
  }
  if (best != nullptr) {
    OutputLocation loc;
    loc.path = p.path;
    loc.base = best->base;
    loc.relative = best->base == "/" ? p.path.substr(1) : p.path.substr(best->base.size() + 1);
    return loc;
  }
  if (is_a_root) {
    return Denied(QuoteUri(uri) +
                  " is an allowed directory itself; an output must be a directory below it");
  }
  return Denied(NotAllowed(uri, tenant, "output"));
}

StatusOr<OutputLocation> UriRoots::CheckS3Output(const ParsedUri& p, const std::string& uri,
                                                 const std::string& tenant) const {
  const Root* best = nullptr;
  std::string best_prefix;
  for (const Root& r : roots_) {
    std::string configured, resolved;
    if (r.scheme != "s3" || r.host != p.host || !PathsFor(r, tenant, &configured, &resolved)) {
      continue;
    }
    if (p.path == configured) {
      return Denied(QuoteUri(uri) +
                    " is an allowed prefix itself; an output must be a prefix below it");
    }
    if (!PathIsUnder(p.path, configured)) continue;
    if (best == nullptr || configured.size() > best_prefix.size()) {
      best = &r;
      best_prefix = configured;
    }
  }
  if (best == nullptr) return Denied(NotAllowed(uri, tenant, "output"));
  OutputLocation loc;
  loc.scheme = "s3";
  loc.bucket = p.host;
  loc.path = p.path;
  loc.base = best_prefix;
  loc.relative = best_prefix == "/" ? p.path.substr(1) : p.path.substr(best_prefix.size() + 1);
  return loc;
}

std::vector<std::string> UriRoots::InputDirectories(const std::string& tenant) const {
  std::vector<std::string> out;
  for (const Root& r : roots_) {
    std::string configured, resolved;
    if (r.scheme != "file" || !PathsFor(r, tenant, &configured, &resolved)) continue;
    out.push_back(ResolveExistingPrefix(resolved));
  }
  return out;
}

std::vector<std::string> UriRoots::InputRoots() const { return specs_; }

std::vector<std::string> UriRoots::OutputRoots() const {
  std::vector<std::string> out;
  for (const Root& r : roots_) {
    if (r.scheme == "file" || r.scheme == "s3") out.push_back(r.spec);
  }
  if (!artifacts_dir_.empty()) out.push_back(JoinPath(artifacts_dir_, "/"));
  return out;
}

std::vector<std::string> UriRoots::TenantRoots() const {
  std::vector<std::string> out;
  for (const Root& r : roots_) {
    if (r.per_tenant) out.push_back(r.spec);
  }
  return out;
}

Status CheckOutputWalk(const OutputLocation& location) {
  if (location.scheme != "file") return OkStatus();  // an object store has no links
  Fd dir(::open(location.base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  // A base that is not there (yet) or not readable here is the worker's to
  // judge; this check only refuses what the worker would refuse for sure.
  if (dir.get() < 0) return OkStatus();
  const std::vector<std::string> parts = Segments(location.relative);
  std::string walked = location.base == "/" ? "" : location.base;
  for (size_t i = 0; i < parts.size(); ++i) {
    walked += "/" + parts[i];
    struct stat st;
    if (fstatat(dir.get(), parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return OkStatus();
    if (S_ISLNK(st.st_mode)) {
      return Denied(walked + " is a symbolic link; outputs are never written through one");
    }
    const bool last = i + 1 == parts.size();
    if (!S_ISDIR(st.st_mode)) {
      return Status(StatusCode::kFailedPrecondition,
                    walked + (last ? " exists and is not a directory; it is never replaced"
                                   : " is not a directory"),
                    "OUTPUT_EXISTS");
    }
    if (last) return OkStatus();
    dir.Reset(::openat(dir.get(), parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (dir.get() < 0) return OkStatus();
  }
  return OkStatus();
}

}  // namespace quantd::io
