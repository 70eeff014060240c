// The one place where quantd::Status (worker/common/status.h) becomes a
// google.rpc.Status, the form errors take on the wire, and back. The worker
// uses it for WorkerService.FailJob; the server uses it for Job.error and,
// through server/grpc/status_conversion.h, for grpc-status-details-bin.
// The reason travels as google.rpc.ErrorInfo (domain "quantd") and field
// violations as google.rpc.BadRequest, in that order, packed in `details`.
#ifndef QUANTD_WORKER_JOB_SPEC_RPC_STATUS_H_
#define QUANTD_WORKER_JOB_SPEC_RPC_STATUS_H_

#include "google/rpc/status.pb.h"
#include "worker/common/status.h"

namespace quantd {

inline constexpr char kErrorDomain[] = "quantd";

// When a non-OK status gets an ErrorInfo detail.
enum class ErrorInfoPolicy {
  // Only when the status names a reason (the worker's FailJob error).
  kWhenReasonSet,
  // Always, with the code's name (e.g. "NOT_FOUND") when the status names no
  // reason: clients of quantd's own RPCs always find a reason in details[0].
  kAlways,
};

google::rpc::Status ToRpcStatus(const Status& status,
                                ErrorInfoPolicy policy = ErrorInfoPolicy::kWhenReasonSet);
// Reads the ErrorInfo reason and BadRequest violations back; other details
// are dropped.
Status FromRpcStatus(const google::rpc::Status& status);

}  // namespace quantd

#endif  // QUANTD_WORKER_JOB_SPEC_RPC_STATUS_H_
