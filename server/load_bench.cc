// Load generator for quantd: CreateJob and GetJob latency (p50/p99) and
// throughput at 1, 16 and 64 concurrent clients against a SQLite store and
// a PostgreSQL store (a real, durable PostgreSQL started in a temporary
// directory), then WatchJob streams held open while a worker reports
// progress (delivery latency) and finally ends every job (drain time).
// The server runs in this process and is called over loopback gRPC.
// Ratios are printed against baselines measured in the same run: each
// concurrency against 1 client, PostgreSQL against SQLite.
//
//   bazel run -c opt //server:load_bench -- --duration_s=3 --watch_seconds=30
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "quantd/v1/quantization_service.grpc.pb.h"
#include "quantd/v1/worker_service.grpc.pb.h"
#include "server/app/quantd_server.h"
#include "server/common/json_log.h"
#include "server/store/testing/postgres_test_cluster.h"
#include "server/store/testing/test_database.h"

ABSL_FLAG(double, duration_s, 3, "seconds per (operation, concurrency) measurement");
ABSL_FLAG(int, watch_streams, 500, "concurrent WatchJob streams");
ABSL_FLAG(int, watch_seconds, 30, "how long the streams are held");
ABSL_FLAG(std::vector<std::string>, backends, std::vector<std::string>({"sqlite", "postgresql"}),
          "stores to measure");

