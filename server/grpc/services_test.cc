// The gRPC services on a real server bound to 127.0.0.1:0, called through a
// real channel: errors carry google.rpc details that parse on the client,
// and a job goes through the whole worker protocol over the wire.
#include <grpcpp/grpcpp.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "gtest/gtest.h"
#include "server/auth/token_authenticator.h"
#include "server/common/clock.h"
#include "server/common/errors.h"
#include "server/common/json_log.h"
#include "server/grpc/authenticator.h"
#include "server/grpc/quantization_service_impl.h"
#include "server/grpc/status_conversion.h"
#include "server/grpc/worker_service_impl.h"
#include "server/jobs/change_notifier.h"
#include "server/store/testing/test_database.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

class ServicesTest : public ::testing::Test {
 protected:
  // Authentication off, as quantd without --auth-tokens.
  virtual std::unique_ptr<Authenticator> MakeAuthenticator() {
    return std::make_unique<AnonymousAuthenticator>();
  }

  void SetUp() override {
    SetMinLogLevel(LogLevel::kError);
    auth_ = MakeAuthenticator();
    db_ = testing::NewSqliteTestDatabase();
    store_ = std::move(*db_->Open());
    JobsOptions options;
    options.data_dir = "/srv/quantd";
    options.poll_interval = absl::Milliseconds(50);
    // Stands in for the engine's CheckJobSpec: knows one scheme, and has
    // not built GPTQ.
    options.spec_check = [](const v1::JobSpec& spec, std::vector<std::string>*) -> quantd::Status {
      const auto& q = spec.quantization();
      if (q.algorithms_size() > 0 && q.algorithms(0).has_gptq()) {
        quantd::Status s = MakeError(quantd::StatusCode::kUnimplemented, "FEATURE_NOT_BUILT",
                                     "spec.quantization.algorithms[0].gptq is not built yet");
        AddViolations(s, {{"spec.quantization.algorithms[0].gptq", "not built yet"}});
        return s;
      }
      if (q.scheme() != "w_int4_per_group_sym") {
        return InvalidRequestError(
            {{"spec.quantization.scheme", "unknown scheme \"" + q.scheme() + "\""}});
      }
      return quantd::OkStatus();
    };
    jobs_ = std::make_unique<JobService>(store_.get(), Clock::Real(), &notifier_, nullptr, options);
    leases_ =
        std::make_unique<LeaseService>(store_.get(), Clock::Real(), &notifier_, nullptr, options);
    quantization_ = std::make_unique<QuantizationServiceImpl>(jobs_.get(), auth_.get());
    worker_ = std::make_unique<WorkerServiceImpl>(leases_.get(), auth_.get());

    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(quantization_.get());
    builder.RegisterService(worker_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                       grpc::InsecureChannelCredentials());
    client_ = v1::QuantizationService::NewStub(channel);
    worker_client_ = v1::WorkerService::NewStub(channel);
  }

  void TearDown() override {
    notifier_.Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  static v1::CreateJobRequest ValidRequest() {
    v1::CreateJobRequest request;
    request.mutable_spec()->set_model_uri("file:///models/stories260K");
    request.mutable_spec()->mutable_quantization()->set_scheme("w_int4_per_group_sym");
    return request;
  }

  // Parses the google.rpc.Status a failed call carried.
  static google::rpc::Status Details(const grpc::Status& status) {
    google::rpc::Status proto;
    EXPECT_TRUE(proto.ParseFromString(status.error_details())) << status.error_message();
    return proto;
  }

  static std::string Reason(const grpc::Status& status) {
    google::rpc::Status proto = Details(status);
    google::rpc::ErrorInfo info;
    if (proto.details_size() == 0 || !proto.details(0).UnpackTo(&info)) return "";
    EXPECT_EQ(info.domain(), "quantd");
    return info.reason();
  }

  std::unique_ptr<testing::TestDatabase> db_;
  std::unique_ptr<JobStore> store_;
  ChangeNotifier notifier_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<JobService> jobs_;
  std::unique_ptr<LeaseService> leases_;
  std::unique_ptr<QuantizationServiceImpl> quantization_;
  std::unique_ptr<WorkerServiceImpl> worker_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::QuantizationService::Stub> client_;
  std::unique_ptr<v1::WorkerService::Stub> worker_client_;
};

TEST_F(ServicesTest, BadRequestDetailsParseOnTheClient) {
  v1::CreateJobRequest request = ValidRequest();
  request.set_request_id(std::string(129, 'x'));
  request.mutable_spec()->clear_model_uri();
  request.mutable_spec()->mutable_quantization()->set_scheme("w_int5_nonsense");
  grpc::ClientContext context;
  v1::Job job;
  grpc::Status status = client_->CreateJob(&context, request, &job);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  google::rpc::Status details = Details(status);
  EXPECT_EQ(details.code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_EQ(details.details_size(), 2);
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(details.details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), "INVALID_ARGUMENT");
  EXPECT_EQ(info.domain(), "quantd");
  google::rpc::BadRequest bad;
  ASSERT_TRUE(details.details(1).UnpackTo(&bad));
  ASSERT_EQ(bad.field_violations_size(), 3);
  EXPECT_EQ(bad.field_violations(0).field(), "request_id");
  EXPECT_EQ(bad.field_violations(1).field(), "spec.model_uri");
  EXPECT_EQ(bad.field_violations(2).field(), "spec.quantization.scheme");
  EXPECT_EQ(bad.field_violations(2).description(), "unknown scheme \"w_int5_nonsense\"");

  // The same, read back through FromGrpcStatus.
  quantd::Status back = FromGrpcStatus(status);
  EXPECT_EQ(back.violations().size(), 3u);
}

TEST_F(ServicesTest, UnimplementedFeatureIsNamed) {
  v1::CreateJobRequest request = ValidRequest();
  request.mutable_spec()->mutable_quantization()->add_algorithms()->mutable_gptq();
  grpc::ClientContext context;
  v1::Job job;
  grpc::Status status = client_->CreateJob(&context, request, &job);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(Reason(status), "FEATURE_NOT_BUILT");
  google::rpc::BadRequest bad;
  ASSERT_TRUE(Details(status).details(1).UnpackTo(&bad));
  EXPECT_EQ(bad.field_violations(0).field(), "spec.quantization.algorithms[0].gptq");
}

TEST_F(ServicesTest, NotFoundAndAlreadyExistsCarryReasons) {
  grpc::ClientContext get_context;
  v1::GetJobRequest get;
  get.set_name("jobs/00000000000000000000000000");
  v1::Job job;
  grpc::Status missing = client_->GetJob(&get_context, get, &job);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Reason(missing), "JOB_NOT_FOUND");

