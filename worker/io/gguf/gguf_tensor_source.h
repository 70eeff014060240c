// GgufTensorSource: a GGUF file presented as a Hugging Face checkpoint.
//
// For the architectures in hf_mapping.h (llama, qwen2, qwen3, gpt2) tensors carry
// their Hugging Face names and layouts: "blk.0.attn_q.weight" is served as
// "model.layers.0.self_attn.q_proj.weight" with llama.cpp's RoPE row order
// undone, GPT-2 Conv1D weights are transposed back, and quantized blocks are
// dequantized exactly as ggml does. ConfigJson() is the config.json built from
// the metadata, so the runtime can build the model from a GGUF alone.
// Tensors are read lazily with pread; the file is never mapped whole.
#ifndef QUANTD_WORKER_IO_GGUF_GGUF_TENSOR_SOURCE_H_
#define QUANTD_WORKER_IO_GGUF_GGUF_TENSOR_SOURCE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/gguf/gguf_file.h"
#include "worker/io/gguf/hf_mapping.h"
#include "worker/io/tensor_source.h"

namespace quantd::gguf {

class GgufTensorSource : public io::TensorSource {
 public:
  // NOT_FOUND / DATA_LOSS / UNIMPLEMENTED as ParseGguf. A file of an
  // architecture without a Hugging Face mapping still opens, with GGUF names
  // and layouts, and ConfigJson() returns UNIMPLEMENTED for it.
  static StatusOr<std::unique_ptr<GgufTensorSource>> Open(const std::string& path);

  std::vector<std::string> Names() const override;
  const io::TensorInfo* Find(const std::string& name) const override;
  StatusOr<at::Tensor> Load(const std::string& name,
                            at::ScalarType dtype = at::kFloat) const override;
  // Every metadata key with its value as text (long arrays summarised, see
  // GgufValue::ToText), plus "config.json" when ConfigJson() succeeds.
  std::map<std::string, std::string> Metadata() const override;
  std::string Description() const override { return file_.path; }

  const GgufFile& file() const { return file_; }
  const std::string& architecture() const { return arch_; }
  // config.json equivalent; see BuildHfConfigJson.
  StatusOr<std::string> ConfigJson() const { return config_json_; }
  // The GGUF name behind a presented name (nullptr when unknown).
  const GgufTensorInfo* GgufInfo(const std::string& name) const;

 private:
  struct Entry {
    io::TensorInfo info;    // presented name, shape and dtype
    size_t gguf_index = 0;  // into file_.tensors
    LayoutChange change = LayoutChange::kNone;
  };
  GgufTensorSource(GgufFile file, std::unique_ptr<ByteSource> source);
  Status Index();

  GgufFile file_;
  std::unique_ptr<ByteSource> source_;
  std::string arch_;
  int64_t n_head_ = 0;
  int64_t n_head_kv_ = 0;
  StatusOr<std::string> config_json_;
  std::map<std::string, Entry> entries_;
};

}  // namespace quantd::gguf

#endif  // QUANTD_WORKER_IO_GGUF_GGUF_TENSOR_SOURCE_H_
