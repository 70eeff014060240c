// The quantd binary as a process: flags, health, reflection, the real
// CheckJobSpec, local workers (a fake worker program), SIGTERM shutdown (a
// stuck handler included) and a restart on the same data directory.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <postgresql/libpq-fe.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "google/rpc/error_details.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "quantd/v1/quantization_service.grpc.pb.h"
#include "server/store/testing/postgres_test_cluster.h"
#include "server/store/testing/test_database.h"
#include "server/testing/quantd_process.h"

namespace quantd::server {
namespace {

using testing::QuantdProcess;
using testing::QuantdProcessOptions;
using testing::Runfile;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::unique_ptr<QuantdProcess> StartQuantd(const std::string& data_dir,
                                           const std::string& worker_dir, int workers,
                                           std::vector<std::string> more_flags = {}) {
  QuantdProcessOptions options;
  options.data_dir = data_dir;
  options.extra_flags = {"--local-workers=" + std::to_string(workers),
                         "--worker-binary=" + Runfile("server/supervisor/fake_worker"),
                         "--lease-duration=2s", "--log-level=warning", "--shutdown-grace=300ms",
                         // The jobs here name models that need not exist.
                         "--allowed-uri-roots=file:///"};
  options.extra_flags.insert(options.extra_flags.end(), more_flags.begin(), more_flags.end());
  options.extra_env = {"FAKE_WORKER_DIR=" + worker_dir};
  auto process = QuantdProcess::Start(options);
  EXPECT_TRUE(process.ok()) << process.status();
  return process.ok() ? std::move(*process) : nullptr;
}

std::map<pid_t, std::vector<std::string>> RecordedWorkers(const std::string& dir, size_t n) {
  std::map<pid_t, std::vector<std::string>> out;
  for (int i = 0; i < 3000 && out.size() < n; ++i) {
    out.clear();
    std::string listing;
    if (FILE* p = popen(("ls " + dir).c_str(), "r")) {
      char buf[256];
      while (fgets(buf, sizeof(buf), p) != nullptr) listing += buf;
      pclose(p);
    }
    for (absl::string_view name : absl::StrSplit(listing, '\n', absl::SkipEmpty())) {
      if (name.find(".tmp") != absl::string_view::npos) continue;
      out[std::stoi(std::string(name))] =
          absl::StrSplit(ReadFile(dir + "/" + std::string(name)), '\n', absl::SkipEmpty());
    }
    if (out.size() < n) absl::SleepFor(absl::Milliseconds(10));
  }
  return out;
}

grpc::health::v1::HealthCheckResponse::ServingStatus Health(std::shared_ptr<grpc::Channel> channel,
                                                            const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.status();
}

// Asks grpc.reflection.v1alpha for its service list. The request is
// ServerReflectionRequest{list_services: ""} (field 7, an empty string),
// encoded by hand; the answer names each service as a string.
std::string ReflectionServiceList(std::shared_ptr<grpc::Channel> channel) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  cq.Next(&tag, &ok);
  const char request[] = {0x3a, 0x00};
  grpc::Slice slice(request, sizeof(request));
  grpc::ByteBuffer out(&slice, 1);
  call->Write(out, reinterpret_cast<void*>(2));
  cq.Next(&tag, &ok);
  grpc::ByteBuffer in;
  call->Read(&in, reinterpret_cast<void*>(3));
  cq.Next(&tag, &ok);
  std::string bytes;
  std::vector<grpc::Slice> slices;
  if (ok && in.Dump(&slices).ok()) {
    for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  call->WritesDone(reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return bytes;
}

// --local-worker-devices: with --local-workers 0 one worker per listed
// device, each started with its own --device.
TEST(QuantdBinaryTest, LocalWorkersTakeTheListedDevices) {
  const std::string data_dir = testing::MakeTempDir("quantd-dev");
  const std::string worker_dir = testing::MakeTempDir("quantd-dev-workers");
  auto quantd = StartQuantd(data_dir, worker_dir, 0, {"--local-worker-devices=cuda:0,cuda:1"});
  ASSERT_NE(quantd, nullptr);
  std::vector<std::string> devices;
  for (const auto& [pid, args] : RecordedWorkers(worker_dir, 2)) {
    auto it = std::find(args.begin(), args.end(), "--device");
    ASSERT_NE(it, args.end());
    devices.push_back(*(it + 1));
  }
  std::sort(devices.begin(), devices.end());
  EXPECT_EQ(devices, (std::vector<std::string>{"cuda:0", "cuda:1"}));
}

TEST(QuantdBinaryTest, ServesHealthReflectionJobsAndWorkersAndRestarts) {
  const std::string data_dir = testing::MakeTempDir("quantd-bin");
  const std::string worker_dir = testing::MakeTempDir("quantd-bin-workers");
  std::string job_name;
  {
    auto process = StartQuantd(data_dir, worker_dir, 2);
    ASSERT_NE(process, nullptr);
    QuantdProcess& quantd = *process;
    auto channel = quantd.NewChannel();
    EXPECT_EQ(Health(channel, ""), grpc::health::v1::HealthCheckResponse::SERVING);
    EXPECT_EQ(Health(channel, "quantd.v1.QuantizationService"),
              grpc::health::v1::HealthCheckResponse::SERVING);
    EXPECT_EQ(Health(channel, "quantd.v1.WorkerService"),
              grpc::health::v1::HealthCheckResponse::SERVING);
    std::string services = ReflectionServiceList(channel);
    EXPECT_NE(services.find("quantd.v1.QuantizationService"), std::string::npos) << services;
    EXPECT_NE(services.find("quantd.v1.WorkerService"), std::string::npos);
    EXPECT_NE(services.find("grpc.health.v1.Health"), std::string::npos);

    // Two supervised workers, dialing this quantd.
    auto workers = RecordedWorkers(worker_dir, 2);
    ASSERT_EQ(workers.size(), 2u);
    for (const auto& [pid, args] : workers) {
      ASSERT_EQ(args.size(), 10u);
      EXPECT_EQ(args[0], "--server");
      EXPECT_EQ(args[1], quantd.address());
      EXPECT_EQ(args[2], "--device");
      EXPECT_EQ(args[3], "cpu");
      EXPECT_EQ(args[4], "--data-dir");
      EXPECT_EQ(args[5], data_dir);
      EXPECT_EQ(args[6], "--worker-id");
      EXPECT_NE(args[7].find("-local-"), std::string::npos);
      // The worker enforces the frontend's roots itself.
      EXPECT_EQ(args[8], "--allowed-roots");
      EXPECT_EQ(args[9], "file:///");
    }

    auto client = v1::QuantizationService::NewStub(channel);
    // The engine's CheckJobSpec runs at CreateJob.
    v1::CreateJobRequest bad;
    bad.mutable_spec()->set_model_uri("file:///models/stories260K");
    bad.mutable_spec()->mutable_quantization()->set_scheme("w_int5_nonsense");
    grpc::ClientContext bad_context;
    v1::Job job;
    grpc::Status refused = client->CreateJob(&bad_context, bad, &job);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    google::rpc::Status details;
    ASSERT_TRUE(details.ParseFromString(refused.error_details()));
    ASSERT_EQ(details.details_size(), 2);
    google::rpc::BadRequest violations;
    ASSERT_TRUE(details.details(1).UnpackTo(&violations));
    EXPECT_EQ(violations.field_violations(0).field(), "spec.quantization.scheme");

    v1::CreateJobRequest good = bad;
    good.mutable_spec()->mutable_quantization()->set_scheme("w_int4_per_group_sym");
    good.set_request_id("restart-me");
    grpc::ClientContext good_context;
    grpc::Status created = client->CreateJob(&good_context, good, &job);
    ASSERT_TRUE(created.ok()) << created.error_message();
    EXPECT_EQ(job.state(), v1::QUEUED);
    EXPECT_EQ(job.spec().export_().output_uri(),
              "file://" + data_dir + "/artifacts/" + job.name().substr(5));
    job_name = job.name();

    const absl::Time stop = absl::Now();
    EXPECT_EQ(quantd.Terminate(), 0);
    EXPECT_LT(absl::Now() - stop, absl::Seconds(5));
    for (const auto& [pid, args] : workers) EXPECT_NE(kill(pid, 0), 0) << "worker " << pid;
  }
  {
    auto process = StartQuantd(data_dir, worker_dir, 0);
    ASSERT_NE(process, nullptr);
    QuantdProcess& quantd = *process;
    auto client = v1::QuantizationService::NewStub(quantd.NewChannel());
    grpc::ClientContext context;
    v1::GetJobRequest get;
    get.set_name(job_name);
    v1::Job job;
    ASSERT_TRUE(client->GetJob(&context, get, &job).ok());
    EXPECT_EQ(job.state(), v1::QUEUED);
    EXPECT_EQ(job.request_id(), "restart-me");
    EXPECT_EQ(quantd.Terminate(), 0);
  }
}

// --worker-arg and --local-worker-env take one value per occurrence: a
// comma stays inside the value, so a list-valued worker flag reaches the
// worker as one argument.
TEST(QuantdBinaryTest, RepeatableWorkerArgsKeepTheirCommas) {
  const std::string data_dir = testing::MakeTempDir("quantd-args");
  const std::string worker_dir = testing::MakeTempDir("quantd-args-workers");
  auto quantd = StartQuantd(data_dir, worker_dir, 1,
                            {"--worker-arg=--allowed-roots=/srv/a,/srv/b", "--worker-arg",
                             "--threads=2", "--local-worker-env=FAKE_WORKER_SEEN_LIST=x,y",
                             "--local_worker_env=FAKE_WORKER_SEEN_OTHER=z"});
  ASSERT_NE(quantd, nullptr);
  auto workers = RecordedWorkers(worker_dir, 1);
  ASSERT_EQ(workers.size(), 1u);
  const std::vector<std::string>& args = workers.begin()->second;
  auto roots = std::find(args.begin(), args.end(), "--allowed-roots=/srv/a,/srv/b");
  ASSERT_NE(roots, args.end()) << absl::StrJoin(args, " ");
  ASSERT_NE(roots + 1, args.end());
  EXPECT_EQ(*(roots + 1), "--threads=2");
  EXPECT_NE(std::find(args.begin(), args.end(), "env:FAKE_WORKER_SEEN_LIST=x,y"), args.end());
  EXPECT_NE(std::find(args.begin(), args.end(), "env:FAKE_WORKER_SEEN_OTHER=z"), args.end());
  EXPECT_EQ(quantd->Terminate(), 0);
}

// The per-tenant limits are on unless the operator turns them off.
TEST(QuantdBinaryTest, PerTenantLimitsHaveNonZeroDefaults) {
  std::string help;
  if (FILE* p = popen((Runfile("server/quantd") + " --helpfull 2>&1").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) help.append(buf, n);
    pclose(p);
  }
  auto default_of = [&](const std::string& flag) {
    size_t at = help.find("--" + flag + " ");
    if (at == std::string::npos) return std::string("(flag missing)");
    at = help.find("default: ", at);
    return help.substr(at + 9, help.find(';', at) - at - 9);
  };
  EXPECT_EQ(default_of("max_queued_per_tenant"), "1000") << help;
  EXPECT_EQ(default_of("max_watches_per_tenant"), "100");
  EXPECT_EQ(default_of("max_concurrent_watches"), "1000");
  EXPECT_EQ(default_of("insecure"), "false");
}

// Listening beyond this host without tokens would hand every tenant's jobs
// and the worker protocol to anyone who reaches the port: quantd refuses,
// says why, and starts with --insecure.
TEST(QuantdBinaryTest, NonLoopbackListenNeedsTokensOrInsecure) {
  const std::string dir = testing::MakeTempDir("quantd-listen");
  QuantdProcessOptions options;
  options.data_dir = dir + "/data";
  options.listen = "0.0.0.0:0";
  options.log_file = dir + "/refused.log";
  auto refused = QuantdProcess::Start(options);
  EXPECT_FALSE(refused.ok());
  const std::string log = ReadFile(options.log_file);
  EXPECT_NE(log.find("refusing to listen on 0.0.0.0:0 without --auth-tokens"), std::string::npos)
      << log;
  EXPECT_NE(log.find("--insecure"), std::string::npos) << log;

  options.extra_flags = {"--insecure"};
  options.log_file = dir + "/insecure.log";
  auto insecure = QuantdProcess::Start(options);
  ASSERT_TRUE(insecure.ok()) << insecure.status() << ReadFile(options.log_file);
  EXPECT_EQ(Health((*insecure)->NewChannel(), ""), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ((*insecure)->Terminate(), 0);
}

// A CreateJob stuck in the store (the test holds a lock on the jobs table,
// so the INSERT waits for PostgreSQL's 30 s statement timeout) keeps an
// RPC handler busy. SIGTERM must still end quantd: after --shutdown-grace
// the watchdog exits, logging what did not stop; a second SIGTERM exits at
// once.
class StuckShutdownTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = testing::PostgresTestCluster::Shared();
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    auto uri = (*cluster)->CreateDatabase();
    ASSERT_TRUE(uri.ok()) << uri.status();
    uri_ = *uri;
    dir_ = testing::MakeTempDir("quantd-stuck");
  }

  void TearDown() override {
    if (creator_.joinable()) creator_.join();
    if (lock_ != nullptr) PQfinish(lock_);
  }

  void StartQuantd(const std::string& grace) {
    QuantdProcessOptions options;
    options.data_dir = dir_ + "/data";
    options.log_file = log_file_ = dir_ + "/quantd.log";
    options.extra_flags = {"--store=" + uri_, "--shutdown-grace=" + grace, "--log-level=info",
                           "--allowed-uri-roots=file:///"};
    auto process = QuantdProcess::Start(options);
    ASSERT_TRUE(process.ok()) << process.status() << ReadFile(log_file_);
    quantd_ = std::move(*process);
  }

  // Takes a lock that lets reads through but makes every INSERT wait, and
  // sends a CreateJob into it; returns once quantd's INSERT is waiting.
  void StickACreateJob() {
    lock_ = PQconnectdb(uri_.c_str());
    ASSERT_EQ(PQstatus(lock_), CONNECTION_OK) << PQerrorMessage(lock_);
    PGresult* r = PQexec(lock_, "BEGIN; LOCK TABLE jobs IN SHARE MODE");
    ASSERT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQerrorMessage(lock_);
    PQclear(r);
    auto channel = quantd_->NewChannel();
    creator_ = std::thread([channel] {
      auto client = v1::QuantizationService::NewStub(channel);
      v1::CreateJobRequest request;
      request.mutable_spec()->set_model_uri("file:///models/stories260K");
      request.mutable_spec()->mutable_quantization()->set_scheme("w_int4_per_group_sym");
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
      v1::Job job;
      client->CreateJob(&context, request, &job);  // fails when quantd exits
    });
    PGconn* watch = PQconnectdb(uri_.c_str());
    bool waiting = false;
    for (const absl::Time give_up = absl::Now() + absl::Seconds(120);
         !waiting && absl::Now() < give_up;) {
      PGresult* q = PQexec(watch,
                           "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                           "'quantd' AND wait_event_type = 'Lock'");
      waiting = PQresultStatus(q) == PGRES_TUPLES_OK && std::string(PQgetvalue(q, 0, 0)) != "0";
      PQclear(q);
      if (!waiting) absl::SleepFor(absl::Milliseconds(20));
    }
    PQfinish(watch);
    ASSERT_TRUE(waiting) << "quantd's CreateJob never waited on the lock";
  }

  bool LogHas(const std::string& text) {
    return ReadFile(log_file_).find(text) != std::string::npos;
  }

  std::string uri_;
  std::string dir_;
  std::string log_file_;
  std::unique_ptr<QuantdProcess> quantd_;
  PGconn* lock_ = nullptr;
  std::thread creator_;
};

TEST_F(StuckShutdownTest, WatchdogEndsQuantdAfterTheGraceNamingWhatDidNotStop) {
  StartQuantd("500ms");
  StickACreateJob();
  quantd_->Signal(SIGTERM);
  // The handler would stay stuck for the 30 s statement timeout; quantd
  // exits on its own before that, with the watchdog's status (a clean
  // shutdown exits 0).
  EXPECT_EQ(quantd_->Wait(absl::Minutes(2)), 1) << ReadFile(log_file_);
  EXPECT_EQ(PQtransactionStatus(lock_), PQTRANS_INTRANS);  // still holding the lock
  EXPECT_TRUE(LogHas("shutdown did not finish within --shutdown-grace")) << ReadFile(log_file_);
  EXPECT_TRUE(LogHas("waiting for in-flight RPCs")) << ReadFile(log_file_);
  EXPECT_TRUE(LogHas("quantd.v1.QuantizationService/CreateJob x1")) << ReadFile(log_file_);
}

TEST_F(StuckShutdownTest, SecondSigtermExitsAtOnce) {
  StartQuantd("10m");
  StickACreateJob();
  quantd_->Signal(SIGTERM);
  for (const absl::Time give_up = absl::Now() + absl::Seconds(60);
       !LogHas("shutting down") && absl::Now() < give_up;) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(LogHas("shutting down"));
  quantd_->Signal(SIGTERM);
  EXPECT_EQ(quantd_->Wait(absl::Minutes(2)), 1) << ReadFile(log_file_);
  EXPECT_EQ(PQtransactionStatus(lock_), PQTRANS_INTRANS);
  EXPECT_TRUE(LogHas("second signal during shutdown")) << ReadFile(log_file_);
  EXPECT_TRUE(LogHas("QuantizationService/CreateJob")) << ReadFile(log_file_);
}

}  // namespace
}  // namespace quantd::server
