// StageTimes: where a block's wall time went, stage by stage ("float
// forward", "gptq columns", "scratch", ...). On a GPU a stage ends by
// waiting for the device work it queued, so each time is the device's, not
// the host's launch time; the waits cost an idle gap of a launch's latency
// per stage, a few per block.
#ifndef QUANTD_WORKER_PIPELINE_STAGE_TIMES_H_
#define QUANTD_WORKER_PIPELINE_STAGE_TIMES_H_

#include <c10/core/Device.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace quantd::pipeline {

// Returns once the work queued on the device's current stream is done; at
// once on the CPU.
void WaitForDevice(const c10::Device& device);

class StageTimes {
 public:
  explicit StageTimes(c10::Device device = c10::Device(c10::kCPU));

  // Waits for the device, then charges `stage` with the time since the last
  // Mark, less what Add charged to other stages in between.
  void Mark(const std::string& stage);
  // Charges `stage` with seconds measured elsewhere (within the current
  // interval; the next Mark does not count them again).
  void Add(const std::string& stage, double seconds);

  double Seconds(const std::string& stage) const;
  // "load 0.00 s, float forward 1.23 s, ..." in the order of first use.
  std::string Render() const;

 private:
  std::vector<std::pair<std::string, double>>::iterator Find(const std::string& stage);

  c10::Device device_;
  std::chrono::steady_clock::time_point last_;
  double added_ = 0;  // charged by Add since the last Mark
  std::vector<std::pair<std::string, double>> stages_;
};

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_STAGE_TIMES_H_
