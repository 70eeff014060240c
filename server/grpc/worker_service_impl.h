// quantd.v1.WorkerService over gRPC: authenticates the worker, hands the
// request to LeaseService, and converts the answer. No job logic here.
#ifndef QUANTD_SERVER_GRPC_WORKER_SERVICE_IMPL_H_
#define QUANTD_SERVER_GRPC_WORKER_SERVICE_IMPL_H_

#include "quantd/v1/worker_service.grpc.pb.h"
#include "server/grpc/authenticator.h"
#include "server/jobs/lease_service.h"

namespace quantd::server {

class WorkerServiceImpl final : public v1::WorkerService::Service {
 public:
  // Neither is owned.
  WorkerServiceImpl(LeaseService* leases, Authenticator* auth) : leases_(leases), auth_(auth) {}

  grpc::Status LeaseJob(grpc::ServerContext* context, const v1::LeaseJobRequest* request,
                        v1::LeaseJobResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status ReportEvents(grpc::ServerContext* context, const v1::ReportEventsRequest* request,
                            v1::ReportEventsResponse* response) override;
  grpc::Status CompleteJob(grpc::ServerContext* context, const v1::CompleteJobRequest* request,
                           v1::CompleteJobResponse* response) override;
  grpc::Status FailJob(grpc::ServerContext* context, const v1::FailJobRequest* request,
                       v1::FailJobResponse* response) override;

 private:
  LeaseService* leases_;
  Authenticator* auth_;
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_GRPC_WORKER_SERVICE_IMPL_H_
