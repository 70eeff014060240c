// ResumeState: the checkpoint a job leaves in its scratch directory after
// every finished block, so that the next attempt (after a worker crash or a
// lost lease) continues after the last finished block instead of starting
// over.
//
// A checkpoint is the block's scratch file (quantized weights, exact weight
// and static activation parameters), the hidden states the next block needs,
// and `resume.json` naming the last finished block, the per-block reports
// already streamed, and a fingerprint of the job's options. The manifest is
// written last and atomically (rename), so a crash at any point leaves either
// the previous checkpoint or the new one.
#ifndef QUANTD_WORKER_PIPELINE_RESUME_STATE_H_
#define QUANTD_WORKER_PIPELINE_RESUME_STATE_H_

#include <optional>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/pipeline/job_observer.h"
#include "worker/pipeline/job_options.h"

namespace quantd::pipeline {

struct ResumeState {
  std::string fingerprint;
  int blocks_done = 0;  // blocks 0 .. blocks_done-1 are in the scratch store
  int64_t bytes_delta = 0;
  bool has_hidden = false;  // hidden_<blocks_done>.safetensors holds the next input
  std::vector<BlockReport> blocks;
};

// Identifies what a checkpoint was made for: everything in `options` that
// changes the quantized blocks.
std::string ResumeFingerprint(const JobOptions& options);

// The checkpoint in `scratch_dir`, or nullopt when there is none. A manifest
// that cannot be read is treated as absent (the job starts over).
std::optional<ResumeState> ReadResumeState(const std::string& scratch_dir);
// Same, telling an absent manifest (nullopt) from one that cannot be read
// (DATA_LOSS saying why: not JSON, another format version, a missing field).
StatusOr<std::optional<ResumeState>> LoadResumeState(const std::string& scratch_dir);

// Writes resume.json atomically.
Status WriteResumeState(const std::string& scratch_dir, const ResumeState& state);

// The scratch file holding the input of block `block` (0-based).
std::string HiddenFileName(int block);

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_RESUME_STATE_H_
