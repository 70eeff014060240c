// Converts the engine's quantd::Status to and from google.rpc.Status, the
// form errors take on the wire (WorkerService.FailJob, Job.error). The reason
// travels as google.rpc.ErrorInfo (domain "quantd") and field violations as
// google.rpc.BadRequest, both packed in `details`.
#ifndef QUANTD_WORKER_RPC_STATUS_H_
#define QUANTD_WORKER_RPC_STATUS_H_

#include "google/rpc/status.pb.h"
#include "worker/common/status.h"

namespace quantd {

inline constexpr char kErrorDomain[] = "quantd";

google::rpc::Status ToRpcStatus(const Status& status);
Status FromRpcStatus(const google::rpc::Status& status);

}  // namespace quantd

#endif  // QUANTD_WORKER_RPC_STATUS_H_
