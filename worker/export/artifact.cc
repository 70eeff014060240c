#include "worker/export/artifact.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <system_error>

#include "worker/common/sha256.h"

namespace quantd::exporter {

namespace fs = std::filesystem;

namespace {

// Deepest directory tree removed or walked below an output (the exporters
// write at most two levels).
constexpr int kMaxTreeDepth = 32;

std::string Errno() { return std::strerror(errno); }

Status OutputExists(const std::string& message) {
  return Status(StatusCode::kFailedPrecondition, message, "OUTPUT_EXISTS");
}

int OpenDirAt(int at, const std::string& name) {
  return ::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// The non-empty components of an absolute path; INVALID_ARGUMENT for a
// relative path or a '.'/'..' component.
StatusOr<std::vector<std::string>> Components(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return InvalidArgumentError("output " + path + " is not an absolute path");
  }
  std::vector<std::string> out;
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string c = path.substr(start, end - start);
    if (c == "." || c == "..") {
      return InvalidArgumentError("output " + path + " has a '.' or '..' component");
    }
    if (!c.empty()) out.push_back(c);
    start = end + 1;
  }
  return out;
}

std::string Join(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += "/" + parts[i];
  return out.empty() ? "/" : out;
}

// Removes the entry `name` of the directory `at`: a directory with all it
// holds, anything else (a symlink included) as the entry itself. Symlinks
// are never followed.
Status RemoveTreeAt(int at, const std::string& name, const std::string& shown, int depth) {
  int fd = OpenDirAt(at, name);
  if (fd < 0) {
    if (errno == ENOENT) return OkStatus();
    if (errno != ENOTDIR && errno != ELOOP) return InternalError("cannot open " + shown + ": " + Errno());
    if (::unlinkat(at, name.c_str(), 0) != 0 && errno != ENOENT) {
      return InternalError("cannot remove " + shown + ": " + Errno());
    }
    return OkStatus();
  }
  if (depth > kMaxTreeDepth) {
    ::close(fd);
    return InternalError("cannot remove " + shown + ": nested deeper than " +
                         std::to_string(kMaxTreeDepth) + " levels");
  }
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return InternalError("cannot list " + shown + ": " + Errno());
  }
  std::vector<std::string> entries;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") entries.push_back(n);
  }
  Status status;
  for (const std::string& n : entries) {
    status = RemoveTreeAt(::dirfd(d), n, shown + "/" + n, depth + 1);
    if (!status.ok()) break;
  }
  ::closedir(d);
  if (!status.ok()) return status;
  if (::unlinkat(at, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return InternalError("cannot remove " + shown + ": " + Errno());
  }
  return OkStatus();
}

// The marker of the directory `name` in `at` (opened without following
// symlinks); nullopt when there is none or it is not a marker.
std::optional<OutputOwner> ReadMarkerAt(int at, const std::string& name, struct stat* dir_stat) {
  int dir = OpenDirAt(at, name);
  if (dir < 0) return std::nullopt;
  if (dir_stat != nullptr && ::fstat(dir, dir_stat) != 0) {
    ::close(dir);
    return std::nullopt;
  }
  int fd = ::openat(dir, kOwnerFile, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  ::close(dir);
  if (fd < 0) return std::nullopt;
  struct stat st;
  std::string text;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= 4096) {
    text.resize(static_cast<size_t>(st.st_size));
    const ssize_t n = ::read(fd, text.data(), text.size());
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  return ParseOwnerMarker(text);
}

bool SameOwner(const OutputOwner& a, const OutputOwner& b) {
  return a.job == b.job && a.tenant == b.tenant;
}

// Whether the existing entry `name` of `parent` may be replaced by `owner`'s
// output: OK with its identity in `id`, OK with id->st_ino 0 when there is
// nothing, OUTPUT_EXISTS saying why not.
Status CheckReplaceable(int parent, const std::string& name, const std::string& shown,
                        bool overwrite, const OutputOwner& owner, struct stat* id) {
  std::memset(id, 0, sizeof(*id));
  struct stat st;
  if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return OkStatus();
    return FailedPreconditionError("cannot inspect " + shown + ": " + Errno());
  }
  if (S_ISLNK(st.st_mode)) {
    return OutputExists("output " + shown + " exists and is a symbolic link; it is never replaced");
  }
  if (!S_ISDIR(st.st_mode)) {
    return OutputExists("output " + shown + " exists and is not a directory; it is never replaced");
  }
  struct stat dir_stat;
  const std::optional<OutputOwner> marker = ReadMarkerAt(parent, name, &dir_stat);
  // An earlier attempt of this very job.
  if (marker && !owner.job.empty() && SameOwner(*marker, owner)) {
    *id = dir_stat;
    return OkStatus();
  }
  if (!overwrite) return OutputExists("output " + shown + " already exists; set overwrite to replace it");
  if (!marker) {
    return OutputExists("output " + shown + " already exists and was not written by quantd (it has no " +
                        kOwnerFile +
                        " marker); overwrite replaces only a directory an earlier quantd job wrote");
  }
  if (marker->tenant != owner.tenant) {
    return OutputExists("output " + shown +
                        " was written by another tenant's job; overwrite replaces only outputs of "
                        "the same tenant");
  }
  *id = dir_stat;
  return OkStatus();
}

