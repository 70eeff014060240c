// Translation between the wire (quantd.v1 protos) and the engine's own types
// (pipeline::JobOptions / JobReport / ProgressInfo / BlockReport). It lives
// in the worker because the worker is the only place where gRPC types and
// the engine meet.
#ifndef QUANTD_WORKER_RUNNER_JOB_TRANSLATION_H_
#define QUANTD_WORKER_RUNNER_JOB_TRANSLATION_H_

#include "quantd/v1/job.pb.h"
#include "worker/pipeline/job_observer.h"
#include "worker/pipeline/job_options.h"

namespace quantd::worker {

quantd::v1::Progress ToProto(const pipeline::ProgressInfo& p);
quantd::v1::BlockMetrics ToProto(const pipeline::BlockReport& b);
// `spec` supplies the dataset URIs recorded with each metric's protocol.
quantd::v1::JobResult ToProto(const pipeline::JobReport& r, const quantd::v1::JobSpec& spec);

}  // namespace quantd::worker

#endif  // QUANTD_WORKER_RUNNER_JOB_TRANSLATION_H_
