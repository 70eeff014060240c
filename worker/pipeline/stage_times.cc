#include "worker/pipeline/stage_times.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>

namespace quantd::pipeline {

void WaitForDevice(const c10::Device& device) {
  if (device.is_cpu()) return;
  // A copy to pageable host memory is ordered after everything queued on
  // the stream and returns when it is done (any LibTorch, any backend).
  (void)at::empty({1}, at::TensorOptions().device(device)).cpu();
}

StageTimes::StageTimes(c10::Device device)
    : device_(device), last_(std::chrono::steady_clock::now()) {}

std::vector<std::pair<std::string, double>>::iterator StageTimes::Find(const std::string& stage) {
  auto it =
      std::find_if(stages_.begin(), stages_.end(), [&](const auto& s) { return s.first == stage; });
  if (it != stages_.end()) return it;
  stages_.emplace_back(stage, 0.0);
  return stages_.end() - 1;
}

void StageTimes::Mark(const std::string& stage) {
  WaitForDevice(device_);
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  Find(stage)->second += std::max(0.0, elapsed - added_);
  last_ = now;
  added_ = 0;
}

void StageTimes::Add(const std::string& stage, double seconds) {
  Find(stage)->second += seconds;
  added_ += seconds;
}

double StageTimes::Seconds(const std::string& stage) const {
  for (const auto& [name, s] : stages_)
    if (name == stage) return s;
  return 0;
}

std::string StageTimes::Render() const {
  std::string out;
  for (const auto& [name, s] : stages_) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%s%s %.2f s", out.empty() ? "" : ", ", name.c_str(), s);
    out += buf;
  }
  return out;
}

}  // namespace quantd::pipeline
