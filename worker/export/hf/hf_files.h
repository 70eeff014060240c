// The files around the weights of a Hugging Face model directory, shared by
// the HF exporters: config.json with a quantization_config, the tokenizer and
// other small files copied from the source, and a safetensors writer that
// splits large checkpoints into shards with a model.safetensors.index.json.
// Torch-free.
#ifndef QUANTD_WORKER_EXPORT_HF_HF_FILES_H_
#define QUANTD_WORKER_EXPORT_HF_HF_FILES_H_

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/safetensors/safetensors_writer.h"

namespace quantd::exporter {

// A config.json's text: at most json_limits::kModelConfig + 1 bytes, so the
// bounded parser refuses a larger file without it being held whole.
StatusOr<std::string> ReadTextFile(const std::string& path);
Status WriteTextFile(const std::string& path, const std::string& text);

// Writes `dir`/config.json: `model_dir`/config.json with
// "quantization_config" set to `quantization_config` (left out when null)
// and, when set, "tie_word_embeddings" set to `tie_word_embeddings` (a
// rotated model's head is no longer its embedding: see QuantizedModel).
Status WriteHfConfig(const std::string& model_dir, const std::string& dir,
                     const nlohmann::json& quantization_config,
                     std::optional<bool> tie_word_embeddings = std::nullopt);

// The files besides config.json and the weights that an HF export copies
// from the model directory: what loaders of the exported model read
// (generation config, tokenizer files, chat template) and the licence terms
// that travel with the weights. A fixed list: never "every file".
inline constexpr const char* kHfSideFiles[] = {
    "generation_config.json", "tokenizer.json",     "tokenizer.model",
    "tokenizer_config.json",  "special_tokens_map.json", "vocab.json",
    "merges.txt",             "added_tokens.json",  "chat_template.jinja",
    "chat_template.json",     "LICENSE",            "LICENSE.md",
    "LICENSE.txt",            "NOTICE",             "NOTICE.md",
};

// Copies each kHfSideFiles entry of `model_dir` that is a regular file into
// `dir`. The worker hands the engine a confined view of the model directory
// (worker/io/uri/model_files.h), so what an entry may link to is checked
// there.
Status CopyHfSideFiles(const std::string& model_dir, const std::string& dir);

// Writes tensors into model.safetensors, or into model-0000i-of-0000n
// shards of at most `max_shard_bytes` of tensor data each (a tensor larger
// than that gets a shard of its own) plus model.safetensors.index.json.
class ShardedSafetensorsWriter {
 public:
  // `max_shard_bytes` 0 means a single file.
  ShardedSafetensorsWriter(std::string dir, uint64_t max_shard_bytes);
  ~ShardedSafetensorsWriter();

  Status Add(const std::string& name, io::SafetensorsDtype dtype, const std::vector<int64_t>& shape,
             const void* data, uint64_t nbytes);
  // Closes the last shard, names the shards and writes the index. Returns
  // the main file (model.safetensors or the index).
  StatusOr<std::string> Finish();

  uint64_t data_bytes() const { return total_bytes_; }

 private:
  Status OpenShard();
  std::string dir_;
  uint64_t max_shard_bytes_;
  std::unique_ptr<io::SafetensorsWriter> current_;
  uint64_t current_bytes_ = 0;
  std::vector<std::string> shard_tmp_names_;
  std::vector<std::vector<std::string>> shard_tensors_;
  uint64_t total_bytes_ = 0;
};

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_HF_HF_FILES_H_
