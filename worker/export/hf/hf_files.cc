#include "worker/export/hf/hf_files.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "worker/common/bounded_json.h"

namespace quantd::exporter {

namespace fs = std::filesystem;
using nlohmann::json;

StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read " + path);
  // Never read whole: the JSON parser refuses what is past the limit.
  std::string text = ReadAtMost(in, json_limits::kModelConfig);
  if (in.bad()) return DataLossError(path + ": read failed");
  return text;
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return InternalError("cannot write " + path);
  return OkStatus();
}

Status WriteHfConfig(const std::string& model_dir, const std::string& dir,
                     const json& quantization_config, std::optional<bool> tie_word_embeddings) {
  QD_ASSIGN_OR_RETURN(std::string text,
                      ReadTextFile((fs::path(model_dir) / "config.json").string()));
  QD_ASSIGN_OR_RETURN(json cfg,
                      ParseBoundedJson(text, JsonBounds{json_limits::kModelConfig},
                                       model_dir + "/config.json", StatusCode::kDataLoss));
  if (!cfg.is_object()) return DataLossError(model_dir + "/config.json is not a JSON object");
  // A model that was itself a quantized checkpoint loses its old config.
  if (!quantization_config.is_null())
    cfg["quantization_config"] = quantization_config;
  else
    cfg.erase("quantization_config");
  if (tie_word_embeddings &&
      (!cfg.contains("tie_word_embeddings") || cfg["tie_word_embeddings"] != *tie_word_embeddings))
    cfg["tie_word_embeddings"] = *tie_word_embeddings;
  // Names in a job's config come from tenants and need not be valid UTF-8:
  // such bytes are written as U+FFFD (dump() would throw), as the config's
  // own writer does (worker/config/quark_json.cc).
  return WriteTextFile((fs::path(dir) / "config.json").string(),
                       cfg.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

Status CopyHfSideFiles(const std::string& model_dir, const std::string& dir) {
  for (const char* name : kHfSideFiles) {
    const fs::path from = fs::path(model_dir) / name;
    std::error_code ec;
    if (!fs::is_regular_file(from, ec)) continue;
    fs::copy_file(from, fs::path(dir) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return InternalError("cannot copy " + from.string() + ": " + ec.message());
  }
  return OkStatus();
}

ShardedSafetensorsWriter::ShardedSafetensorsWriter(std::string dir, uint64_t max_shard_bytes)
    : dir_(std::move(dir)), max_shard_bytes_(max_shard_bytes) {}

ShardedSafetensorsWriter::~ShardedSafetensorsWriter() = default;

Status ShardedSafetensorsWriter::OpenShard() {
  char name[64];
  std::snprintf(name, sizeof(name), "shard-%05zu.safetensors.partial", shard_tmp_names_.size() + 1);
  QD_ASSIGN_OR_RETURN(current_, io::SafetensorsWriter::Create((fs::path(dir_) / name).string()));
  shard_tmp_names_.push_back(name);
  shard_tensors_.emplace_back();
  current_bytes_ = 0;
  return OkStatus();
}

Status ShardedSafetensorsWriter::Add(const std::string& name, io::SafetensorsDtype dtype,
                                     const std::vector<int64_t>& shape, const void* data,
                                     uint64_t nbytes) {
  if (current_ && max_shard_bytes_ > 0 && current_bytes_ > 0 &&
      current_bytes_ + nbytes > max_shard_bytes_) {
    QD_RETURN_IF_ERROR(current_->Finish());
    current_.reset();
  }
  if (!current_) QD_RETURN_IF_ERROR(OpenShard());
  QD_RETURN_IF_ERROR(current_->Add(name, dtype, shape, data, nbytes));
  current_bytes_ += nbytes;
  total_bytes_ += nbytes;
  shard_tensors_.back().push_back(name);
  return OkStatus();
}

StatusOr<std::string> ShardedSafetensorsWriter::Finish() {
  if (!current_ && shard_tmp_names_.empty()) QD_RETURN_IF_ERROR(OpenShard());
  if (current_) {
    QD_RETURN_IF_ERROR(current_->Finish());
    current_.reset();
  }
  const size_t n = shard_tmp_names_.size();
  std::error_code ec;
  if (n == 1) {
    fs::rename(fs::path(dir_) / shard_tmp_names_[0], fs::path(dir_) / "model.safetensors", ec);
    if (ec) return InternalError("cannot name model.safetensors: " + ec.message());
    return std::string("model.safetensors");
  }
  json weight_map = json::object();
  for (size_t i = 0; i < n; ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, n);
    fs::rename(fs::path(dir_) / shard_tmp_names_[i], fs::path(dir_) / name, ec);
    if (ec) return InternalError(std::string("cannot name ") + name + ": " + ec.message());
    for (const auto& t : shard_tensors_[i]) weight_map[t] = name;
  }
  json index = {{"metadata", {{"total_size", total_bytes_}}}, {"weight_map", weight_map}};
  QD_RETURN_IF_ERROR(WriteTextFile((fs::path(dir_) / "model.safetensors.index.json").string(),
                                   index.dump(2) + "\n"));
  return std::string("model.safetensors.index.json");
}

}  // namespace quantd::exporter
