#include "server/supervisor/worker_devices.h"

#include <filesystem>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/common/errors.h"
#include "server/jobs/request_validation.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

std::vector<std::string> CudaNames(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(absl::StrCat("cuda:", i));
  return out;
}

}  // namespace

std::vector<std::string> VisibleGpuDevices(std::optional<std::string> cuda_visible_devices,
                                           const std::string& dev_dir) {
  if (cuda_visible_devices.has_value()) {
    int n = 0;
    for (absl::string_view entry : absl::StrSplit(*cuda_visible_devices, ',')) {
      entry = absl::StripAsciiWhitespace(entry);
      if (entry.empty() || entry == "-1") break;  // CUDA stops at an invalid entry
      ++n;
    }
    return CudaNames(n);
  }
  std::set<int> nodes;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dev_dir, ec)) {
    const std::string name = e.path().filename().string();
    int index = 0;
    if (name.rfind("nvidia", 0) == 0 && absl::SimpleAtoi(name.substr(6), &index) && index >= 0)
      nodes.insert(index);
  }
  return CudaNames(static_cast<int>(nodes.size()));
}

quantd::StatusOr<LocalWorkerPlan> PlanLocalWorkers(const std::string& spec, int requested,
                                                   const std::vector<std::string>& visible_gpus) {
  LocalWorkerPlan plan;
  if (requested < 0) {
    return InvalidRequestError({{"--local-workers", "must be 0 or more"}});
  }
  if (spec == "cpu" || spec.empty()) {
    plan.devices = {"cpu"};
    plan.count = requested;
    return plan;
  }
  if (spec == "gpus") {
    if (visible_gpus.empty()) {
      return MakeError(quantd::StatusCode::kFailedPrecondition, "NO_GPU",
                       "--local-worker-devices=gpus: no GPU is visible (no /dev/nvidiaN "
                       "node, or CUDA_VISIBLE_DEVICES is empty); use cpu or list devices");
    }
    plan.devices = visible_gpus;
  } else {
    for (absl::string_view d : absl::StrSplit(spec, ',')) {
      const std::string device(absl::StripAsciiWhitespace(d));
      if (std::string problem = CheckWorkerDevice(device); !problem.empty()) {
        return InvalidRequestError(
            {{"--local-worker-devices", absl::StrCat(problem, ", or the word gpus")}});
      }
      plan.devices.push_back(device);
    }
  }
  plan.count = requested > 0 ? requested : static_cast<int>(plan.devices.size());
  return plan;
}

}  // namespace quantd::server
