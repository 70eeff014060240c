#include "server/grpc/worker_service_impl.h"

#include "server/grpc/respond.h"
#include "server/grpc/status_conversion.h"

namespace quantd::server {

grpc::Status WorkerServiceImpl::LeaseJob(grpc::ServerContext* context,
                                         const v1::LeaseJobRequest* request,
                                         v1::LeaseJobResponse* response) {
  return Respond(auth_, context, response, [&](const Caller& caller) {
    return leases_->LeaseJob(caller, *request, [context] { return context->IsCancelled(); });
  });
}

grpc::Status WorkerServiceImpl::Heartbeat(grpc::ServerContext* context,
                                          const v1::HeartbeatRequest* request,
                                          v1::HeartbeatResponse* response) {
  return Respond(auth_, context, response,
                 [&](const Caller& caller) { return leases_->Heartbeat(caller, *request); });
}

grpc::Status WorkerServiceImpl::ReportEvents(grpc::ServerContext* context,
                                             const v1::ReportEventsRequest* request,
                                             v1::ReportEventsResponse* response) {
  return Respond(auth_, context, response,
                 [&](const Caller& caller) { return leases_->ReportEvents(caller, *request); });
}

grpc::Status WorkerServiceImpl::CompleteJob(grpc::ServerContext* context,
                                            const v1::CompleteJobRequest* request,
                                            v1::CompleteJobResponse* response) {
  return Respond(auth_, context, response,
                 [&](const Caller& caller) { return leases_->CompleteJob(caller, *request); });
}

grpc::Status WorkerServiceImpl::FailJob(grpc::ServerContext* context,
                                        const v1::FailJobRequest* request,
                                        v1::FailJobResponse* response) {
  return Respond(auth_, context, response,
                 [&](const Caller& caller) { return leases_->FailJob(caller, *request); });
}

}  // namespace quantd::server