  v1::CreateJobRequest request = ValidRequest();
  request.set_request_id("r1");
  grpc::ClientContext c1;
  ASSERT_TRUE(client_->CreateJob(&c1, request, &job).ok());
  request.mutable_spec()->set_model_uri("file:///other");
  grpc::ClientContext c2;
  grpc::Status reused = client_->CreateJob(&c2, request, &job);
  EXPECT_EQ(reused.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(Reason(reused), "REQUEST_ID_REUSED");
}

TEST_F(ServicesTest, AJobThroughTheWholeProtocol) {
  grpc::ClientContext create_context;
  v1::Job job;
  ASSERT_TRUE(client_->CreateJob(&create_context, ValidRequest(), &job).ok());

  v1::LeaseJobRequest lease_request;
  lease_request.mutable_worker()->set_id("w1");
  lease_request.mutable_worker()->set_device("cpu");
  lease_request.mutable_wait()->set_seconds(5);
  grpc::ClientContext lease_context;
  v1::LeaseJobResponse lease;
  ASSERT_TRUE(worker_client_->LeaseJob(&lease_context, lease_request, &lease).ok());
  ASSERT_EQ(lease.job().name(), job.name());

  // A watcher follows along from the start.
  std::vector<v1::JobEvent> watched;
  grpc::Status watch_status;
  grpc::ClientContext watch_context;
  v1::WatchJobRequest watch_request;
  watch_request.set_name(job.name());
  auto reader = client_->WatchJob(&watch_context, watch_request);
  std::thread watcher([&] {
    v1::JobEvent event;
    while (reader->Read(&event)) watched.push_back(event);
    watch_status = reader->Finish();
  });

  v1::ReportEventsRequest report;
  *report.mutable_lease() = lease.lease();
  report.add_events()->mutable_progress()->set_stage(v1::QUANTIZE);
  grpc::ClientContext report_context;
  v1::ReportEventsResponse report_response;
  ASSERT_TRUE(worker_client_->ReportEvents(&report_context, report, &report_response).ok());

  v1::HeartbeatRequest stale;
  *stale.mutable_lease() = lease.lease();
  stale.mutable_lease()->set_token(lease.lease().token() + 7);
  grpc::ClientContext stale_context;
  v1::HeartbeatResponse heartbeat;
  grpc::Status refused = worker_client_->Heartbeat(&stale_context, stale, &heartbeat);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(refused), "STALE_LEASE");

  v1::CompleteJobRequest complete;
  *complete.mutable_lease() = lease.lease();
  complete.mutable_result()->mutable_metrics()->mutable_quantized_perplexity()->set_perplexity(7.5);
  grpc::ClientContext complete_context;
  v1::CompleteJobResponse complete_response;
  ASSERT_TRUE(worker_client_->CompleteJob(&complete_context, complete, &complete_response).ok());
  watcher.join();

