// Artifacts: what an export wrote, and the staging directory that makes every
// export atomic (written under a temporary name, renamed into place only when
// complete, so a crash or a cancel never leaves a half-written model) and
// confined (never written through a symlink, never replacing a directory that
// quantd did not write).
#ifndef QUANTD_WORKER_EXPORT_ARTIFACT_H_
#define QUANTD_WORKER_EXPORT_ARTIFACT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "worker/common/status.h"

namespace quantd::exporter {

enum class ExportFormat {
  kHfFakeQuantized,
  kHfQuark,
  kGguf,
  kOnnxQdq,
  kCompressedTensors,
  kTorchScript,  // TorchScript models only (worker/torchscript/script_export.h)
};
const char* ExportFormatName(ExportFormat f);

struct ArtifactFile {
  std::string path;  // relative to the artifact directory
  int64_t bytes = 0;
  std::string sha256;
};

struct Artifact {
  ExportFormat format = ExportFormat::kHfFakeQuantized;
  std::string path;    // the artifact directory
  int64_t bytes = 0;   // all files together
  std::string sha256;  // of the main file (model.safetensors, .gguf, .onnx)
  std::vector<ArtifactFile> files;
  bool accepted = true;  // false when the accuracy gate rejected the model
  // Who loads it (serving_target.h: ArtifactConsumers).
  std::vector<std::string> consumers;
};

// Lists every regular file under `dir` (sorted, relative paths) with its size
// and sha256, except kOwnerFile; `main_file` (relative) selects
// Artifact::sha256.
StatusOr<Artifact> DescribeArtifact(ExportFormat format, const std::string& dir,
                                    const std::string& main_file);

// Which job wrote an output directory: the file kOwnerFile inside it, written
// by StagedDirectory before the directory appears at its final path. A later
// attempt of the same job may replace what an earlier attempt exported before
// it was lost (its worker killed between the export and the job's
// completion); `overwrite` replaces only a directory that a job of the same
// tenant wrote. Any other existing output is refused (OUTPUT_EXISTS).
inline constexpr char kOwnerFile[] = ".quantd-job";
struct OutputOwner {
  // The trusted directory the output must lie under (uri_roots.h
  // OutputLocation::base): opened as given; every component below it is
  // walked without following symlinks, and the missing ones are created.
  // Empty: the output's deepest existing ancestor (tools and tests that
  // write where they are told).
  std::string root;
  std::string job;     // "jobs/<id>"; empty for the standalone CLI
  std::string tenant;  // the job's tenant; empty without authentication
};
// kOwnerFile's text: "job=<job>\ntenant=<tenant>\n".
std::string FormatOwnerMarker(const OutputOwner& owner);
// The job and tenant of a marker's text; nullopt when it is not one.
std::optional<OutputOwner> ParseOwnerMarker(const std::string& text);

// What StagedDirectory::Create would refuse, checked without creating or
// changing anything (a symlink on the way, an output that may not be
// replaced), so a job can fail before it quantizes rather than at export.
Status CheckOutputWritable(const std::string& final_path, bool overwrite,
                           const OutputOwner& owner);

// A directory that appears at `final_path` only on Commit(). Nothing is
// written outside the output's parent directory, which is reached once from
// the owner's root through directory descriptors that follow no symlink (a
// symlinked component is PERMISSION_DENIED, URI_NOT_ALLOWED): the staging
// directory is created in that pinned parent, exporters write into it through
// /proc/self/fd/<descriptor> (staging_path()), and Commit() renames inside the
// pinned parent. A symlink swapped into the path after Create() therefore
// redirects nothing.
class StagedDirectory {
 public:
  // FAILED_PRECONDITION (reason OUTPUT_EXISTS, saying why) when `final_path`
  // exists and may not be replaced (see kOwnerFile); the check is repeated at
  // Commit(). INVALID_ARGUMENT for a path that is not absolute or has '.' or
  // '..' components; PERMISSION_DENIED for one outside `owner.root`.
  static StatusOr<StagedDirectory> Create(const std::string& final_path, bool overwrite,
                                          const OutputOwner& owner = {});
  StagedDirectory(StagedDirectory&& other) noexcept;
  StagedDirectory& operator=(StagedDirectory&&) = delete;
  ~StagedDirectory();  // removes the staging directory unless committed

  // Where exporters write: /proc/self/fd/<n> of the staging directory (after
  // Commit(), of the final directory).
  const std::string& staging_path() const { return staging_; }
  const std::string& final_path() const { return final_; }
  // Renames the staging directory to the final path, replacing an existing
  // directory only as Create() allowed; the replaced one is removed without
  // following symlinks.
  Status Commit();

 private:
  StagedDirectory() = default;
  std::string final_;
  std::string staging_;       // /proc/self/fd/<staging_fd_>
  std::string name_;          // final_'s last component
  std::string staging_name_;  // the staging directory's name in the parent
  int parent_fd_ = -1;
  int staging_fd_ = -1;
  bool overwrite_ = false;
  OutputOwner owner_;
  bool committed_ = false;
};

// DescribeArtifact of a staged (and committed) directory, read through its
// descriptor; Artifact::path is the final path.
StatusOr<Artifact> DescribeArtifact(ExportFormat format, const StagedDirectory& staged,
                                    const std::string& main_file);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_ARTIFACT_H_
