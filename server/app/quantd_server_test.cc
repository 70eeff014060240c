// A whole quantd frontend in-process (QuantdServer) on loopback, exercised
// through real gRPC channels: tenant isolation over every RPC, /metrics,
// TLS and mTLS, request limits, URI roots, the local workers' credential,
// and idempotency under concurrent load on every store backend.
#include "server/app/quantd_server.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/rpc/error_details.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "quantd/v1/quantization_service.grpc.pb.h"
#include "quantd/v1/worker_service.grpc.pb.h"
#include "server/auth/token_authenticator.h"
#include "server/common/errors.h"
#include "server/common/json_log.h"
#include "server/store/testing/test_database.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

std::string Runfile(const std::string& path) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/quantd/", path);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return "";
  std::string request = "GET " + path + " HTTP/1.0\r\n\r\n";
  if (write(fd, request.data(), request.size()) < 0) return "";
  std::string response;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, n);
  close(fd);
  return response;
}

// The value of one sample line ("name{labels} value") in a scrape.
double Sample(const std::string& scrape, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(scrape, '\n')) {
    if (absl::StartsWith(line, series + " ")) {
      return std::stod(std::string(line.substr(series.size() + 1)));
    }
  }
  return -1;
}

// One caller: a channel, and the bearer token it sends (if any).
struct Client {
  std::unique_ptr<v1::QuantizationService::Stub> jobs;
  std::unique_ptr<v1::WorkerService::Stub> workers;
  std::string token;

  Client(std::shared_ptr<grpc::Channel> channel, std::string bearer)
      : jobs(v1::QuantizationService::NewStub(channel)),
        workers(v1::WorkerService::NewStub(channel)),
        token(std::move(bearer)) {}

  void Prepare(grpc::ClientContext* context) const {
    if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  }
  grpc::Status Create(const v1::CreateJobRequest& r, v1::Job* job = nullptr) const {
    grpc::ClientContext c;
    Prepare(&c);
    v1::Job ignored;
    return jobs->CreateJob(&c, r, job != nullptr ? job : &ignored);
  }
  grpc::Status Get(const std::string& name, v1::Job* job = nullptr) const {
    grpc::ClientContext c;
    Prepare(&c);
    v1::GetJobRequest r;
    r.set_name(name);
    v1::Job ignored;
    return jobs->GetJob(&c, r, job != nullptr ? job : &ignored);
  }
  grpc::Status List(v1::ListJobsResponse* out) const {
    grpc::ClientContext c;
    Prepare(&c);
    return jobs->ListJobs(&c, v1::ListJobsRequest(), out);
  }
  grpc::Status Cancel(const std::string& name) const {
    grpc::ClientContext c;
    Prepare(&c);
    v1::CancelJobRequest r;
    r.set_name(name);
    v1::Job ignored;
    return jobs->CancelJob(&c, r, &ignored);
  }
  grpc::Status Watch(const std::string& name, int* events = nullptr) const {
    grpc::ClientContext c;
    Prepare(&c);
    v1::WatchJobRequest r;
    r.set_name(name);
    auto reader = jobs->WatchJob(&c, r);
    v1::JobEvent e;
    int n = 0;
    while (reader->Read(&e)) ++n;
    if (events != nullptr) *events = n;
    return reader->Finish();
  }
  grpc::Status Lease(v1::LeaseJobResponse* out) const {
    grpc::ClientContext c;
    Prepare(&c);
    v1::LeaseJobRequest r;
    r.mutable_worker()->set_id("w-test");
    r.mutable_worker()->set_device("cpu");
    return workers->LeaseJob(&c, r, out);
  }
  grpc::Status Heartbeat(const v1::Lease& lease) const {
    grpc::ClientContext c;
    Prepare(&c);
    v1::HeartbeatRequest r;
    *r.mutable_lease() = lease;
    v1::HeartbeatResponse out;
    return workers->Heartbeat(&c, r, &out);
  }
  grpc::Status Report(const v1::Lease& lease) const {
    grpc::ClientContext c;
    Prepare(&c);
    v1::ReportEventsRequest r;
    *r.mutable_lease() = lease;
    r.add_events()->mutable_log()->set_message("x");
    v1::ReportEventsResponse out;
    return workers->ReportEvents(&c, r, &out);
  }
  grpc::Status Complete(const v1::Lease& lease) const {
    grpc::ClientContext c;
    Prepare(&c);
    v1::CompleteJobRequest r;
    *r.mutable_lease() = lease;
    v1::CompleteJobResponse out;
    return workers->CompleteJob(&c, r, &out);
  }
  grpc::Status Fail(const v1::Lease& lease) const {
    grpc::ClientContext c;
    Prepare(&c);
    v1::FailJobRequest r;
    *r.mutable_lease() = lease;
    v1::FailJobResponse out;
    return workers->FailJob(&c, r, &out);
  }
};

