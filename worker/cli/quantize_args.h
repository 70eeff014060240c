// quantd-quantize's command line: its flags, and the quantd.v1.Job they
// describe. The Job is built exactly as `quantctl submit` builds its
// CreateJobRequest's spec (same flag names, plain paths turned into absolute
// file:// URIs, by cli_common::FillJobSpec), so a local run and a served
// run of the same flags are the same job. Torch-free, so it is tested
// without LibTorch.
#ifndef QUANTD_WORKER_CLI_QUANTIZE_ARGS_H_
#define QUANTD_WORKER_CLI_QUANTIZE_ARGS_H_

#include <set>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "client/cli_common/args.h"
#include "client/cli_common/job_spec_flags.h"
#include "quantd/v1/job.pb.h"
#include "worker/pipeline/activation_offload.h"

namespace quantd::cli {

// The flags of quantd-quantize: those taking a value, and the booleans
// (the job flags of cli_common/job_spec_flags.h and the local-run ones).
const std::set<std::string>& QuantizeValueFlags();
const std::set<std::string>& QuantizeBoolFlags();

// ParseArgs with those flags; a bare word (a command) is an error.
quantd::StatusOr<cli_common::ParsedArgs> ParseQuantizeArgs(const std::vector<std::string>& argv);

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
quantd::StatusOr<LocalRunOptions> BuildRunOptions(const cli_common::ParsedArgs& a);

// Flags -> the job: name "jobs/<job_id>", spec from the flags, state QUEUED.
// INVALID_ARGUMENT naming the flag on a missing or malformed one. Whether
// the spec is acceptable is the engine's CheckJobSpec's business, not this.
quantd::StatusOr<quantd::v1::Job> BuildJob(const cli_common::ParsedArgs& a,
                                         const std::string& job_id);

// Plain paths become absolute file:// URIs (relative to the working
// directory); URIs pass through.
using cli_common::ToUri;

// quantd-quantize --help: the job flags (cli_common::JobSpecFlagsUsage's
// text, as `quantctl help` prints them) and the local-run flags.
std::string QuantizeUsage();

}  // namespace quantd::cli

#endif  // QUANTD_WORKER_CLI_QUANTIZE_ARGS_H_
