// Engine-side validation of a JobSpec, run by quantd at CreateJob (before the
// job is stored) and by the worker before it runs one.
//
// It knows what the engine can do: a field naming a feature the engine does
// not support is refused with UNIMPLEMENTED naming that field, never
// ignored; malformed values are INVALID_ARGUMENT with one field violation
// per bad field. Torch-free, so the frontend links it without LibTorch.
#ifndef QUANTD_WORKER_PIPELINE_JOB_SPEC_CHECK_H_
#define QUANTD_WORKER_PIPELINE_JOB_SPEC_CHECK_H_

#include "quantd/v1/job.pb.h"
#include "worker/common/status.h"

namespace quantd::pipeline {

// OK, INVALID_ARGUMENT (reason INVALID_JOB_SPEC, every bad field listed as a
// violation with a path such as "spec.evaluation.n_ctx"), or UNIMPLEMENTED
// (reason FEATURE_NOT_BUILT) naming the first unsupported field.
Status CheckJobSpec(const quantd::v1::JobSpec& spec);

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_JOB_SPEC_CHECK_H_
