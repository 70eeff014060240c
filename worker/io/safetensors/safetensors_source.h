// SafetensorsSource: a Hugging Face safetensors checkpoint as a TensorSource.
//
// Opens a single .safetensors file, a sharded checkpoint through its
// "*.safetensors.index.json", or a model directory holding either. Only the
// headers are read at open time; Load() preads one tensor's byte range into
// a fresh tensor, so a worker can stream a checkpoint far larger than its
// memory or address space. Every header is validated up front: a malformed
// header, an entry outside its file (truncation), a dtype/shape size
// mismatch, a shard missing a tensor its index promises, or a tensor stored
// twice is DATA_LOSS naming the file and the tensor.
#ifndef QUANTD_WORKER_IO_SAFETENSORS_SAFETENSORS_SOURCE_H_
#define QUANTD_WORKER_IO_SAFETENSORS_SAFETENSORS_SOURCE_H_

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/safetensors/posix_file.h"
#include "worker/io/safetensors/safetensors_format.h"
#include "worker/io/tensor_source.h"

namespace quantd::io {

class SafetensorsSource final : public TensorSource {
 public:
  // `path`: a .safetensors file, an index .json, or a directory containing
  // model.safetensors.index.json or model.safetensors. NOT_FOUND when none
  // exists; DATA_LOSS for corrupt headers or an inconsistent index.
  static StatusOr<std::unique_ptr<SafetensorsSource>> Open(const std::string& path);

  std::vector<std::string> Names() const override;
  const TensorInfo* Find(const std::string& name) const override;
  // Converts with at::Tensor::to(); FP8 widens to float through DecodeFp8
  // when `dtype` is floating point, and stays raw bytes for kByte.
  StatusOr<at::Tensor> Load(const std::string& name,
                            at::ScalarType dtype = at::kFloat) const override;
  std::map<std::string, std::string> Metadata() const override;
  std::string Description() const override { return description_; }

  // The tensor exactly as stored (F8 as kByte), without conversion.
  StatusOr<at::Tensor> LoadStored(const std::string& name) const;
  // The parsed entry (dtype enum, offsets); nullptr when absent.
  const SafetensorsEntry* FindEntry(const std::string& name) const;
  // The files this checkpoint spans, in index order.
  std::vector<std::string> Files() const;

 private:
  struct Shard {
    std::unique_ptr<ReadOnlyFile> file;
    SafetensorsHeader header;
  };
  struct Location {
    const Shard* shard;
    const SafetensorsEntry* entry;
    TensorInfo info;
  };

  SafetensorsSource() = default;
  Status AddShard(const std::string& path, const std::vector<std::string>* expected_names);

  std::string description_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::map<std::string, Location> tensors_;
  std::map<std::string, std::string> index_metadata_;
};

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_SAFETENSORS_SAFETENSORS_SOURCE_H_
