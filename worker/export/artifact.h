// Artifacts: what an export wrote, and the staging directory that makes every
// export atomic (written under a temporary name, renamed into place only when
// complete, so a crash or a cancel never leaves a half-written model).
#ifndef QUANTD_WORKER_EXPORT_ARTIFACT_H_
#define QUANTD_WORKER_EXPORT_ARTIFACT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "worker/common/status.h"

namespace quantd::exporter {

enum class ExportFormat { kHfFakeQuantized, kHfQuark, kGguf, kOnnxQdq };
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
};

// Lists every regular file under `dir` (sorted, relative paths) with its size
// and sha256; `main_file` (relative) selects Artifact::sha256.
StatusOr<Artifact> DescribeArtifact(ExportFormat format, const std::string& dir,
                                    const std::string& main_file);

// Which job wrote an artifact directory: `owner` (a job name) in the file
// kOwnerFile inside it. A job's later attempt may then replace what an
// earlier attempt exported before it was lost (its worker killed between the
// export and the job's completion), while any other existing output is still
// refused (OUTPUT_EXISTS).
inline constexpr char kOwnerFile[] = ".quantd-job";
Status MarkOutputOwner(const std::string& dir, const std::string& owner);
// Removes `dir` when it exists and kOwnerFile in it names `owner`; OK (and
// nothing done) when it does not exist or belongs to someone else.
Status ReclaimOwnOutput(const std::string& dir, const std::string& owner);

// A directory that appears at `final_path` only on Commit().
class StagedDirectory {
 public:
  // FAILED_PRECONDITION (reason OUTPUT_EXISTS) when `final_path` exists and
  // `overwrite` is false; the check is repeated at Commit().
  static StatusOr<StagedDirectory> Create(const std::string& final_path, bool overwrite);
  StagedDirectory(StagedDirectory&& other) noexcept;
  StagedDirectory& operator=(StagedDirectory&&) = delete;
  ~StagedDirectory();  // removes the staging directory unless committed

  const std::string& staging_path() const { return staging_; }
  const std::string& final_path() const { return final_; }
  // Renames the staging directory to the final path (replacing an existing
  // one only when overwrite was set).
  Status Commit();

 private:
  StagedDirectory(std::string final_path, std::string staging, bool overwrite)
      : final_(std::move(final_path)), staging_(std::move(staging)), overwrite_(overwrite) {}
  std::string final_;
  std::string staging_;
  bool overwrite_ = false;
  bool committed_ = false;
};

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_ARTIFACT_H_
