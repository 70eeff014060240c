// Frontend failover: two quantd processes share one PostgreSQL while
// simulated workers and watchers use whichever frontend answers. One
// frontend is killed with SIGKILL ten times during the run (and restarted
// on its address). No job is lost or completed twice, every watcher sees
// every event of its job exactly once, in order, across reconnects.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "quantd/v1/quantization_service.grpc.pb.h"
#include "quantd/v1/worker_service.grpc.pb.h"
#include "server/store/testing/postgres_test_cluster.h"
#include "server/store/testing/test_database.h"
#include "server/testing/quantd_process.h"

namespace quantd::server {
namespace {

using testing::QuantdProcess;
using testing::QuantdProcessOptions;

constexpr int kFrontends = 2;
constexpr int kJobs = 24;
constexpr int kWorkers = 3;
constexpr int kBlocks = 4;
constexpr int kKills = 10;

bool Retryable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         s.error_code() == grpc::StatusCode::CANCELLED ||
         s.error_code() == grpc::StatusCode::UNKNOWN;
}

// The two frontends' addresses, with channels that reconnect quickly.
class Frontends {
 public:
  explicit Frontends(const std::vector<std::string>& addresses) {
    for (const std::string& address : addresses) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 300);
      auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
      jobs_.push_back(v1::QuantizationService::NewStub(channel));
      workers_.push_back(v1::WorkerService::NewStub(channel));
    }
  }
  v1::QuantizationService::Stub* jobs(int i) { return jobs_[i % jobs_.size()].get(); }
  v1::WorkerService::Stub* workers(int i) { return workers_[i % workers_.size()].get(); }

  // Calls `call(frontend index)` until it returns a non-retryable status,
  // moving to the other frontend after each failure.
  grpc::Status WithFailover(int& current, const std::function<grpc::Status(int)>& call) {
    grpc::Status s;
    for (int attempt = 0; attempt < 400; ++attempt) {
      s = call(current);
      if (!Retryable(s)) return s;
      ++failovers;
      current = (current + 1) % kFrontends;
      absl::SleepFor(absl::Milliseconds(25));
    }
    return s;
  }

  std::atomic<int> failovers{0};

 private:
  std::vector<std::unique_ptr<v1::QuantizationService::Stub>> jobs_;
  std::vector<std::unique_ptr<v1::WorkerService::Stub>> workers_;
};

