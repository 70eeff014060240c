// quantd-quantize's command line: its flags, and the quantd.v1.Job they
// describe. The Job is built exactly as `quantctl submit` builds its
// CreateJobRequest's spec (same flag names, plain paths turned into absolute
// file:// URIs), plus the spec fields quantctl leaves to structured configs
// (FP8 KV cache, accuracy gate), so a local run and a served run of the same
// flags are the same job. Torch-free, so it is tested without LibTorch.
#ifndef QUANTD_WORKER_CLI_QUANTIZE_ARGS_H_
#define QUANTD_WORKER_CLI_QUANTIZE_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/quantctl/args.h"
#include "client/quantctl/job_spec_flags.h"
#include "quantd/v1/job.pb.h"
#include "worker/pipeline/activation_offload.h"

namespace quantd::cli {

// The flags of quantd-quantize (value flags and booleans).
absl::StatusOr<quantctl::ParsedArgs> ParseQuantizeArgs(const std::vector<std::string>& argv);

// Settings of the local run itself (not part of the job).
struct LocalRunOptions {
  std::string device = "cpu";              // --device
  int threads = 0;                         // --threads (0: one per core)
  bool json = false;                       // -o json
  std::string data_dir = "./quantd-data";  // --data-dir: scratch, downloads, default output
  bool keep_scratch = false;               // --keep-scratch
  pipeline::ActivationOffload activation_offload = pipeline::ActivationOffload::kAuto;
};

// Flags -> run options. INVALID_ARGUMENT naming the flag on a bad value.
absl::StatusOr<LocalRunOptions> BuildRunOptions(const quantctl::ParsedArgs& a);

// Flags -> the job: name "jobs/<job_id>", spec from the flags, state QUEUED.
// INVALID_ARGUMENT naming the flag on a missing or malformed one. Whether
// the spec is acceptable is the engine's CheckJobSpec's business, not this.
absl::StatusOr<quantd::v1::Job> BuildJob(const quantctl::ParsedArgs& a, const std::string& job_id);

// Plain paths become absolute file:// URIs (relative to the working
// directory); URIs pass through.
using quantctl::ToUri;

extern const char kQuantizeUsage[];

}  // namespace quantd::cli

#endif  // QUANTD_WORKER_CLI_QUANTIZE_ARGS_H_
