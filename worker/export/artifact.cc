#include "worker/export/artifact.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "worker/common/sha256.h"

namespace quantd::exporter {

namespace fs = std::filesystem;

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
    if (it->is_regular_file()) rel.push_back(fs::relative(it->path(), dir).string());
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

Status MarkOutputOwner(const std::string& dir, const std::string& owner) {
  std::ofstream out(fs::path(dir) / kOwnerFile, std::ios::trunc);
  out << owner << "\n";
  out.close();
  if (!out) return InternalError("cannot write " + (fs::path(dir) / kOwnerFile).string());
  return OkStatus();
}

Status ReclaimOwnOutput(const std::string& dir, const std::string& owner) {
  std::ifstream in(fs::path(dir) / kOwnerFile);
  std::string line;
  if (owner.empty() || !in || !std::getline(in, line) || line != owner) return OkStatus();
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) return InternalError("cannot replace " + dir + " (an earlier attempt's): " + ec.message());
  return OkStatus();
}

StatusOr<StagedDirectory> StagedDirectory::Create(const std::string& final_path, bool overwrite) {
  std::error_code ec;
  fs::path final = fs::path(final_path).lexically_normal();
  if (final.filename().empty()) final = final.parent_path();
  if (fs::exists(final, ec) && !overwrite)
    return Status(StatusCode::kFailedPrecondition,
                  "output " + final.string() + " already exists; set overwrite to replace it",
                  "OUTPUT_EXISTS");
  fs::create_directories(final.parent_path(), ec);
  if (ec)
    return FailedPreconditionError("cannot create " + final.parent_path().string() + ": " +
                                   ec.message());
  // A writer killed mid-export (a worker lost with its lease) leaves its
  // staging directory behind; the job's next attempt is the only writer of
  // this output now, so it removes them: a job ends with one artifact.
  const std::string prefix = final.filename().string() + ".partial-";
  for (const auto& e : fs::directory_iterator(final.parent_path(), ec)) {
    if (e.path().filename().string().rfind(prefix, 0) != 0) continue;
    std::error_code rm;
    fs::remove_all(e.path(), rm);
  }
  ec.clear();
  const std::string staging = final.string() + ".partial-" + std::to_string(::getpid()) + "-" +
                              std::to_string(::time(nullptr));
  fs::remove_all(staging, ec);
  fs::create_directory(staging, ec);
  if (ec) return FailedPreconditionError("cannot create " + staging + ": " + ec.message());
  return StagedDirectory(final.string(), staging, overwrite);
}

StagedDirectory::StagedDirectory(StagedDirectory&& o) noexcept
    : final_(std::move(o.final_)),
      staging_(std::move(o.staging_)),
      overwrite_(o.overwrite_),
      committed_(o.committed_) {
  o.committed_ = true;  // the moved-from object owns nothing
}

StagedDirectory::~StagedDirectory() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(staging_, ec);
}

Status StagedDirectory::Commit() {
  std::error_code ec;
  if (fs::exists(final_, ec)) {
    if (!overwrite_)
      return Status(StatusCode::kFailedPrecondition,
                    "output " + final_ + " appeared while the job ran; not replacing it",
                    "OUTPUT_EXISTS");
    // Move the old output aside first so the new one replaces it in one
    // rename; the old copy is deleted afterwards.
    const std::string old = final_ + ".old-" + std::to_string(::getpid());
    fs::rename(final_, old, ec);
    if (ec) return FailedPreconditionError("cannot replace " + final_ + ": " + ec.message());
    fs::rename(staging_, final_, ec);
    if (ec)
      return InternalError("cannot rename " + staging_ + " to " + final_ + ": " + ec.message());
    fs::remove_all(old, ec);
  } else {
    fs::rename(staging_, final_, ec);
    if (ec)
      return InternalError("cannot rename " + staging_ + " to " + final_ + ": " + ec.message());
  }
  committed_ = true;
  return OkStatus();
}

}  // namespace quantd::exporter
