#include "worker/io/uri/model_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>

#include "worker/io/uri/uri_parser.h"

namespace quantd::io {
namespace {

namespace fs = std::filesystem;

std::string FdPath(int fd) {
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  char buf[PATH_MAX];
  const ssize_t n = readlink(link.c_str(), buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : std::string();
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Status Refused(const std::string& what) {
  return Status(StatusCode::kPermissionDenied, what, "MODEL_FILE_NOT_ALLOWED");
}

// The directory's entry names that the options select, sorted.
StatusOr<std::vector<std::string>> SelectedNames(int dirfd, const std::string& dir,
                                                 const ModelFilesOptions& options) {
  const int copy = dup(dirfd);
  DIR* d = copy >= 0 ? fdopendir(copy) : nullptr;
  if (d == nullptr) {
    if (copy >= 0) close(copy);
    return NotFoundError("cannot list the model directory " + dir + ": " + std::strerror(errno));
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    bool wanted = std::find(options.names.begin(), options.names.end(), name) != options.names.end();
    for (const std::string& s : options.suffixes) wanted |= EndsWith(name, s) && name != s;
    if (!wanted) continue;
    if (names.size() >= options.max_files) {
      closedir(d);
      return Status(StatusCode::kResourceExhausted,
                    "the model directory " + dir + " has more than " +
                        std::to_string(options.max_files) + " model files");
    }
    names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

bool ModelFiles::MayRead(const std::string& dir, const std::string& real_path,
                         const std::vector<std::string>& allowed_dirs) {
  if (real_path != dir && PathIsUnder(real_path, dir)) return true;
  // A hub snapshot, <cache>/models--ORG--NAME/snapshots/<rev>: its files
  // are links into the same repository's blobs/.
  const fs::path snapshot(dir);
  const fs::path repo = snapshot.parent_path().parent_path();
  if (snapshot.parent_path().filename() == "snapshots" &&
      repo.filename().string().rfind("models--", 0) == 0 &&
      PathIsUnder(real_path, (repo / "blobs").string())) {
    return true;
  }
  for (const std::string& a : allowed_dirs) {
    if (PathIsUnder(real_path, a)) return true;
  }
  return false;
}

StatusOr<std::unique_ptr<ModelFiles>> ModelFiles::Open(const std::string& dir,
                                                       const std::string& view_dir,
                                                       const ModelFilesOptions& options) {
  return OpenEntries(dir, std::nullopt, view_dir, options);
}

StatusOr<std::unique_ptr<ModelFiles>> ModelFiles::OpenFile(const std::string& path,
                                                           const std::string& view_dir,
                                                           const std::string& view_name,
                                                           const ModelFilesOptions& options) {
  const fs::path p(path);
  if (!p.has_filename() || !p.has_parent_path()) {
    return NotFoundError("model file " + path + " is not a file path");
  }
  return OpenEntries(
      p.parent_path().string(),
      std::vector<std::pair<std::string, std::string>>{{p.filename().string(), view_name}},
      view_dir, options);
}

StatusOr<std::unique_ptr<ModelFiles>> ModelFiles::OpenEntries(
    const std::string& dir, std::optional<std::vector<std::pair<std::string, std::string>>> only,
    const std::string& view_dir, const ModelFilesOptions& options) {
  std::unique_ptr<ModelFiles> files(new ModelFiles());
  const int dirfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) {
    return NotFoundError("cannot open the model directory " + dir + ": " + std::strerror(errno));
  }
  files->files_.push_back({"", dirfd});  // closed with the others
  const std::string real_dir = FdPath(dirfd);
  if (real_dir.empty() || real_dir[0] != '/') {
    return FailedPreconditionError("cannot tell where the model directory " + dir +
                                   " lies (is /proc mounted?)");
  }
  // (entry name, name in the view)
  std::vector<std::pair<std::string, std::string>> entries;
  if (only) {
    entries = *std::move(only);
  } else {
    QD_ASSIGN_OR_RETURN(std::vector<std::string> names, SelectedNames(dirfd, dir, options));
    for (std::string& name : names) entries.emplace_back(name, name);
  }
  for (const auto& [name, shown_as] : entries) {
    const std::string shown = dir + "/" + name;
    // Where the entry leads, checked before it is opened, so that a device
    // or FIFO outside the directory is never even opened.
    const std::string via_fd = "/proc/self/fd/" + std::to_string(dirfd) + "/" + name;
    char buf[PATH_MAX];
    if (realpath(via_fd.c_str(), buf) == nullptr) {
      return Refused("model file " + shown + " cannot be resolved (a dangling link?): " +
                     std::strerror(errno));
    }
    if (!MayRead(real_dir, buf, options.allowed_dirs)) {
      return Refused("model file " + shown + " leads to " + buf +
                     ", outside the model directory and the allowed roots");
    }
    const int fd = openat(dirfd, name.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
      return Refused("cannot open model file " + shown + ": " + std::strerror(errno));
    }
    files->files_.push_back({shown_as, fd});
    // What was opened is what is read: check the open file itself, so a
    // link swapped in after the check above is caught.
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      return Refused("model file " + shown + " is not a regular file");
    }
    const std::string opened = FdPath(fd);
    if (!MayRead(real_dir, opened, options.allowed_dirs)) {
      return Refused("model file " + shown + " leads to " + opened +
                     ", outside the model directory and the allowed roots");
    }
  }
  std::error_code ec;
  fs::remove_all(view_dir, ec);  // a crashed attempt's view
  fs::create_directories(fs::path(view_dir).parent_path(), ec);
  if (mkdir(view_dir.c_str(), 0700) != 0) {
    return FailedPreconditionError("cannot create " + view_dir + ": " + std::strerror(errno));
  }
  files->view_dir_ = view_dir;
  for (const auto& [name, fd] : files->files_) {
    if (name.empty()) continue;
    const std::string target = "/proc/self/fd/" + std::to_string(fd);
    if (symlink(target.c_str(), (view_dir + "/" + name).c_str()) != 0) {
      return FailedPreconditionError("cannot create " + view_dir + "/" + name + ": " +
                                     std::strerror(errno));
    }
  }
  return files;
}

std::vector<std::string> ModelFiles::names() const {
  std::vector<std::string> out;
  for (const auto& [name, fd] : files_) {
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

ModelFiles::~ModelFiles() {
  if (!view_dir_.empty()) {
    std::error_code ec;
    fs::remove_all(view_dir_, ec);
  }
  for (const auto& [name, fd] : files_) close(fd);
}

}  // namespace quantd::io
