// Which device each of `quantd --local-workers`' workers runs on
// (--local-worker-devices): all on the CPU, one per visible GPU, or a list.
#ifndef QUANTD_SERVER_SUPERVISOR_WORKER_DEVICES_H_
#define QUANTD_SERVER_SUPERVISOR_WORKER_DEVICES_H_

#include <optional>
#include <string>
#include <vector>

#include "worker/common/status.h"

namespace quantd::server {

// The NVIDIA GPUs a process started now would see, as "cuda:0".."cuda:N-1":
// CUDA_VISIBLE_DEVICES when set (its entries up to the first empty or "-1"
// one, as CUDA reads it), else the /dev/nvidiaN device nodes under `dev_dir`.
// The frontend links no CUDA, so it counts rather than asks the driver.
std::vector<std::string> VisibleGpuDevices(std::optional<std::string> cuda_visible_devices,
                                           const std::string& dev_dir = "/dev");

struct LocalWorkerPlan {
  int count = 0;                     // worker processes
  std::vector<std::string> devices;  // worker i runs on devices[i % size]
};

// --local-worker-devices `spec` ("cpu", "gpus", or "cpu,cuda:0,cuda:1,...")
// with --local-workers `requested` (0: one per listed device, or none for
// "cpu"). INVALID_ARGUMENT naming --local-worker-devices for a bad entry;
// FAILED_PRECONDITION when "gpus" finds none.
quantd::StatusOr<LocalWorkerPlan> PlanLocalWorkers(const std::string& spec, int requested,
                                                   const std::vector<std::string>& visible_gpus);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_SUPERVISOR_WORKER_DEVICES_H_
