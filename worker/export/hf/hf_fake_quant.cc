#include "worker/export/hf/hf_fake_quant.h"

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "worker/common/cancellation.h"
#include "worker/export/hf/hf_files.h"
#include "worker/io/safetensors/safetensors_format.h"
#include "worker/io/safetensors/safetensors_writer.h"
#include "worker/io/safetensors/tensor_io.h"

namespace quantd::exporter {

namespace fs = std::filesystem;
using nlohmann::json;

StatusOr<Artifact> ExportHfFakeQuantized(const io::TensorSource& original,
                                         const TensorProvider& provider,
                                         const HfFakeQuantExportOptions& opt,
                                         const ExportProgress& progress) {
  QD_ASSIGN_OR_RETURN(StagedDirectory staged,
                      StagedDirectory::Create(opt.output_dir, opt.overwrite, opt.output_owner));
  const fs::path dir = staged.staging_path();

  // Mirror the input's shard layout: tensors grouped by the file they came
  // from (a GGUF's, one model.safetensors).
  std::map<std::string, std::vector<std::string>> by_file;
  const std::vector<std::string> names = original.Names();
  for (const auto& name : names) {
    const io::TensorInfo* info = original.Find(name);
    std::string file = fs::path(info->file).filename().string();
    if (fs::path(file).extension() != ".safetensors") file = "model.safetensors";
    by_file[file].push_back(name);
  }
  // One file is model.safetensors whatever the input named it (a lone
  // model-00001-of-00001 shard): loaders look for that name or an index.
  if (by_file.size() == 1 && by_file.begin()->first != "model.safetensors") {
    auto only = std::move(by_file.begin()->second);
    by_file.clear();
    by_file["model.safetensors"] = std::move(only);
  }

  json weight_map = json::object();
  uint64_t total_bytes = 0;
  int done = 0;
  for (const auto& [file, tensors] : by_file) {
    QD_ASSIGN_OR_RETURN(auto writer, io::SafetensorsWriter::Create((dir / file).string()));
    for (const auto& name : tensors) {
      // A large model's export writes for minutes: a cancel stops it, and
      // the staging directory goes with `staged`.
      if (StopRequested()) return CancelledStatus("exporting " + name);
      const io::TensorInfo* info = original.Find(name);
      const io::SafetensorsDtype st = io::KeptSafetensorsDtype(info->dtype);
      QD_ASSIGN_OR_RETURN(at::ScalarType scalar, io::StorageScalarType(st));
      QD_ASSIGN_OR_RETURN(at::Tensor t, provider(name));
      if (t.sizes().vec() != info->shape)
        return InternalError("export of " + name + ": shape changed from the input");
      QD_RETURN_IF_ERROR(io::AddTensor(*writer, name, t.to(scalar).contiguous(), st));
      weight_map[name] = file;
      if (progress) progress(++done, static_cast<int>(names.size()));
    }
    total_bytes += writer->data_bytes();
    QD_RETURN_IF_ERROR(writer->Finish());
  }
  if (by_file.size() > 1) {
    json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
    QD_RETURN_IF_ERROR(
        WriteTextFile((dir / "model.safetensors.index.json").string(), index.dump(2) + "\n"));
  }
  QD_RETURN_IF_ERROR(WriteHfConfig(opt.model_dir, dir.string(), opt.quantization_config,
                                   opt.tie_word_embeddings));
  QD_RETURN_IF_ERROR(CopyHfSideFiles(opt.model_dir, dir.string()));
  QD_RETURN_IF_ERROR(staged.Commit());
  const std::string main_file =
      by_file.size() == 1 ? by_file.begin()->first : "model.safetensors.index.json";
  return DescribeArtifact(ExportFormat::kHfFakeQuantized, staged, main_file);
}

}  // namespace quantd::exporter