  EXPECT_TRUE(watch_status.ok()) << watch_status.error_message();
  ASSERT_EQ(watched.size(), 6u);  // QUEUED, leased log, RUNNING, progress, result, SUCCEEDED
  EXPECT_EQ(watched.front().state(), v1::QUEUED);
  EXPECT_EQ(watched[3].progress().stage(), v1::QUANTIZE);
  EXPECT_DOUBLE_EQ(watched[4].result().metrics().quantized_perplexity().perplexity(), 7.5);
  EXPECT_EQ(watched.back().state(), v1::SUCCEEDED);
  EXPECT_EQ(watched.back().sequence(), 6);

  grpc::ClientContext list_context;
  v1::ListJobsRequest list;
  list.add_states(v1::SUCCEEDED);
  v1::ListJobsResponse listed;
  ASSERT_TRUE(client_->ListJobs(&list_context, list, &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 1);
  EXPECT_EQ(listed.jobs(0).name(), job.name());
}

// With bearer tokens: one submitter tenant, an admin, two worker
// credentials.
class AuthenticatedServicesTest : public ServicesTest {
 protected:
  std::unique_ptr<Authenticator> MakeAuthenticator() override {
    auto auth = TokenAuthenticator::FromText(absl::StrCat(
        Sha256Hex("acme-token"), " acme submitter\n", Sha256Hex("ops-token"), " ops admin\n",
        Sha256Hex("worker-a-token"), " - worker\n", Sha256Hex("worker-b-token"), " - worker\n"));
    EXPECT_TRUE(auth.ok()) << auth.status();
    return std::move(*auth);
  }

  // A context that presents `token`.
  static std::unique_ptr<grpc::ClientContext> As(const std::string& token) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->AddMetadata("authorization", "Bearer " + token);
    return context;
  }

  grpc::Status Complete(const std::string& token, const v1::CompleteJobRequest& request) {
    v1::CompleteJobResponse response;
    return worker_client_->CompleteJob(As(token).get(), request, &response);
  }
};

// A lease is fenced over the wire: another worker credential, an admin, and
// a guessed secret are refused with their reasons, and the real worker's
// result stands; a repeat with another result is refused too.
TEST_F(AuthenticatedServicesTest, LeasesAreFencedByCredentialAndSecret) {
  v1::Job job;
  ASSERT_TRUE(client_->CreateJob(As("acme-token").get(), ValidRequest(), &job).ok());
  v1::LeaseJobRequest lease_request;
  lease_request.mutable_worker()->set_id("w-a");
  lease_request.mutable_worker()->set_device("cpu");
  v1::LeaseJobResponse lease;
  grpc::Status admin_lease = worker_client_->LeaseJob(As("ops-token").get(), lease_request, &lease);
  EXPECT_EQ(admin_lease.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(worker_client_->LeaseJob(As("worker-a-token").get(), lease_request, &lease).ok());
  ASSERT_EQ(lease.job().name(), job.name());
  EXPECT_EQ(lease.lease().secret().size(), 32u);

  v1::CompleteJobRequest forged;
  *forged.mutable_lease() = lease.lease();
  forged.mutable_result()->add_artifacts()->set_uri("file:///attacker/model");
  grpc::Status other = Complete("worker-b-token", forged);
  EXPECT_EQ(other.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Reason(other), "LEASE_HELD_BY_ANOTHER_CREDENTIAL");
  grpc::Status admin = Complete("ops-token", forged);
  EXPECT_EQ(admin.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Reason(admin), "PERMISSION_DENIED");
  v1::CompleteJobRequest guessed = forged;
  guessed.mutable_lease()->set_secret("0123456789abcdef0123456789abcdef");
  grpc::Status stale = Complete("worker-a-token", guessed);
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(stale), "STALE_LEASE");
  grpc::Status submitter = Complete("acme-token", forged);
  EXPECT_EQ(submitter.error_code(), grpc::StatusCode::PERMISSION_DENIED);

  v1::CompleteJobRequest real;
  *real.mutable_lease() = lease.lease();
  real.mutable_result()->add_artifacts()->set_uri("file:///srv/quantd/artifacts/real");
  ASSERT_TRUE(Complete("worker-a-token", real).ok());
  EXPECT_TRUE(Complete("worker-a-token", real).ok());  // a retry of the same result
  grpc::Status different = Complete("worker-a-token", forged);
  EXPECT_EQ(different.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(different), "JOB_ALREADY_FINISHED");
  EXPECT_EQ(Complete("worker-b-token", real).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  v1::GetJobRequest get;
  get.set_name(job.name());
  v1::Job done;
  ASSERT_TRUE(client_->GetJob(As("acme-token").get(), get, &done).ok());
  EXPECT_EQ(done.state(), v1::SUCCEEDED);
  ASSERT_EQ(done.result().artifacts_size(), 1);
  EXPECT_EQ(done.result().artifacts(0).uri(), "file:///srv/quantd/artifacts/real");
}

}  // namespace
}  // namespace quantd::server