void Deadline(grpc::ClientContext* c, int seconds = 5) {
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

TEST(FailoverTest, KillingAFrontendTenTimesLosesNothing) {
  auto cluster = testing::PostgresTestCluster::Shared();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto uri = (*cluster)->CreateDatabase();
  ASSERT_TRUE(uri.ok()) << uri.status();

  std::vector<QuantdProcessOptions> configs;
  std::vector<std::unique_ptr<QuantdProcess>> frontends(kFrontends);
  std::vector<std::string> addresses;
  for (int i = 0; i < kFrontends; ++i) {
    QuantdProcessOptions options;
    options.data_dir = testing::MakeTempDir(absl::StrCat("failover-", i));
    options.listen = absl::StrCat("127.0.0.1:", testing::PickFreePort());
    options.extra_flags = {"--store=" + *uri, "--lease-duration=2s", "--requeue-backoff=100ms",
                           "--shutdown-grace=100ms", "--log-level=error",
                           // The jobs name a model that need not exist here.
                           "--allowed-uri-roots=file:///"};
    auto process = QuantdProcess::Start(options);
    ASSERT_TRUE(process.ok()) << process.status();
    frontends[i] = std::move(*process);
    addresses.push_back(options.listen.substr(0));
    configs.push_back(options);
  }
  Frontends clients(addresses);

  // Submit every job (a retry after a failover reuses the request id).
  std::vector<std::string> names;
  for (int j = 0; j < kJobs; ++j) {
    v1::CreateJobRequest request;
    request.set_request_id(absl::StrCat("job-", j));
    request.mutable_spec()->set_model_uri("file:///models/stories260K");
    request.mutable_spec()->mutable_quantization()->set_scheme("w_int4_per_group_sym");
    request.mutable_spec()->set_max_attempts(10);
    v1::Job job;
    int frontend = j;
    ASSERT_TRUE(clients
                    .WithFailover(frontend,
                                  [&](int f) {
                                    grpc::ClientContext c;
                                    Deadline(&c);
                                    return clients.jobs(f)->CreateJob(&c, request, &job);
                                  })
                    .ok());
    names.push_back(job.name());
  }

  std::atomic<bool> stop{false};
  std::atomic<int> completed{0};
  std::atomic<int> abandoned{0};
  std::vector<std::thread> threads;
  // Simulated workers: lease, report progress per block, heartbeat,
  // complete; any frontend will do.
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      int frontend = w;
      while (!stop.load()) {
        v1::LeaseJobRequest lease_request;
        lease_request.mutable_worker()->set_id(absl::StrCat("sim-", w));
        lease_request.mutable_worker()->set_device("cpu");
        lease_request.mutable_wait()->set_nanos(300'000'000);
        v1::LeaseJobResponse leased;
        grpc::Status s = clients.WithFailover(frontend, [&](int f) {
          grpc::ClientContext c;
          Deadline(&c);
          return clients.workers(f)->LeaseJob(&c, lease_request, &leased);
        });
        if (!s.ok() || !leased.has_job()) continue;
        const v1::Lease lease = leased.lease();
        bool lost = false;
        for (int b = 1; b <= kBlocks && !lost; ++b) {
          v1::ReportEventsRequest report;
          *report.mutable_lease() = lease;
          auto* progress = report.add_events()->mutable_progress();
          progress->set_stage(v1::QUANTIZE);
          progress->set_block(b);
          progress->set_block_count(kBlocks);
          v1::ReportEventsResponse reported;
          s = clients.WithFailover(frontend, [&](int f) {
            grpc::ClientContext c;
            Deadline(&c);
            return clients.workers(f)->ReportEvents(&c, report, &reported);
          });
          if (!s.ok()) {
            lost = true;  // STALE_LEASE: the job went to another worker
            break;
          }
          absl::SleepFor(absl::Milliseconds(120));
          v1::HeartbeatRequest heartbeat;
          *heartbeat.mutable_lease() = lease;
          v1::HeartbeatResponse renewed;
          s = clients.WithFailover(frontend, [&](int f) {
            grpc::ClientContext c;
            Deadline(&c);
            return clients.workers(f)->Heartbeat(&c, heartbeat, &renewed);
          });
          if (!s.ok()) lost = true;
        }
        if (lost) {
          ++abandoned;
          continue;
        }
        v1::CompleteJobRequest complete;
        *complete.mutable_lease() = lease;
        complete.mutable_result()->add_artifacts()->set_uri("file:///out/" + lease.job());
        v1::CompleteJobResponse done;
        s = clients.WithFailover(frontend, [&](int f) {
          grpc::ClientContext c;
          Deadline(&c);
          return clients.workers(f)->CompleteJob(&c, complete, &done);
        });
        if (s.ok()) {
          ++completed;
        } else {
          ++abandoned;
        }
      }
    });
  }

  // Watchers: one per job, resuming after the last sequence they saw.
  absl::Mutex mu;
  std::map<std::string, std::vector<v1::JobEvent>> seen;
  std::atomic<int> watchers_done{0};
  for (int j = 0; j < kJobs; ++j) {
    threads.emplace_back([&, j] {
      int frontend = j;
      int64_t last = 0;
      while (!stop.load()) {
        grpc::ClientContext c;
        Deadline(&c, 120);
        v1::WatchJobRequest request;
        request.set_name(names[j]);
        request.set_after_sequence(last);
        auto reader = clients.jobs(frontend)->WatchJob(&c, request);
        v1::JobEvent event;
        while (reader->Read(&event)) {
          last = event.sequence();
          absl::MutexLock lock(&mu);
          seen[names[j]].push_back(event);
        }
        grpc::Status s = reader->Finish();
        if (s.ok()) {
          ++watchers_done;
          return;
        }
        frontend = (frontend + 1) % kFrontends;
        absl::SleepFor(absl::Milliseconds(25));
      }
    });
  }

  // Kill a frontend ten times while all that runs, bringing it back each time.
  for (int k = 0; k < kKills; ++k) {
    absl::SleepFor(absl::Milliseconds(600));
    const int victim = k % kFrontends;
    frontends[victim]->Kill();
    absl::SleepFor(absl::Milliseconds(300));
    auto restarted = QuantdProcess::Start(configs[victim]);
    ASSERT_TRUE(restarted.ok()) << restarted.status();
    frontends[victim] = std::move(*restarted);
  }

  // No time budget: wait while the watchers keep receiving events, giving up
  // only when none arrived for two minutes (a hang, on however slow a machine).
  size_t last_events = 0;
  absl::Time moved = absl::Now();
  while (watchers_done.load() < kJobs && absl::Now() - moved < absl::Seconds(120)) {
    absl::SleepFor(absl::Milliseconds(50));
    size_t events = 0;
    {
      absl::MutexLock lock(&mu);
      for (const auto& [name, list] : seen) events += list.size();
    }
    if (events != last_events) {
      last_events = events;
      moved = absl::Now();
    }
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(watchers_done.load(), kJobs);

  // Every job SUCCEEDED once; each watcher got 1..N with no gap or repeat.
  int total_attempts = 0;
  for (const std::string& name : names) {
    v1::Job job;
    int frontend = 0;
    ASSERT_TRUE(clients
                    .WithFailover(frontend,
                                  [&](int f) {
                                    grpc::ClientContext c;
                                    Deadline(&c);
                                    v1::GetJobRequest get;
                                    get.set_name(name);
                                    return clients.jobs(f)->GetJob(&c, get, &job);
                                  })
                    .ok());
    EXPECT_EQ(job.state(), v1::SUCCEEDED) << name;
    EXPECT_EQ(job.result().artifacts(0).uri(), "file:///out/" + name);
    total_attempts += job.attempt();
    absl::MutexLock lock(&mu);
    const std::vector<v1::JobEvent>& events = seen[name];
    int succeeded = 0;
    for (size_t i = 0; i < events.size(); ++i) {
      EXPECT_EQ(events[i].sequence(), static_cast<int64_t>(i + 1)) << name;
      if (events[i].has_state() && events[i].state() == v1::SUCCEEDED) ++succeeded;
    }
    EXPECT_EQ(succeeded, 1) << name;
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().state(), v1::SUCCEEDED) << name;
  }
  v1::ListJobsRequest list;
  list.set_page_size(500);
  v1::ListJobsResponse listed;
  int frontend = 0;
  ASSERT_TRUE(clients
                  .WithFailover(frontend,
                                [&](int f) {
                                  grpc::ClientContext c;
                                  Deadline(&c);
                                  return clients.jobs(f)->ListJobs(&c, list, &listed);
                                })
                  .ok());
  EXPECT_EQ(listed.jobs_size(), kJobs);  // no duplicates from retried creates
  EXPECT_EQ(completed.load(), kJobs);
  std::printf(
      "failover: %d jobs, %d kills, %d client failovers, %d abandoned leases, %d attempts\n", kJobs,
      kKills, clients.failovers.load(), abandoned.load(), total_attempts);
}

}  // namespace
}  // namespace quantd::server
