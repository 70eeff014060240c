// BlockPrefetcher: loads block i+1 on a background thread while block i is
// being processed, so reading the checkpoint and staging the weights for the
// GPU overlap with the device's compute (docs/worker.md, "GPU execution").
#ifndef QUANTD_WORKER_PIPELINE_BLOCK_PREFETCHER_H_
#define QUANTD_WORKER_PIPELINE_BLOCK_PREFETCHER_H_

#include <functional>
#include <future>
#include <utility>

#include "worker/common/status.h"

namespace quantd::pipeline {

template <typename T>
class BlockPrefetcher {
 public:
  using Loader = std::function<StatusOr<T>(int)>;

  // Disabled, it loads each block when asked (no second block in memory).
  BlockPrefetcher(Loader load, bool enabled) : load_(std::move(load)), enabled_(enabled) {}
  ~BlockPrefetcher() {
    if (next_.valid()) next_.wait();
  }
  BlockPrefetcher(const BlockPrefetcher&) = delete;
  BlockPrefetcher& operator=(const BlockPrefetcher&) = delete;

  // Block i of n, then starts loading block i+1 (when there is one). A block
  // asked for out of order is loaded now and the prefetched one dropped.
  StatusOr<T> Get(int i, int n) {
    StatusOr<T> block = Status(StatusCode::kInternal, "unset");
    if (next_.valid() && next_index_ == i) {
      block = next_.get();
    } else {
      if (next_.valid()) (void)next_.get();  // the prefetched block, unwanted
      block = load_(i);
    }
    if (enabled_ && block.ok() && i + 1 < n) {
      next_index_ = i + 1;
      next_ = std::async(std::launch::async, load_, i + 1);
    }
    return block;
  }

  // Whether block i is the one loading in the background (tests).
  bool Prefetching(int i) const { return next_.valid() && next_index_ == i; }

 private:
  Loader load_;
  bool enabled_;
  int next_index_ = -1;
  std::future<StatusOr<T>> next_;
};

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_BLOCK_PREFETCHER_H_
