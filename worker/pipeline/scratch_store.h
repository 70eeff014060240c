// ScratchStore: the job's quantized weights, one safetensors file per
// finished block in the job's scratch directory.
//
// Blocks are quantized one at a time and dropped, so their results must live
// somewhere other than memory until evaluation and export read them back. As
// a TensorSource the store serves every tensor written so far; overlaid on
// the checkpoint it is the quantized model.
#ifndef QUANTD_WORKER_PIPELINE_SCRATCH_STORE_H_
#define QUANTD_WORKER_PIPELINE_SCRATCH_STORE_H_

#include <ATen/ATen.h>

#include <future>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/tensor_source.h"

namespace quantd::pipeline {

class ScratchStore final : public io::TensorSource {
 public:
  // Creates `dir` (and parents). FAILED_PRECONDITION when it cannot.
  static StatusOr<std::unique_ptr<ScratchStore>> Create(const std::string& dir);

  ScratchStore(const ScratchStore&) = delete;
  ScratchStore& operator=(const ScratchStore&) = delete;
  ~ScratchStore() override;  // waits for a write in flight

  // Writes one file named `file` (e.g. "block_00003") holding `tensors` in
  // float32, and serves them from now on. Replaces a file of the same name.
  Status Put(const std::string& file,
             const std::vector<std::pair<std::string, at::Tensor>>& tensors);

  // Put on a background thread, so that a block's write (hundreds of MB,
  // fsync'd) overlaps the next block's compute: the tensors are copied to
  // host float32 here, and at most one write is in flight (a second
  // PutAsync waits for the first). A write's error surfaces at the next
  // PutAsync, Put or Flush; its tensors are served once Flush returned OK.
  Status PutAsync(const std::string& file,
                  const std::vector<std::pair<std::string, at::Tensor>>& tensors);
  // Waits for the write in flight, if any, and serves its tensors.
  Status Flush();

  // Serves the tensors of an existing file `file` (left by an earlier
  // attempt of the job). NOT_FOUND when it is missing.
  Status Adopt(const std::string& file);

  // Side files: written and read back by name but not served as tensors
  // (e.g. the hidden states a resumed job continues from).
  Status PutSide(const std::string& file, const std::string& name, const at::Tensor& t) const;
  StatusOr<at::Tensor> LoadSide(const std::string& file, const std::string& name) const;
  void RemoveSide(const std::string& file) const;

  std::vector<std::string> Names() const override;
  const io::TensorInfo* Find(const std::string& name) const override;
  StatusOr<at::Tensor> Load(const std::string& name,
                            at::ScalarType dtype = at::kFloat) const override;
  std::string Description() const override { return "scratch " + dir_; }

  const std::string& dir() const { return dir_; }

 private:
  explicit ScratchStore(std::string dir) : dir_(std::move(dir)) {}
  std::string PathOf(const std::string& file) const;
  Status Serve(const std::string& path, const std::vector<std::string>& names);
  std::string dir_;
  // The write in flight: its file's path and tensor names.
  std::future<Status> pending_;
  std::string pending_path_;
  std::vector<std::string> pending_names_;
  // tensor name -> the file's source
  std::map<std::string, std::shared_ptr<const io::TensorSource>> by_name_;
};

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_SCRATCH_STORE_H_
