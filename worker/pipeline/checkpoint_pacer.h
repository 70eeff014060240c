// CheckpointPacer: when a resumable job writes its next checkpoint.
//
// A checkpoint holds the hidden states the next block starts from: 4 GiB for
// 128 x 2048 calibration tokens at hidden 4096, several seconds of fsync'd
// writing. Written after every block, that doubled an 8B GPTQ job's block
// time on the GPU. The pacer keeps the cost at about a tenth of the job: a
// checkpoint that took under a second is written after every block; a
// costlier one only once ten times its cost has passed since the previous
// one ended. The last block's is always written. A resumed job redoes the
// blocks after the last checkpoint. Torch-free.
#ifndef QUANTD_WORKER_PIPELINE_CHECKPOINT_PACER_H_
#define QUANTD_WORKER_PIPELINE_CHECKPOINT_PACER_H_

#include <chrono>

namespace quantd::pipeline {

class CheckpointPacer {
 public:
  using Clock = std::chrono::steady_clock;

  explicit CheckpointPacer(double cheap_seconds = 1.0, double work_per_cost = 10.0)
      : cheap_seconds_(cheap_seconds), work_per_cost_(work_per_cost) {}

  // Whether to checkpoint now, after block `done` of `n`.
  bool Due(int done, int n, Clock::time_point now) const {
    if (done >= n || last_seconds_ < cheap_seconds_) return true;
    return Seconds(now - last_end_) >= work_per_cost_ * last_seconds_;
  }
  // Records a checkpoint written from `start` to `end`.
  void Record(Clock::time_point start, Clock::time_point end) {
    last_end_ = end;
    last_seconds_ = Seconds(end - start);
  }
  double last_seconds() const { return last_seconds_; }
  // Seconds of work before the next checkpoint is due (0: after every block).
  double interval_seconds() const {
    return last_seconds_ < cheap_seconds_ ? 0 : work_per_cost_ * last_seconds_;
  }

 private:
  static double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
  double cheap_seconds_;
  double work_per_cost_;
  Clock::time_point last_end_;
  double last_seconds_ = 0;
};

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_CHECKPOINT_PACER_H_
