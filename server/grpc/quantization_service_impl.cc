#include "server/grpc/quantization_service_impl.h"

#include "server/grpc/respond.h"
#include "server/grpc/status_conversion.h"
#include "worker/common/status.h"

namespace quantd::server {

grpc::Status QuantizationServiceImpl::CreateJob(grpc::ServerContext* context,
                                                const v1::CreateJobRequest* request,
                                                v1::Job* response) {
  return Respond(auth_, context, response,
                 [&](const Caller& caller) { return jobs_->CreateJob(caller, *request); });
}

grpc::Status QuantizationServiceImpl::GetJob(grpc::ServerContext* context,
                                             const v1::GetJobRequest* request, v1::Job* response) {
  return Respond(auth_, context, response,
                 [&](const Caller& caller) { return jobs_->GetJob(caller, *request); });
}

grpc::Status QuantizationServiceImpl::ListJobs(grpc::ServerContext* context,
                                               const v1::ListJobsRequest* request,
                                               v1::ListJobsResponse* response) {
  return Respond(auth_, context, response,
                 [&](const Caller& caller) { return jobs_->ListJobs(caller, *request); });
}

grpc::Status QuantizationServiceImpl::CancelJob(grpc::ServerContext* context,
                                                const v1::CancelJobRequest* request,
                                                v1::Job* response) {
  return Respond(auth_, context, response,
                 [&](const Caller& caller) { return jobs_->CancelJob(caller, *request); });
}

grpc::Status QuantizationServiceImpl::WatchJob(grpc::ServerContext* context,
                                               const v1::WatchJobRequest* request,
                                               grpc::ServerWriter<v1::JobEvent>* writer) {
  quantd::StatusOr<Caller> caller = auth_->Authenticate(*context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  WatchStream stream;
  // Write blocks under HTTP/2 flow control while the reader is slow; only
  // this stream's thread waits.
  stream.send = [writer](const v1::JobEvent& event) { return writer->Write(event); };
  stream.cancelled = [context] { return context->IsCancelled(); };
  return ToGrpcStatus(jobs_->WatchJob(*caller, *request, stream));
}

}  // namespace quantd::server