namespace quantd::server {
namespace {

struct Stats {
  double p50_ms = 0, p99_ms = 0, throughput = 0;
  int64_t ops = 0, errors = 0;
};

Stats Summarize(std::vector<double> latencies_ms, double seconds, int64_t errors) {
  Stats s;
  s.ops = latencies_ms.size();
  s.errors = errors;
  if (!latencies_ms.empty()) {
    std::sort(latencies_ms.begin(), latencies_ms.end());
    s.p50_ms = latencies_ms[latencies_ms.size() / 2];
    s.p99_ms = latencies_ms[std::min(latencies_ms.size() - 1, latencies_ms.size() * 99 / 100)];
  }
  s.throughput = s.ops / seconds;
  return s;
}

v1::CreateJobRequest JobRequest(const std::string& request_id) {
  v1::CreateJobRequest r;
  r.set_request_id(request_id);
  r.mutable_spec()->set_model_uri("file:///models/stories260K");
  r.mutable_spec()->mutable_quantization()->set_scheme("w_int4_per_group_sym");
  (*r.mutable_spec()->mutable_labels())["bench"] = "load";
  return r;
}

std::vector<std::shared_ptr<grpc::Channel>> Channels(const std::string& address, int n) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < n; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("quantd.bench.channel", i);  // one connection per channel
    channels.push_back(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }
  return channels;
}

// Runs `op(client index, iteration)` from `clients` threads for `seconds`.
Stats Measure(int clients, double seconds, const std::function<grpc::Status(int, int64_t)>& op) {
  absl::Mutex mu;
  std::vector<double> all;
  std::atomic<int64_t> errors{0};
  const absl::Time end = absl::Now() + absl::Seconds(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      std::vector<double> mine;
      for (int64_t i = 0; absl::Now() < end; ++i) {
        absl::Time start = absl::Now();
        grpc::Status s = op(c, i);
        double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
        if (s.ok()) {
          mine.push_back(ms);
        } else {
          ++errors;
        }
      }
      absl::MutexLock lock(&mu);
      all.insert(all.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  return Summarize(std::move(all), seconds, errors.load());
}

std::string ProcStatus(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::string value = line.substr(key.size() + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  }
  return "?";
}

void WatchPhase(const std::string& backend, QuantdServer& server) {
  const int streams = absl::GetFlag(FLAGS_watch_streams);
  const int hold = absl::GetFlag(FLAGS_watch_seconds);
  const int reporting = std::min(50, streams);
  auto channels = Channels(server.address(), 16);
  auto jobs_stub = v1::QuantizationService::NewStub(channels[0]);
  auto worker_stub = v1::WorkerService::NewStub(channels[1]);

  std::vector<std::string> names;
  for (int i = 0; i < streams; ++i) {
    grpc::ClientContext c;
    v1::Job job;
    v1::CreateJobRequest request = JobRequest(absl::StrCat("watch-", backend, "-", i));
    // A device of their own keeps the jobs queued by the phases before out
    // of the way of the bench worker below.
    request.mutable_spec()->set_device("cuda:7");
    if (jobs_stub->CreateJob(&c, request, &job).ok()) {
      names.push_back(job.name());
    }
  }
  // Lease some jobs so a "worker" can report progress on them.
  std::map<std::string, v1::Lease> leases;
  std::set<std::string> watched(names.begin(), names.end());
  while (static_cast<int>(leases.size()) < reporting) {
    grpc::ClientContext c;
    v1::LeaseJobRequest r;
    r.mutable_worker()->set_id("bench-worker");
    r.mutable_worker()->set_device("cuda:7");
    v1::LeaseJobResponse leased;
    grpc::Status s = worker_stub->LeaseJob(&c, r, &leased);
    if (!s.ok() || !leased.has_job()) {
      std::fprintf(stderr, "lease for the watch phase: %s\n", s.error_message().c_str());
      break;
    }
    if (watched.count(leased.job().name())) leases[leased.job().name()] = leased.lease();
  }

  absl::Mutex mu;
  std::vector<double> delivery_ms;
  std::atomic<int> open{0}, finished{0}, failed{0};
  const absl::Time open_start = absl::Now();
  absl::Time all_open;
  std::vector<std::thread> watchers;
  for (size_t i = 0; i < names.size(); ++i) {
    watchers.emplace_back([&, i] {
      auto stub = v1::QuantizationService::NewStub(channels[2 + i % (channels.size() - 2)]);
      grpc::ClientContext c;
      v1::WatchJobRequest r;
      r.set_name(names[i]);
      auto reader = stub->WatchJob(&c, r);
      v1::JobEvent e;
      bool first = true;
      while (reader->Read(&e)) {
        if (first) {
          ++open;
          first = false;
        }
        if (e.has_progress() && !e.progress().message().empty()) {
          double sent = std::stod(e.progress().message());
          double ms = (absl::ToUnixMicros(absl::Now()) - sent) / 1000.0;
          absl::MutexLock lock(&mu);
          delivery_ms.push_back(ms);
        }
      }
      if (reader->Finish().ok()) {
        ++finished;
      } else {
        ++failed;
      }
    });
  }
  while (open.load() < static_cast<int>(names.size()) &&
         absl::Now() - open_start < absl::Minutes(2)) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  all_open = absl::Now();
  const std::string threads_held = ProcStatus("Threads");
  const std::string rss_held = ProcStatus("VmRSS");

  // Hold: report one progress event per leased job every 500 ms.
  int64_t reported = 0;
  const absl::Time hold_end = absl::Now() + absl::Seconds(hold);
  while (absl::Now() < hold_end) {
    for (const auto& [name, lease] : leases) {
      v1::ReportEventsRequest r;
      *r.mutable_lease() = lease;
      auto* p = r.add_events()->mutable_progress();
      p->set_stage(v1::QUANTIZE);
      p->set_message(absl::StrCat(absl::ToUnixMicros(absl::Now())));
      grpc::ClientContext c;
      v1::ReportEventsResponse out;
      if (worker_stub->ReportEvents(&c, r, &out).ok()) ++reported;
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  // End every job; the streams must all finish.
  const absl::Time drain_start = absl::Now();
  for (const std::string& name : names) {
    grpc::ClientContext c;
    auto it = leases.find(name);
    if (it != leases.end()) {
      v1::CompleteJobRequest r;
      *r.mutable_lease() = it->second;
      v1::CompleteJobResponse out;
      worker_stub->CompleteJob(&c, r, &out);
    } else {
      v1::CancelJobRequest r;
      r.set_name(name);
      v1::Job out;
      jobs_stub->CancelJob(&c, r, &out);
    }
  }
  const absl::Time all_ended = absl::Now();
  for (auto& t : watchers) t.join();
  const absl::Duration drain = absl::Now() - all_ended;
  Stats delivery = Summarize(delivery_ms, hold, 0);
  std::printf(
      "%-10s watch: %zu streams open in %.0f ms, held %d s (%s threads, RSS %s in this process); "
      "%lld progress events reported, %lld delivered, delivery p50 %.1f ms p99 %.1f ms; ending "
      "every job took %.0f ms and the last stream closed %.0f ms after that (%d ok, %d "
      "failed)\n",
      backend.c_str(), names.size(), absl::ToDoubleMilliseconds(all_open - open_start), hold,
      threads_held.c_str(), rss_held.c_str(), static_cast<long long>(reported),
      static_cast<long long>(delivery.ops), delivery.p50_ms, delivery.p99_ms,
      absl::ToDoubleMilliseconds(all_ended - drain_start), absl::ToDoubleMilliseconds(drain),
      finished.load(), failed.load());
}

int Run() {
  SetMinLogLevel(LogLevel::kError);
  const double seconds = absl::GetFlag(FLAGS_duration_s);
  std::unique_ptr<testing::PostgresTestCluster> cluster;
  // results[backend][op][clients]
  std::map<std::string, std::map<std::string, std::map<int, Stats>>> results;
  const std::vector<int> concurrency = {1, 16, 64};
  for (const std::string& backend : absl::GetFlag(FLAGS_backends)) {
    QuantdServerOptions options;
    options.listen = "127.0.0.1:0";
    options.data_dir = testing::MakeTempDir("load-bench-" + backend);
    options.allowed_uri_roots = {"file:///"};  // the jobs name a model that need not exist
    options.jobs.lease_duration = absl::Minutes(5);
    options.jobs.max_concurrent_watches = 0;
    if (backend == "postgresql") {
      testing::PostgresClusterOptions pg;
      pg.durable = true;  // fsync on, like SQLite's synchronous=FULL
      auto started = testing::PostgresTestCluster::Start(pg);
      if (!started.ok()) {
        std::fprintf(stderr, "PostgreSQL: %s\n", started.status().ToString().c_str());
        return 1;
      }
      cluster = std::move(*started);
      auto uri = cluster->CreateDatabase();
      if (!uri.ok()) return 1;
      options.store_uri = *uri;
    } else if (backend != "sqlite") {
      std::fprintf(stderr, "unknown backend %s\n", backend.c_str());
      return 2;
    }
    auto server = QuantdServer::Start(options);
    if (!server.ok()) {
      std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
      return 1;
    }
    auto channels = Channels((*server)->address(), 8);
    std::vector<std::unique_ptr<v1::QuantizationService::Stub>> stubs;
    for (auto& ch : channels) stubs.push_back(v1::QuantizationService::NewStub(ch));

    std::vector<std::string> created;
    absl::Mutex created_mu;
    for (int clients : concurrency) {
      results[backend]["CreateJob"][clients] = Measure(clients, seconds, [&](int c, int64_t i) {
        grpc::ClientContext ctx;
        v1::Job job;
        grpc::Status s = stubs[c % stubs.size()]->CreateJob(
            &ctx, JobRequest(absl::StrCat(clients, "-", c, "-", i)), &job);
        if (s.ok() && i % 8 == 0) {
          absl::MutexLock lock(&created_mu);
          created.push_back(job.name());
        }
        return s;
      });
    }
    for (int clients : concurrency) {
      results[backend]["GetJob"][clients] = Measure(clients, seconds, [&](int c, int64_t i) {
        grpc::ClientContext ctx;
        v1::GetJobRequest r;
        r.set_name(created[(c * 7919 + i) % created.size()]);
        v1::Job job;
        return stubs[c % stubs.size()]->GetJob(&ctx, r, &job);
      });
    }
    for (const char* op : {"CreateJob", "GetJob"}) {
      const Stats& one = results[backend][op][1];
      for (int clients : concurrency) {
        const Stats& s = results[backend][op][clients];
        std::printf(
            "%-10s %-9s clients %2d: p50 %7.2f ms  p99 %7.2f ms  %8.0f ops/s  (x%.2f of 1 client)"
            "%s\n",
            backend.c_str(), op, clients, s.p50_ms, s.p99_ms, s.throughput,
            one.throughput > 0 ? s.throughput / one.throughput : 0,
            s.errors > 0 ? absl::StrCat("  errors ", s.errors).c_str() : "");
      }
    }
    std::fflush(stdout);
    if (absl::GetFlag(FLAGS_watch_streams) > 0) WatchPhase(backend, **server);
    std::fflush(stdout);
    (*server)->Shutdown();
  }
  if (results.count("sqlite") && results.count("postgresql")) {
    for (const char* op : {"CreateJob", "GetJob"}) {
      for (int clients : concurrency) {
        const Stats& a = results["sqlite"][op][clients];
        const Stats& b = results["postgresql"][op][clients];
        std::printf("postgresql/sqlite %-9s clients %2d: throughput x%.2f, p99 x%.2f\n", op,
                    clients, a.throughput > 0 ? b.throughput / a.throughput : 0,
                    a.p99_ms > 0 ? b.p99_ms / a.p99_ms : 0);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace quantd::server

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return quantd::server::Run();
}
