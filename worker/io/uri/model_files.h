// The files of a model directory that a job may read, opened once and only
// when they stay inside the directory.
//
// A model directory is untrusted input: any entry may be a symlink (a
// notes.txt pointing at /etc/shadow, a tokenizer.json pointing into another
// tenant's directory). The worker therefore never hands the engine the
// directory itself. ModelFiles opens the entries the engine may read (a fixed
// list of names plus every *.safetensors shard), each only when it is a
// regular file whose real path lies inside the directory, inside the same
// Hugging Face cache repository's blobs/ (a hub snapshot's files are symlinks
// there), or inside one of the directories the job may read anyway (its
// allowed roots: a link can then only lead where the job could have pointed
// itself). It then builds a view directory holding, per opened file, a
// symlink to /proc/self/fd/<fd>: the engine's loaders read the view by name
// as before, and every read reaches the file that was checked, whatever is
// swapped in the model directory afterwards. Names not on the list (a
// notes.txt) are never opened. An entry on the list that leads elsewhere or
// is not a regular file fails the job (PERMISSION_DENIED naming it).
#ifndef QUANTD_WORKER_IO_URI_MODEL_FILES_H_
#define QUANTD_WORKER_IO_URI_MODEL_FILES_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "worker/common/status.h"

namespace quantd::io {

struct ModelFilesOptions {
  // Plain file names the engine may open (config.json, tokenizer.json, ...).
  std::vector<std::string> names;
  // Suffixes of further names (".safetensors": every shard).
  std::vector<std::string> suffixes;
  // Directories, besides the model directory, that a file's real path may
  // lie in (canonical paths).
  std::vector<std::string> allowed_dirs;
  // At most this many files are opened (each holds a descriptor).
  size_t max_files = 4096;
};

class ModelFiles {
 public:
  // Opens the files of `dir` (an existing directory) and creates `view_dir`
  // (which must not exist; its parent is created) with one symlink per file.
  static StatusOr<std::unique_ptr<ModelFiles>> Open(const std::string& dir,
                                                    const std::string& view_dir,
                                                    const ModelFilesOptions& options);
  // One model file (a GGUF): opened as Open opens a directory's entries,
  // the file's own directory standing for the model directory (its real
  // path must lie there, or in an allowed directory), and shown in the view
  // as `view_name`. The view is the engine's: it may add files of its own.
  static StatusOr<std::unique_ptr<ModelFiles>> OpenFile(const std::string& path,
                                                        const std::string& view_dir,
                                                        const std::string& view_name,
                                                        const ModelFilesOptions& options);
  ~ModelFiles();  // closes the files and removes the view
  ModelFiles(const ModelFiles&) = delete;
  ModelFiles& operator=(const ModelFiles&) = delete;

  // The directory the engine reads instead of the model directory.
  const std::string& view_dir() const { return view_dir_; }
  // The names in the view, sorted.
  std::vector<std::string> names() const;

  // Where `real_path` may lie for a file of the canonical directory `dir`:
  // inside it or, for a hub snapshot (<repo>/snapshots/<rev>), the repo's
  // blobs/; or inside one of `allowed_dirs`.
  static bool MayRead(const std::string& dir, const std::string& real_path,
                      const std::vector<std::string>& allowed_dirs);

 private:
  ModelFiles() = default;
  // Opens `only`'s entries of `dir` (entry name, name in the view), or the
  // entries `options` selects when `only` is unset.
  static StatusOr<std::unique_ptr<ModelFiles>> OpenEntries(
      const std::string& dir, std::optional<std::vector<std::pair<std::string, std::string>>> only,
      const std::string& view_dir, const ModelFilesOptions& options);
  std::string view_dir_;
  std::vector<std::pair<std::string, int>> files_;  // name, descriptor
};

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_URI_MODEL_FILES_H_