v1::CreateJobRequest JobRequest(const std::string& model = "file:///models/stories260K",
                                const std::string& request_id = "") {
  v1::CreateJobRequest r;
  r.set_request_id(request_id);
  r.mutable_spec()->set_model_uri(model);
  r.mutable_spec()->mutable_quantization()->set_scheme("w_int4_per_group_sym");
  return r;
}

std::string Reason(const grpc::Status& status) {
  google::rpc::Status details;
  google::rpc::ErrorInfo info;
  if (!details.ParseFromString(status.error_details()) || details.details_size() == 0 ||
      !details.details(0).UnpackTo(&info)) {
    return "";
  }
  return info.reason();
}

class QuantdServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetMinLogLevel(LogLevel::kError);
    dir_ = testing::MakeTempDir("quantd-app");
    options_.listen = "127.0.0.1:0";
    options_.data_dir = dir_ + "/data";
    options_.shutdown_grace = absl::Milliseconds(200);
    options_.jobs.poll_interval = absl::Milliseconds(50);
    // The jobs here name models that need not exist.
    options_.allowed_uri_roots = {"file:///"};
  }

  void Start() {
    auto server = QuantdServer::Start(options_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  std::shared_ptr<grpc::Channel> Insecure() {
    return grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  }

  std::string dir_;
  QuantdServerOptions options_;
  std::unique_ptr<QuantdServer> server_;
};

TEST_F(QuantdServerTest, TenantIsolationOnEveryRpc) {
  WriteFile(dir_ + "/tokens",
            absl::StrCat(Sha256Hex("acme-token"), " acme submitter\n", Sha256Hex("globex-token"),
                         " globex submitter\n", Sha256Hex("ops-token"), " ops admin\n",
                         Sha256Hex("worker-token"), " - worker\n"));
  options_.auth_tokens_file = dir_ + "/tokens";
  options_.metrics_listen = "127.0.0.1:0";
  Start();
  auto channel = Insecure();
  Client acme(channel, "acme-token");
  Client globex(channel, "globex-token");
  Client ops(channel, "ops-token");
  Client worker(channel, "worker-token");
  Client nobody(channel, "");
  Client forged(channel, "guessed-token");

  // acme owns a running job (leased by the worker) and a queued one.
  v1::Job running, queued;
  ASSERT_TRUE(acme.Create(JobRequest("file:///models/a", "acme-1"), &running).ok());
  v1::LeaseJobResponse lease;
  ASSERT_TRUE(worker.Lease(&lease).ok());
  ASSERT_EQ(lease.job().name(), running.name());
  ASSERT_TRUE(acme.Create(JobRequest("file:///models/b"), &queued).ok());
  EXPECT_EQ(queued.tenant(), "acme");

  using grpc::StatusCode;
  struct Row {
    std::string what;
    std::function<grpc::Status()> call;
    StatusCode expected;
    std::string reason;
  };
  const std::vector<Row> table = {
      // Another tenant sees acme's jobs as absent.
      {"globex GetJob", [&] { return globex.Get(queued.name()); }, StatusCode::NOT_FOUND,
       "JOB_NOT_FOUND"},
      {"globex CancelJob", [&] { return globex.Cancel(queued.name()); }, StatusCode::NOT_FOUND,
       "JOB_NOT_FOUND"},
      {"globex WatchJob", [&] { return globex.Watch(queued.name()); }, StatusCode::NOT_FOUND,
       "JOB_NOT_FOUND"},
      {"globex GetJob running", [&] { return globex.Get(running.name()); }, StatusCode::NOT_FOUND,
       "JOB_NOT_FOUND"},
      // Submitters may not act as workers.
      {"acme LeaseJob",
       [&] {
         v1::LeaseJobResponse r;
         return acme.Lease(&r);
       },
       StatusCode::PERMISSION_DENIED, "PERMISSION_DENIED"},
      {"acme Heartbeat", [&] { return acme.Heartbeat(lease.lease()); },
       StatusCode::PERMISSION_DENIED, "PERMISSION_DENIED"},
      {"acme ReportEvents", [&] { return acme.Report(lease.lease()); },
       StatusCode::PERMISSION_DENIED, "PERMISSION_DENIED"},
      {"acme CompleteJob", [&] { return acme.Complete(lease.lease()); },
       StatusCode::PERMISSION_DENIED, "PERMISSION_DENIED"},
      {"acme FailJob", [&] { return acme.Fail(lease.lease()); }, StatusCode::PERMISSION_DENIED,
       "PERMISSION_DENIED"},
      // Nor may an admin: the WorkerService is for worker credentials.
      {"ops LeaseJob",
       [&] {
         v1::LeaseJobResponse r;
         return ops.Lease(&r);
       },
       StatusCode::PERMISSION_DENIED, "PERMISSION_DENIED"},
      {"ops Heartbeat", [&] { return ops.Heartbeat(lease.lease()); }, StatusCode::PERMISSION_DENIED,
       "PERMISSION_DENIED"},
      {"ops CompleteJob", [&] { return ops.Complete(lease.lease()); },
       StatusCode::PERMISSION_DENIED, "PERMISSION_DENIED"},
      {"ops FailJob", [&] { return ops.Fail(lease.lease()); }, StatusCode::PERMISSION_DENIED,
       "PERMISSION_DENIED"},
      // A worker credential without the lease's secret is stale.
      {"worker forged CompleteJob",
       [&] {
         v1::Lease forged_lease = lease.lease();
         forged_lease.set_secret("0123456789abcdef0123456789abcdef");
         return worker.Complete(forged_lease);
       },
       StatusCode::FAILED_PRECONDITION, "STALE_LEASE"},
      // Workers may not act as clients.
      {"worker CreateJob", [&] { return worker.Create(JobRequest()); },
       StatusCode::PERMISSION_DENIED, "PERMISSION_DENIED"},
      {"worker GetJob", [&] { return worker.Get(queued.name()); }, StatusCode::PERMISSION_DENIED,
       "PERMISSION_DENIED"},
      {"worker ListJobs",
       [&] {
         v1::ListJobsResponse r;
         return worker.List(&r);
       },
       StatusCode::PERMISSION_DENIED, "PERMISSION_DENIED"},
      {"worker CancelJob", [&] { return worker.Cancel(queued.name()); },
       StatusCode::PERMISSION_DENIED, "PERMISSION_DENIED"},
      {"worker WatchJob", [&] { return worker.Watch(queued.name()); },
       StatusCode::PERMISSION_DENIED, "PERMISSION_DENIED"},
      // No credential, or an unknown one: nothing at all.
      {"anonymous CreateJob", [&] { return nobody.Create(JobRequest()); },
       StatusCode::UNAUTHENTICATED, "MISSING_CREDENTIALS"},
      {"anonymous GetJob", [&] { return nobody.Get(queued.name()); }, StatusCode::UNAUTHENTICATED,
       "MISSING_CREDENTIALS"},
      {"anonymous ListJobs",
       [&] {
         v1::ListJobsResponse r;
         return nobody.List(&r);
       },
       StatusCode::UNAUTHENTICATED, "MISSING_CREDENTIALS"},
      {"anonymous CancelJob", [&] { return nobody.Cancel(queued.name()); },
       StatusCode::UNAUTHENTICATED, "MISSING_CREDENTIALS"},
      {"anonymous WatchJob", [&] { return nobody.Watch(queued.name()); },
       StatusCode::UNAUTHENTICATED, "MISSING_CREDENTIALS"},
      {"anonymous LeaseJob",
       [&] {
         v1::LeaseJobResponse r;
         return nobody.Lease(&r);
       },
       StatusCode::UNAUTHENTICATED, "MISSING_CREDENTIALS"},
      {"anonymous Heartbeat", [&] { return nobody.Heartbeat(lease.lease()); },
       StatusCode::UNAUTHENTICATED, "MISSING_CREDENTIALS"},
      {"anonymous ReportEvents", [&] { return nobody.Report(lease.lease()); },
       StatusCode::UNAUTHENTICATED, "MISSING_CREDENTIALS"},
      {"anonymous CompleteJob", [&] { return nobody.Complete(lease.lease()); },
       StatusCode::UNAUTHENTICATED, "MISSING_CREDENTIALS"},
      {"anonymous FailJob", [&] { return nobody.Fail(lease.lease()); }, StatusCode::UNAUTHENTICATED,
       "MISSING_CREDENTIALS"},
      {"forged GetJob", [&] { return forged.Get(queued.name()); }, StatusCode::UNAUTHENTICATED,
       "INVALID_TOKEN"},
      {"forged LeaseJob",
       [&] {
         v1::LeaseJobResponse r;
         return forged.Lease(&r);
       },
       StatusCode::UNAUTHENTICATED, "INVALID_TOKEN"},
      // The owner and an admin may.
      {"acme GetJob", [&] { return acme.Get(queued.name()); }, StatusCode::OK, ""},
      {"ops GetJob", [&] { return ops.Get(queued.name()); }, StatusCode::OK, ""},
      {"worker Heartbeat", [&] { return worker.Heartbeat(lease.lease()); }, StatusCode::OK, ""},
  };
  for (const Row& row : table) {
    grpc::Status status = row.call();
    EXPECT_EQ(status.error_code(), row.expected) << row.what << ": " << status.error_message();
    EXPECT_EQ(Reason(status), row.reason) << row.what;
  }

  // Lists are per tenant; an admin sees every tenant.
  v1::Job globex_job;
  ASSERT_TRUE(globex.Create(JobRequest("file:///models/g", "acme-1"), &globex_job).ok());
  EXPECT_NE(globex_job.name(), running.name());  // request ids are per tenant too
  v1::ListJobsResponse listed;
  ASSERT_TRUE(globex.List(&listed).ok());
  ASSERT_EQ(listed.jobs_size(), 1);
  EXPECT_EQ(listed.jobs(0).name(), globex_job.name());
  ASSERT_TRUE(acme.List(&listed).ok());
  EXPECT_EQ(listed.jobs_size(), 2);
  ASSERT_TRUE(ops.List(&listed).ok());
  EXPECT_EQ(listed.jobs_size(), 3);
  // Nothing another tenant tried changed acme's jobs.
  v1::Job after;
  ASSERT_TRUE(acme.Get(queued.name(), &after).ok());
  EXPECT_EQ(after.state(), v1::QUEUED);
  ASSERT_TRUE(acme.Get(running.name(), &after).ok());
  EXPECT_EQ(after.state(), v1::RUNNING);
  // The owner cancels; the worker finishes it.
  EXPECT_TRUE(acme.Cancel(queued.name()).ok());
  int events = 0;
  EXPECT_TRUE(acme.Watch(queued.name(), &events).ok());
  EXPECT_EQ(events, 3);
  EXPECT_TRUE(worker.Complete(lease.lease()).ok());

  // Health needs no token.
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext hc;
  grpc::health::v1::HealthCheckResponse hr;
  EXPECT_TRUE(health->Check(&hc, grpc::health::v1::HealthCheckRequest(), &hr).ok());

  // Every call above was counted by method and code.
  std::string scrape = HttpGet(server_->metrics_port(), "/metrics");
  EXPECT_EQ(Sample(scrape, "quantd_jobs_submitted_total"), 3) << scrape;
  EXPECT_EQ(Sample(scrape, "quantd_jobs_finished_total{state=\"succeeded\"}"), 1);
  EXPECT_EQ(Sample(scrape, "quantd_jobs_finished_total{state=\"cancelled\"}"), 1);
  EXPECT_EQ(Sample(scrape, "quantd_queue_depth"), 1);
  EXPECT_EQ(Sample(scrape, "quantd_workers"), 1);
  EXPECT_EQ(Sample(scrape,
                   "quantd_grpc_server_handled_total{code=\"NOT_FOUND\",method=\"quantd.v1."
                   "QuantizationService/GetJob\"}"),
            2);
  EXPECT_EQ(Sample(scrape,
                   "quantd_grpc_server_handled_total{code=\"UNAUTHENTICATED\",method=\"quantd.v1."
                   "WorkerService/LeaseJob\"}"),
            2);
  EXPECT_EQ(Sample(scrape,
                   "quantd_grpc_server_handling_seconds_count{code=\"OK\",method=\"quantd.v1."
                   "QuantizationService/CreateJob\"}"),
            3);
}

TEST_F(QuantdServerTest, LocalWorkersGetAWorkerCredential) {
  WriteFile(dir_ + "/tokens", absl::StrCat(Sha256Hex("acme-token"), " acme submitter\n"));
  options_.auth_tokens_file = dir_ + "/tokens";
  options_.local_workers = 1;
  options_.worker_binary = Runfile("server/supervisor/fake_worker");
  const std::string record_dir = testing::MakeTempDir("token-worker");
  options_.worker_extra_env = {"FAKE_WORKER_DIR=" + record_dir};
  Start();
  ASSERT_TRUE(server_->supervisor()->AwaitStarts(1, absl::Seconds(30)));
  const std::string record = absl::StrCat(record_dir, "/", server_->supervisor()->pids()[0]);
  std::string token;
  for (int i = 0; i < 3000 && token.empty(); ++i) {
    for (absl::string_view line : absl::StrSplit(ReadFile(record), '\n')) {
      if (absl::ConsumePrefix(&line, "env:QUANTD_WORKER_TOKEN=")) token = std::string(line);
    }
    if (token.empty()) absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(token.size(), 64u);
  Client worker(Insecure(), token);
  v1::LeaseJobResponse lease;
  EXPECT_TRUE(worker.Lease(&lease).ok());
  EXPECT_EQ(worker.Get("jobs/abc").error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(QuantdServerTest, SafeUriDefaultsAndTenantRootsReachLocalWorkers) {
  // No roots: no input, outputs only below <data-dir>/artifacts/.
  options_.allowed_uri_roots.clear();
  Start();
  Client anonymous(Insecure(), "");
  grpc::Status refused = anonymous.Create(JobRequest("file://" + dir_ + "/model"));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Reason(refused), "URI_NOT_ALLOWED");
  EXPECT_NE(refused.error_message().find("--allowed-uri-roots"), std::string::npos)
      << refused.error_message();
  server_.reset();

  // Per-tenant roots; local workers get the same roots and data dir.
  const std::string tenants = dir_ + "/tenants";
  ASSERT_EQ(mkdir(tenants.c_str(), 0755), 0);
  WriteFile(dir_ + "/tokens", absl::StrCat(Sha256Hex("acme-token"), " acme submitter\n",
                                           Sha256Hex("globex-token"), " globex submitter\n"));
  options_.auth_tokens_file = dir_ + "/tokens";
  options_.allowed_uri_roots = {"file://" + tenants + "/{tenant}"};
  options_.local_workers = 1;
  options_.worker_binary = Runfile("server/supervisor/fake_worker");
  const std::string record_dir = testing::MakeTempDir("roots-worker");
  options_.worker_extra_env = {"FAKE_WORKER_DIR=" + record_dir};
  Start();
  Client acme(Insecure(), "acme-token");
  Client globex(Insecure(), "globex-token");
  v1::CreateJobRequest own = JobRequest("file://" + tenants + "/acme/model");
  own.mutable_spec()->mutable_export_()->set_output_uri("file://" + tenants + "/acme/out");
  EXPECT_TRUE(acme.Create(own).ok());
  grpc::Status theirs = globex.Create(own);
  EXPECT_EQ(theirs.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Reason(theirs), "URI_NOT_ALLOWED");
  // A malformed URI is one more bad field, named with the others.
  v1::CreateJobRequest malformed = JobRequest("file://" + tenants + "/acme/model?/../../x");
  malformed.mutable_spec()->mutable_quantization()->set_scheme("w_int3_bogus");
  grpc::Status invalid = acme.Create(malformed);
  EXPECT_EQ(invalid.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(invalid.error_message().find("spec.model_uri"), std::string::npos);

  ASSERT_TRUE(server_->supervisor()->AwaitStarts(1, absl::Seconds(30)));
  const std::string record = absl::StrCat(record_dir, "/", server_->supervisor()->pids()[0]);
  std::vector<std::string> args;
  for (int i = 0; i < 3000 && args.empty(); ++i) {
    args = absl::StrSplit(ReadFile(record), '\n', absl::SkipEmpty());
    if (args.empty()) absl::SleepFor(absl::Milliseconds(10));
  }
  auto at = std::find(args.begin(), args.end(), "--allowed-roots");
  ASSERT_NE(at, args.end());
  ASSERT_NE(at + 1, args.end());
  EXPECT_EQ(*(at + 1), "file://" + tenants + "/{tenant}");
  auto data = std::find(args.begin(), args.end(), "--data-dir");
  ASSERT_NE(data, args.end());
  EXPECT_EQ(*(data + 1), options_.data_dir);
}

TEST_F(QuantdServerTest, TlsAndMutualTls) {
  options_.tls_cert_file = Runfile("server/app/testdata/server.pem");
  options_.tls_key_file = Runfile("server/app/testdata/server.key");
  Start();
  grpc::SslCredentialsOptions trust;
  trust.pem_root_certs = ReadFile(Runfile("server/app/testdata/ca.pem"));
  Client tls(grpc::CreateChannel(server_->address(), grpc::SslCredentials(trust)), "");
  v1::Job job;
  ASSERT_TRUE(tls.Create(JobRequest(), &job).ok());
  // A plaintext client cannot talk to a TLS server.
  Client plain(Insecure(), "");
  EXPECT_EQ(plain.Get(job.name()).error_code(), grpc::StatusCode::UNAVAILABLE);
  server_.reset();

  options_.tls_client_ca_file = Runfile("server/app/testdata/ca.pem");
  Start();
  Client no_cert(grpc::CreateChannel(server_->address(), grpc::SslCredentials(trust)), "");
  EXPECT_EQ(no_cert.Get(job.name()).error_code(), grpc::StatusCode::UNAVAILABLE);
  grpc::SslCredentialsOptions rogue = trust;
  rogue.pem_cert_chain = ReadFile(Runfile("server/app/testdata/rogue.pem"));
  rogue.pem_private_key = ReadFile(Runfile("server/app/testdata/rogue.key"));
  Client rogue_client(grpc::CreateChannel(server_->address(), grpc::SslCredentials(rogue)), "");
  EXPECT_EQ(rogue_client.Get(job.name()).error_code(), grpc::StatusCode::UNAVAILABLE);
  grpc::SslCredentialsOptions mutual = trust;
  mutual.pem_cert_chain = ReadFile(Runfile("server/app/testdata/client.pem"));
  mutual.pem_private_key = ReadFile(Runfile("server/app/testdata/client.key"));
  Client mtls(grpc::CreateChannel(server_->address(), grpc::SslCredentials(mutual)), "");
  v1::Job again;
  ASSERT_TRUE(mtls.Get(job.name(), &again).ok());  // same store: the job survived the restart
  EXPECT_EQ(again.name(), job.name());

  QuantdServerOptions half = options_;
  half.tls_key_file.clear();
  EXPECT_EQ(QuantdServer::Start(half).status().code(), quantd::StatusCode::kInvalidArgument);
}

TEST_F(QuantdServerTest, RequestQueueAndUriLimits) {
  options_.max_request_bytes = 64 * 1024;
  options_.jobs.max_queued_per_tenant = 2;
  const std::string models = dir_ + "/models";
  ASSERT_EQ(mkdir(models.c_str(), 0755), 0);
  options_.allowed_uri_roots = {"file://" + models};
  Start();
  Client client(Insecure(), "");
  v1::CreateJobRequest huge = JobRequest("file://" + models + "/m");
  (*huge.mutable_spec()->mutable_labels())["big"] = std::string(100 * 1024, 'x');
  EXPECT_EQ(client.Create(huge).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  grpc::Status denied = client.Create(JobRequest("file:///etc/passwd"));
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Reason(denied), "URI_NOT_ALLOWED");
  EXPECT_EQ(client.Create(JobRequest("file://" + models + "/../etc")).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  EXPECT_TRUE(client.Create(JobRequest("file://" + models + "/a")).ok());
  EXPECT_TRUE(client.Create(JobRequest("file://" + models + "/b")).ok());
  grpc::Status full = client.Create(JobRequest("file://" + models + "/c"));
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(Reason(full), "QUEUE_FULL");
}

TEST(ListenTest, LoopbackAddresses) {
  for (const char* loopback :
       {"127.0.0.1:50051", "127.8.9.10:1", "localhost:50051", "LOCALHOST:0", "[::1]:50051",
        "[::ffff:127.0.0.1]:5", "unix:/run/quantd.sock", "unix-abstract:quantd"}) {
    EXPECT_TRUE(IsLoopbackListen(loopback)) << loopback;
  }
  for (const char* open :
       {"0.0.0.0:50051", "[::]:50051", ":50051", "10.0.0.5:50051", "192.168.1.2:1",
        "[2001:db8::1]:5", "quantd.example:50051", "128.0.0.1:1", "localhost.example:1"}) {
    EXPECT_FALSE(IsLoopbackListen(open)) << open;
  }
}

// quantd refuses to listen beyond this host without tokens unless told to;
// with tokens, or --insecure, it serves.
TEST_F(QuantdServerTest, NonLoopbackListenNeedsTokensOrInsecure) {
  options_.listen = "0.0.0.0:0";
  auto refused = QuantdServer::Start(options_);
  EXPECT_EQ(refused.status().code(), quantd::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().reason(), "INSECURE_LISTEN");
  EXPECT_NE(refused.status().message().find("without --auth-tokens"), std::string::npos);
  EXPECT_NE(refused.status().message().find("--insecure"), std::string::npos);
  options_.listen = "[::]:0";
  EXPECT_EQ(QuantdServer::Start(options_).status().reason(), "INSECURE_LISTEN");

  options_.listen = "0.0.0.0:0";
  options_.insecure = true;
  Start();
  server_.reset();
  options_.insecure = false;
  WriteFile(dir_ + "/tokens", absl::StrCat(Sha256Hex("acme-token"), " acme submitter\n"));
  options_.auth_tokens_file = dir_ + "/tokens";
  Start();
  Client acme(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                  grpc::InsecureChannelCredentials()),
              "acme-token");
  EXPECT_TRUE(acme.Create(JobRequest()).ok());
}

// --http-listen: off by default, a port of its own, the same loopback rule
// as --listen, and the OpenAPI document served when one is given.
TEST_F(QuantdServerTest, HttpFaceListensAndServesTheOpenApiDocument) {
  Start();
  EXPECT_EQ(server_->http_port(), 0);
  server_.reset();

  options_.http_listen = "0.0.0.0:0";
  EXPECT_EQ(QuantdServer::Start(options_).status().reason(), "INSECURE_LISTEN");
  options_.http_listen = "127.0.0.1:not-a-port";
  EXPECT_EQ(QuantdServer::Start(options_).status().code(), quantd::StatusCode::kInvalidArgument);

  options_.http_listen = "127.0.0.1:0";
  options_.http_openapi_json = R"({"openapi": "3.0.3"})";
  Start();
  ASSERT_GT(server_->http_port(), 0);
  EXPECT_NE(server_->http_port(), server_->port());
  std::string reply = HttpGet(server_->http_port(), "/openapi.json");
  EXPECT_NE(reply.find("200 OK"), std::string::npos) << reply;
  EXPECT_NE(reply.find(R"({"openapi": "3.0.3"})"), std::string::npos) << reply;
  reply = HttpGet(server_->http_port(), "/v1/jobs");
  EXPECT_NE(reply.find("200 OK"), std::string::npos) << reply;
  server_.reset();

  // Without a document, /openapi.json is an unknown route.
  options_.http_openapi_json.clear();
  Start();
  reply = HttpGet(server_->http_port(), "/openapi.json");
  EXPECT_NE(reply.find("404 Not Found"), std::string::npos) << reply;
  EXPECT_NE(reply.find("ROUTE_NOT_FOUND"), std::string::npos) << reply;
}

// The 12 MiB spec of issue 17 is refused naming the field; it stores
// nothing, and the tenant's get, list, watch and cancel keep working.
TEST_F(QuantdServerTest, OversizedSpecIsRefusedAndTheTenantIsStillServed) {
  Start();
  Client client(Insecure(), "");
  v1::Job job;
  ASSERT_TRUE(client.Create(JobRequest(), &job).ok());
  v1::CreateJobRequest huge = JobRequest();
  huge.mutable_spec()->mutable_quantization()->set_quark_json("{\"x\": \"" +
                                                              std::string(12 << 20, 'a') + "\"}");
  grpc::Status refused = client.Create(huge);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reason(refused), "JOB_SPEC_TOO_LARGE");
  EXPECT_NE(refused.error_message().find("spec.quantization.quark_json"), std::string::npos)
      << refused.error_message();
  v1::ListJobsResponse listed;
  ASSERT_TRUE(client.List(&listed).ok());
  EXPECT_EQ(listed.jobs_size(), 1);
  EXPECT_TRUE(client.Get(job.name()).ok());
  EXPECT_TRUE(client.Cancel(job.name()).ok());
  int events = 0;
  EXPECT_TRUE(client.Watch(job.name(), &events).ok());
  EXPECT_EQ(events, 3);
}

class IdempotencyUnderLoadTest : public QuantdServerTest,
                                 public ::testing::WithParamInterface<testing::TestBackend> {};

TEST_P(IdempotencyUnderLoadTest, TwoHundredCreatesOverFiftyRequestIdsMakeFiftyJobs) {
  auto db = GetParam().create();
  ASSERT_NE(db, nullptr);
  options_.store_uri = db->uri();
  Start();
  constexpr int kCalls = 200;
  constexpr int kRequestIds = 50;
  constexpr int kThreads = 16;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < 4; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("quantd.channel", i);  // distinct channels, distinct connections
    channels.push_back(
        grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), args));
  }
  std::atomic<int> next{0};
  absl::Mutex mu;
  std::map<std::string, std::set<std::string>> names_by_request;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Client client(channels[t % channels.size()], "");
      for (int i = next++; i < kCalls; i = next++) {
        std::string request_id = absl::StrCat("req-", i % kRequestIds);
        v1::Job job;
        grpc::Status s =
            client.Create(JobRequest("file:///models/" + request_id, request_id), &job);
        if (!s.ok()) {
          ++failures;
          continue;
        }
        absl::MutexLock lock(&mu);
        names_by_request[request_id].insert(job.name());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  ASSERT_EQ(names_by_request.size(), static_cast<size_t>(kRequestIds));
  for (const auto& [request_id, names] : names_by_request) {
    EXPECT_EQ(names.size(), 1u) << request_id;  // every retry got the same job
  }
  EXPECT_EQ(*server_->store()->CountJobs(std::nullopt, v1::QUEUED), kRequestIds);
}

INSTANTIATE_TEST_SUITE_P(Backends, IdempotencyUnderLoadTest,
                         ::testing::ValuesIn(testing::AllTestBackends()),
                         [](const ::testing::TestParamInfo<testing::TestBackend>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace quantd::server