std::string RandomSuffix() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%08x%08x", rd(), rd());
  return buf;
}

// renameat2(RENAME_NOREPLACE) inside `dir`; 0 or the errno.
int RenameNoReplace(int dir, const std::string& from, const std::string& to) {
  if (::renameat2(dir, from.c_str(), dir, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  // A file system without RENAME_NOREPLACE: check, then rename.
  struct stat st;
  if (::fstatat(dir, to.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return EEXIST;
  return ::renameat(dir, from.c_str(), dir, to.c_str()) == 0 ? 0 : errno;
}

}  // namespace

const char* ExportFormatName(ExportFormat f) {
  switch (f) {
    case ExportFormat::kHfFakeQuantized:
      return "hf_fake_quantized";
    case ExportFormat::kHfQuark:
      return "hf_quark";
    case ExportFormat::kGguf:
      return "gguf";
    case ExportFormat::kOnnxQdq:
      return "onnx_qdq";
    case ExportFormat::kCompressedTensors:
      return "compressed_tensors";
    case ExportFormat::kTorchScript:
      return "torchscript";
  }
  return "unknown";
}

StatusOr<Artifact> DescribeArtifact(ExportFormat format, const std::string& dir,
                                    const std::string& main_file) {
  Artifact a;
  a.format = format;
  a.path = dir;
  std::error_code ec;
  std::vector<std::string> rel;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_symlink() || !it->is_regular_file()) continue;
    const std::string r = it->path().lexically_relative(dir).string();
    if (r != kOwnerFile) rel.push_back(r);
  }
  if (ec) return NotFoundError("cannot list artifact directory " + dir + ": " + ec.message());
  std::sort(rel.begin(), rel.end());
  for (const auto& r : rel) {
    ArtifactFile f;
    f.path = r;
    f.bytes = static_cast<int64_t>(fs::file_size(fs::path(dir) / r, ec));
    QD_ASSIGN_OR_RETURN(f.sha256, Sha256File((fs::path(dir) / r).string()));
    a.bytes += f.bytes;
    if (r == main_file) a.sha256 = f.sha256;
    a.files.push_back(std::move(f));
  }
  if (a.sha256.empty()) return InternalError("artifact " + dir + " has no main file " + main_file);
  return a;
}

StatusOr<Artifact> DescribeArtifact(ExportFormat format, const StagedDirectory& staged,
                                    const std::string& main_file) {
  auto a = DescribeArtifact(format, staged.staging_path(), main_file);
  if (!a.ok()) return Status(a.status()).Prepend(staged.final_path() + ": ");
  a->path = staged.final_path();
  return a;
}

std::string FormatOwnerMarker(const OutputOwner& owner) {
  return "job=" + owner.job + "\ntenant=" + owner.tenant + "\n";
}

std::optional<OutputOwner> ParseOwnerMarker(const std::string& text) {
  OutputOwner owner;
  bool job = false, tenant = false;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (line.rfind("job=", 0) == 0 && !job) {
      owner.job = line.substr(4);
      job = true;
    } else if (line.rfind("tenant=", 0) == 0 && !tenant) {
      owner.tenant = line.substr(7);
      tenant = true;
    } else if (!line.empty()) {
      return std::nullopt;
    }
    start = end + 1;
  }
  if (!job || !tenant) return std::nullopt;
  return owner;
}

