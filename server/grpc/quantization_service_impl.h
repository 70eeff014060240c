// quantd.v1.QuantizationService over gRPC: authenticates the call, hands the
// request to JobService, and converts the answer. No job logic here.
#ifndef QUANTD_SERVER_GRPC_QUANTIZATION_SERVICE_IMPL_H_
#define QUANTD_SERVER_GRPC_QUANTIZATION_SERVICE_IMPL_H_

#include "quantd/v1/quantization_service.grpc.pb.h"
#include "server/grpc/authenticator.h"
#include "server/jobs/job_service.h"

namespace quantd::server {

class QuantizationServiceImpl final : public v1::QuantizationService::Service {
 public:
  // Neither is owned.
  QuantizationServiceImpl(JobService* jobs, Authenticator* auth) : jobs_(jobs), auth_(auth) {}

  grpc::Status CreateJob(grpc::ServerContext* context, const v1::CreateJobRequest* request,
                         v1::Job* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::Job* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;

 private:
  JobService* jobs_;
  Authenticator* auth_;
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_GRPC_QUANTIZATION_SERVICE_IMPL_H_
