#include "server/metrics/quantd_metrics.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"
#include "server/jobs/job_transitions.h"
#include "server/metrics/grpc_metrics_interceptor.h"
#include "server/store/testing/test_database.h"

namespace quantd::server {
namespace {

bool Contains(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::string request = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  EXPECT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string response;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, n);
  close(fd);
  return response;
}

class QuantdMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = testing::NewSqliteTestDatabase();
    store_ = std::move(*db_->Open());
    metrics_ = std::make_unique<QuantdMetrics>(store_.get(), &clock_, absl::Seconds(60));
  }

  FakeClock clock_;
  std::unique_ptr<testing::TestDatabase> db_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<QuantdMetrics> metrics_;
};

TEST_F(QuantdMetricsTest, JobLifecycleCounters) {
  v1::Job job;
  job.set_name("jobs/x");
  metrics_->JobSubmitted(job);
  metrics_->JobSubmitted(job);
  job.set_state(v1::SUCCEEDED);
  auto* timing = job.mutable_result()->mutable_metrics()->add_stage_timings();
  timing->set_stage(v1::QUANTIZE);
  timing->set_seconds(12);
  metrics_->JobFinished(job, absl::Seconds(40));
  job.set_state(v1::FAILED);
  job.clear_result();
  metrics_->LeaseExpired(job);
  metrics_->JobFinished(job, absl::Seconds(2));

  std::string text = metrics_->Scrape();
  EXPECT_TRUE(Contains(text, "quantd_jobs_submitted_total 2\n")) << text;
  EXPECT_TRUE(Contains(text, "quantd_jobs_finished_total{state=\"succeeded\"} 1\n"));
  EXPECT_TRUE(Contains(text, "quantd_jobs_finished_total{state=\"failed\"} 1\n"));
  EXPECT_TRUE(Contains(text, "quantd_jobs_finished_total{state=\"cancelled\"} 0\n"));
  EXPECT_TRUE(Contains(text, "quantd_job_duration_seconds_count 2\n"));
  EXPECT_TRUE(Contains(text, "quantd_job_duration_seconds_sum 42\n"));
  EXPECT_TRUE(Contains(text, "quantd_job_duration_seconds_bucket{le=\"5\"} 1\n"));
  EXPECT_TRUE(Contains(text, "quantd_stage_duration_seconds_sum{stage=\"quantize\"} 12\n"));
  EXPECT_TRUE(Contains(text, "quantd_lease_expirations_total 1\n"));
  EXPECT_TRUE(Contains(text, "quantd_build_info{store=\"sqlite\",version=\"0.1.0\"} 1\n"));
  EXPECT_FALSE(Contains(text, "jobs/x"));  // never a job id as a label
}

v1::WorkerInfo Worker(const std::string& id, const std::string& device, int64_t total = 0,
                     int64_t used = 0) {
  v1::WorkerInfo w;
  w.set_id(id);
  w.set_device(device);
  w.set_gpu_memory_total_bytes(total);
  w.set_gpu_memory_used_bytes(used);
  return w;
}

TEST_F(QuantdMetricsTest, QueueDepthAndWorkersAreReadAtScrape) {
  for (int i = 0; i < 3; ++i) {
    JobRecord r;
    r.job.set_name("jobs/q" + std::to_string(i));
    r.job.set_state(i == 2 ? v1::RUNNING : v1::QUEUED);
    ASSERT_TRUE(store_->CreateJob(r, {}, {}).ok());
  }
  metrics_->WorkerSeen(Worker("w1", "cpu"));
  clock_.Advance(absl::Seconds(30));
  metrics_->WorkerSeen(Worker("w2", "cuda:0", 85899345920, 1073741824));
  metrics_->WorkerSeen(Worker("w2", "cuda:0", 85899345920, 2147483648));
  std::string text = metrics_->Scrape();
  EXPECT_TRUE(Contains(text, "quantd_queue_depth 2\n")) << text;
  EXPECT_TRUE(Contains(text, "quantd_workers 2\n"));
  EXPECT_TRUE(Contains(
      text, "quantd_gpu_memory_used_bytes{device=\"cuda:0\",worker=\"w2\"} 2147483648\n"))
      << text;
  EXPECT_TRUE(Contains(
      text, "quantd_gpu_memory_total_bytes{device=\"cuda:0\",worker=\"w2\"} 85899345920\n"));
  EXPECT_FALSE(Contains(text, "worker=\"w1\""));  // a CPU worker has no GPU gauges
  clock_.Advance(absl::Seconds(31));  // w1 is now silent for over a minute
  EXPECT_TRUE(Contains(metrics_->Scrape(), "quantd_workers 1\n"));
  clock_.Advance(absl::Seconds(61));  // and now w2: its gauges go with it
  text = metrics_->Scrape();
  EXPECT_TRUE(Contains(text, "quantd_workers 0\n"));
  EXPECT_FALSE(Contains(text, "quantd_gpu_memory_used_bytes{"));
}

TEST_F(QuantdMetricsTest, RpcCountersAndHttpEndpoint) {
  metrics_->RpcHandled("quantd.v1.QuantizationService/GetJob", "OK", 0.002);
  metrics_->RpcHandled("quantd.v1.QuantizationService/GetJob", "NOT_FOUND", 0.001);
  metrics_->RpcHandled("quantd.v1.QuantizationService/GetJob", "OK", 0.003);
  ASSERT_TRUE(metrics_->Serve("127.0.0.1:0").ok());
  ASSERT_GT(metrics_->port(), 0);
  std::string response = HttpGet(metrics_->port(), "/metrics");
  EXPECT_TRUE(Contains(response, "200 OK")) << response;
  EXPECT_TRUE(Contains(response,
                       "quantd_grpc_server_handled_total{code=\"OK\",method=\"quantd.v1."
                       "QuantizationService/GetJob\"} 2\n"))
      << response;
  EXPECT_TRUE(Contains(response,
                       "quantd_grpc_server_handling_seconds_count{code=\"NOT_FOUND\",method="
                       "\"quantd.v1.QuantizationService/GetJob\"} 1\n"));
  EXPECT_TRUE(Contains(response, "quantd_queue_depth 0\n"));
}

TEST(InFlightRpcsTest, CountsCallsByMethodUntilTheyFinish) {
  InFlightRpcs rpcs;
  EXPECT_EQ(rpcs.Describe(), "");
  rpcs.Started("quantd.v1.WorkerService/LeaseJob");
  rpcs.Started("quantd.v1.QuantizationService/CreateJob");
  rpcs.Started("quantd.v1.WorkerService/LeaseJob");
  EXPECT_EQ(rpcs.Describe(),
            "quantd.v1.QuantizationService/CreateJob x1, quantd.v1.WorkerService/LeaseJob x2");
  rpcs.Finished("quantd.v1.WorkerService/LeaseJob");
  rpcs.Finished("quantd.v1.QuantizationService/CreateJob");
  rpcs.Finished("quantd.v1.QuantizationService/CreateJob");  // unmatched: ignored
  EXPECT_EQ(rpcs.Describe(), "quantd.v1.WorkerService/LeaseJob x1");
  rpcs.Finished("quantd.v1.WorkerService/LeaseJob");
  EXPECT_EQ(rpcs.Describe(), "");
}

}  // namespace
}  // namespace quantd::server