namespace {

// An output path split for the walk: its components, how many of them the
// trusted start (`root`) covers, and that start.
struct OutputWalk {
  std::vector<std::string> parts;
  size_t fixed = 0;
  std::string root;
  std::string final;
};

StatusOr<OutputWalk> PlanWalk(const std::string& final_path, const OutputOwner& owner) {
  OutputWalk w;
  QD_ASSIGN_OR_RETURN(w.parts, Components(final_path));
  if (w.parts.empty()) return InvalidArgumentError("output / is not a directory one can create");
  w.final = Join(w.parts, w.parts.size());
  // Where the walk starts: the owner's root, or the deepest existing
  // ancestor of the output.
  if (!owner.root.empty()) {
    QD_ASSIGN_OR_RETURN(std::vector<std::string> root_parts, Components(owner.root));
    w.fixed = root_parts.size();
    w.root = Join(root_parts, w.fixed);
    if (w.fixed >= w.parts.size() || Join(w.parts, w.fixed) != w.root) {
      return Status(StatusCode::kPermissionDenied,
                    "output " + w.final + " is not below its allowed directory " + w.root,
                    "URI_NOT_ALLOWED");
    }
  } else {
    w.fixed = w.parts.size() - 1;
    struct stat st;
    while (w.fixed > 0 && ::stat(Join(w.parts, w.fixed).c_str(), &st) != 0) --w.fixed;
    w.root = Join(w.parts, w.fixed);
  }
  return w;
}

// Opens the output's parent from the walk's root, each component without
// following a symlink; missing ones are created when `create`, else the
// walk stops there (*fd is then -1: nothing exists to be refused).
Status WalkToParent(const OutputWalk& w, bool create, int* fd, std::string* walked) {
  *fd = ::open(w.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (*fd < 0) {
    return FailedPreconditionError("cannot open the output directory " + w.root + ": " + Errno());
  }
  *walked = w.root == "/" ? "" : w.root;
  for (size_t i = w.fixed; i + 1 < w.parts.size(); ++i) {
    *walked += "/" + w.parts[i];
    int next = OpenDirAt(*fd, w.parts[i]);
    if (next < 0 && errno == ENOENT) {
      if (!create) {
        CloseFd(*fd);
        return OkStatus();
      }
      if (::mkdirat(*fd, w.parts[i].c_str(), 0777) != 0 && errno != EEXIST) {
        return FailedPreconditionError("cannot create " + *walked + ": " + Errno());
      }
      next = OpenDirAt(*fd, w.parts[i]);
    }
    if (next < 0) {
      struct stat st;
      if (::fstatat(*fd, w.parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(st.st_mode)) {
        return Status(StatusCode::kPermissionDenied,
                      *walked + " is a symbolic link; outputs are never written through one",
                      "URI_NOT_ALLOWED");
      }
      return FailedPreconditionError("cannot open " + *walked + " as a directory: " + Errno());
    }
    ::close(*fd);
    *fd = next;
  }
  return OkStatus();
}

}  // namespace

Status CheckOutputWritable(const std::string& final_path, bool overwrite,
                           const OutputOwner& owner) {
  QD_ASSIGN_OR_RETURN(OutputWalk w, PlanWalk(final_path, owner));
  int parent = -1;
  std::string walked;
  Status status = WalkToParent(w, /*create=*/false, &parent, &walked);
  if (status.ok() && parent >= 0) {
    struct stat existing;
    status = CheckReplaceable(parent, w.parts.back(), w.final, overwrite, owner, &existing);
  }
  CloseFd(parent);
  return status;
}

StatusOr<StagedDirectory> StagedDirectory::Create(const std::string& final_path, bool overwrite,
                                                  const OutputOwner& owner) {
  QD_ASSIGN_OR_RETURN(OutputWalk w, PlanWalk(final_path, owner));
  const std::string& final = w.final;
  StagedDirectory s;
  s.final_ = final;
  s.name_ = w.parts.back();
  s.overwrite_ = overwrite;
  s.owner_ = owner;
  // Down to the parent, creating what is missing; the parent stays pinned.
  std::string walked;
  QD_RETURN_IF_ERROR(WalkToParent(w, /*create=*/true, &s.parent_fd_, &walked));

  struct stat existing;
  QD_RETURN_IF_ERROR(CheckReplaceable(s.parent_fd_, s.name_, final, overwrite, owner, &existing));

  // A writer killed mid-export (a worker lost with its lease) leaves its
  // staging directory behind; the job's next attempt is the only writer of
  // this output now, so it removes those that carry its own marker: a job
  // ends with one artifact. Anything else beside the output is left alone.
  const std::string prefix = s.name_ + ".partial-";
  {
    const int copy = ::dup(s.parent_fd_);
    DIR* d = copy >= 0 ? ::fdopendir(copy) : nullptr;
    std::vector<std::string> leftovers;
    if (d != nullptr) {
      while (dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n.rfind(prefix, 0) != 0) continue;
        const std::optional<OutputOwner> marker = ReadMarkerAt(s.parent_fd_, n, nullptr);
        if (marker && SameOwner(*marker, owner)) leftovers.push_back(n);
      }
      ::closedir(d);
    } else if (copy >= 0) {
      ::close(copy);
    }
    for (const std::string& n : leftovers) {
      QD_RETURN_IF_ERROR(RemoveTreeAt(s.parent_fd_, n, walked + "/" + n, 0));
    }
  }

  s.staging_name_ = prefix + std::to_string(::getpid()) + "-" + RandomSuffix();
  const std::string shown = (walked.empty() ? "" : walked) + "/" + s.staging_name_;
  if (::mkdirat(s.parent_fd_, s.staging_name_.c_str(), 0777) != 0) {
    return FailedPreconditionError("cannot create " + shown + ": " + Errno());
  }
  s.staging_fd_ = OpenDirAt(s.parent_fd_, s.staging_name_);
  if (s.staging_fd_ < 0) return FailedPreconditionError("cannot open " + shown + ": " + Errno());
  s.staging_ = "/proc/self/fd/" + std::to_string(s.staging_fd_);
  struct stat st;
  if (::stat(s.staging_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return FailedPreconditionError("cannot reach " + shown + " through " + s.staging_ +
                                   " (is /proc mounted?)");
  }
  const int marker = ::openat(s.staging_fd_, kOwnerFile,
                              O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  const std::string text = FormatOwnerMarker(owner);
  const bool written = marker >= 0 && ::write(marker, text.data(), text.size()) ==
                                          static_cast<ssize_t>(text.size());
  if (marker >= 0) ::close(marker);
  if (!written) return InternalError("cannot write " + shown + "/" + kOwnerFile);
  return s;
}

StagedDirectory::StagedDirectory(StagedDirectory&& o) noexcept
    : final_(std::move(o.final_)),
      staging_(std::move(o.staging_)),
      name_(std::move(o.name_)),
      staging_name_(std::move(o.staging_name_)),
      parent_fd_(o.parent_fd_),
      staging_fd_(o.staging_fd_),
      overwrite_(o.overwrite_),
      owner_(std::move(o.owner_)),
      committed_(o.committed_) {
  o.parent_fd_ = -1;
  o.staging_fd_ = -1;
  o.committed_ = true;  // the moved-from object owns nothing
}

StagedDirectory::~StagedDirectory() {
  if (!committed_ && parent_fd_ >= 0 && !staging_name_.empty()) {
    // Only the directory this object made: the name must still be it.
    struct stat mine, there;
    if (staging_fd_ >= 0 && ::fstat(staging_fd_, &mine) == 0 &&
        ::fstatat(parent_fd_, staging_name_.c_str(), &there, AT_SYMLINK_NOFOLLOW) == 0 &&
        mine.st_dev == there.st_dev && mine.st_ino == there.st_ino) {
      (void)RemoveTreeAt(parent_fd_, staging_name_, staging_name_, 0);
    }
  }
  CloseFd(staging_fd_);
  CloseFd(parent_fd_);
}

Status StagedDirectory::Commit() {
  if (committed_) return FailedPreconditionError("output " + final_ + " was already committed");
  struct stat existing;
  QD_RETURN_IF_ERROR(CheckReplaceable(parent_fd_, name_, final_, overwrite_, owner_, &existing));
  std::string old_name;
  if (existing.st_ino != 0) {
    // Move the old output aside, make sure it is the directory that was
    // checked, then put the new one in its place.
    old_name = name_ + ".old-" + std::to_string(::getpid()) + "-" + RandomSuffix();
    if (const int err = RenameNoReplace(parent_fd_, name_, old_name); err != 0) {
      return FailedPreconditionError("cannot move " + final_ + " aside: " + std::strerror(err));
    }
    struct stat aside;
    if (::fstatat(parent_fd_, old_name.c_str(), &aside, AT_SYMLINK_NOFOLLOW) != 0 ||
        aside.st_dev != existing.st_dev || aside.st_ino != existing.st_ino) {
      (void)RenameNoReplace(parent_fd_, old_name, name_);
      return OutputExists("output " + final_ +
                          " changed while it was being replaced; not replacing it");
    }
  }
  if (const int err = RenameNoReplace(parent_fd_, staging_name_, name_); err != 0) {
    if (!old_name.empty()) (void)RenameNoReplace(parent_fd_, old_name, name_);
    if (err == EEXIST || err == ENOTEMPTY) {
      return OutputExists("output " + final_ + " appeared while the job ran; not replacing it");
    }
    return InternalError("cannot rename the staging directory to " + final_ + ": " +
                         std::strerror(err));
  }
  committed_ = true;
  if (!old_name.empty()) {
    QD_RETURN_IF_ERROR(RemoveTreeAt(parent_fd_, old_name, final_ + " (replaced)", 0));
  }
  return OkStatus();
}

}  // namespace quantd::exporter
