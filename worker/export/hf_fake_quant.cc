#include "worker/export/hf_fake_quant.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "worker/io/safetensors/safetensors_format.h"
#include "worker/io/safetensors/safetensors_writer.h"
#include "worker/io/safetensors/tensor_io.h"

namespace quantd::exporter {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool IsWeightFile(const std::string& name) {
  for (const char* ext : {".safetensors", ".bin", ".pt", ".pth", ".gguf", ".onnx"})
    if (name.size() >= std::strlen(ext) &&
        name.compare(name.size() - std::strlen(ext), std::strlen(ext), ext) == 0)
      return true;
  return name == "model.safetensors.index.json" || name == "pytorch_model.bin.index.json";
}

StatusOr<std::string> ReadText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return NotFoundError("cannot read " + p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status WriteText(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  out.close();
  if (!out) return InternalError("cannot write " + p.string());
  return OkStatus();
}

Status WriteConfig(const HfFakeQuantExportOptions& opt, const fs::path& dir) {
  QD_ASSIGN_OR_RETURN(std::string text, ReadText(fs::path(opt.model_dir) / "config.json"));
  json cfg = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (cfg.is_discarded() || !cfg.is_object())
    return DataLossError(opt.model_dir + "/config.json is not a JSON object");
  if (!opt.quantization_config_json.empty()) {
    json q = json::parse(opt.quantization_config_json, nullptr, false);
    if (q.is_discarded() || !q.is_object())
      return InternalError("quantization_config is not a JSON object");
    cfg["quantization_config"] = q;
  }
  return WriteText(dir / "config.json", cfg.dump(2) + "\n");
}

// Copies the tokenizer and other small metadata files.
Status CopySideFiles(const std::string& model_dir, const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(model_dir, ec)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    // BUILD files mark bundled models as Bazel packages; they are not model files.
    if (name == "config.json" || name == "BUILD" || name == "BUILD.bazel" || IsWeightFile(name))
      continue;
    fs::copy_file(e.path(), dir / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return InternalError("cannot copy " + e.path().string() + ": " + ec.message());
  }
  if (ec) return NotFoundError("cannot list " + model_dir + ": " + ec.message());
  return OkStatus();
}

}  // namespace

StatusOr<Artifact> ExportHfFakeQuantized(const io::TensorSource& original,
                                         const TensorProvider& provider,
                                         const HfFakeQuantExportOptions& opt,
                                         const ExportProgress& progress) {
  QD_ASSIGN_OR_RETURN(StagedDirectory staged,
                      StagedDirectory::Create(opt.output_dir, opt.overwrite));
  const fs::path dir = staged.staging_path();

  // Mirror the input's shard layout: tensors grouped by the file they came from.
  std::map<std::string, std::vector<std::string>> by_file;
  const std::vector<std::string> names = original.Names();
  for (const auto& name : names) {
    const io::TensorInfo* info = original.Find(name);
    by_file[fs::path(info->file).filename().string()].push_back(name);
  }

  json weight_map = json::object();
  uint64_t total_bytes = 0;
  int done = 0;
  for (const auto& [file, tensors] : by_file) {
    QD_ASSIGN_OR_RETURN(auto writer, io::SafetensorsWriter::Create((dir / file).string()));
    for (const auto& name : tensors) {
      const io::TensorInfo* info = original.Find(name);
      auto st = io::ParseSafetensorsDtype(info->dtype);
      if (!st) return DataLossError(name + ": unknown dtype " + info->dtype);
      QD_ASSIGN_OR_RETURN(at::ScalarType scalar, io::StorageScalarType(*st));
      QD_ASSIGN_OR_RETURN(at::Tensor t, provider(name));
      if (t.sizes().vec() != info->shape)
        return InternalError("export of " + name + ": shape changed from the input");
      QD_RETURN_IF_ERROR(io::AddTensor(*writer, name, t.to(scalar).contiguous(), *st));
      weight_map[name] = file;
      if (progress) progress(++done, static_cast<int>(names.size()));
    }
    total_bytes += writer->data_bytes();
    QD_RETURN_IF_ERROR(writer->Finish());
  }
  if (by_file.size() > 1) {
    json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
    QD_RETURN_IF_ERROR(WriteText(dir / "model.safetensors.index.json", index.dump(2) + "\n"));
  }
  QD_RETURN_IF_ERROR(WriteConfig(opt, dir));
  QD_RETURN_IF_ERROR(CopySideFiles(opt.model_dir, dir));
  QD_RETURN_IF_ERROR(staged.Commit());
  const std::string main_file =
      by_file.size() == 1 ? by_file.begin()->first : "model.safetensors.index.json";
  return DescribeArtifact(ExportFormat::kHfFakeQuantized, staged.final_path(), main_file);
}

}  // namespace quantd::exporter
