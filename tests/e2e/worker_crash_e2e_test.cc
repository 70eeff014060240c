// Worker crashes over a queue (the fault test): two workers drain a
// queue of jobs while the test kills -9 whichever worker is running a job,
// 20 times, at random points, and starts a replacement each time. Every job
// must end SUCCEEDED exactly once, with its attempts recorded and an artifact
// byte-identical to an uninterrupted run of the same spec.
#include <signal.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "tests/e2e/harness.h"
#include "worker/common/sha256.h"

namespace quantd::e2e {
namespace {

namespace fs = std::filesystem;
using quantd::v1::Job;

constexpr int kJobs = 5;
constexpr int kKills = 20;

std::vector<std::string> SubmitArgs(const std::string& output) {
  return {"submit",       "--model",
          Runfile("models/stories260K"),
          "--scheme",     "w_uint4_per_channel_asym",
          "--eval",       Runfile("tests/data/tinystories-sample.txt"),
          "--eval-windows", "40",
          "--max-attempts", "40",
          "--output",     output};
}

TEST(WorkerCrashE2eTest, TwentyKillsOverAQueueLoseAndDuplicateNothing) {
  const std::string data = TempDir("e2e_worker_crashes");
  // Short leases and backoffs so that a killed worker's job is re-leased fast.
  auto quantd = Quantd::Start({.data_dir = data,
                               .lease_duration = "1s",
                               .extra_flags = {"--requeue-backoff=100ms",
                                               "--max-requeue-backoff=400ms"}});
  ASSERT_NE(quantd, nullptr);
  auto api = quantd->NewClient();

  // The reference: the same spec, run without interruption.
  std::map<std::string, std::unique_ptr<Process>> workers;  // worker id -> process
  int started = 0;
  auto start_worker = [&]() {
    const std::string id = "w" + std::to_string(started++);
    workers[id] = StartWorker(quantd->address(), data, id);
  };
  start_worker();
  {
    std::vector<std::string> args = SubmitArgs(data + "/reference");
    args.push_back("--wait");
    CommandResult r = Quantctl(quantd->address(), args);
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text << quantd->Log();
  }
  const auto reference = Sha256File(data + "/reference/model.safetensors");
  ASSERT_TRUE(reference.ok());

  std::vector<std::string> names;
  for (int i = 0; i < kJobs; ++i) {
    CommandResult r = Quantctl(quantd->address(), SubmitArgs(data + "/out" + std::to_string(i)));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    names.push_back(r.stdout_text.substr(0, r.stdout_text.find('\n')));
  }
  start_worker();

  // Kill whichever worker runs a job at a random point of it: half the
  // kills early (loading, quantizing: nothing or part checkpointed), half
  // once every block is checkpointed (evaluating, exporting), so that both
  // restarts and resumes happen.
  const unsigned seed = std::random_device{}();
  std::printf("kill schedule seed %u\n", seed);
  std::mt19937 rng(seed);
  int kills = 0;
  // (job, attempt) of every attempt killed here: any other lease expiry is
  // a live worker's heartbeat held up by a loaded machine (1 s leases).
  std::set<std::pair<std::string, int64_t>> killed;
  // No time budget: the loop ends when the kills are done or the queue is;
  // it gives up only when no job moved for kStall (a hang).
  constexpr auto kStall = std::chrono::seconds(300);
  std::string last_seen;
  auto moved = std::chrono::steady_clock::now();
  bool all_done = false;
  bool stalled = false;
  while (kills < kKills && !all_done && !stalled) {
    // Wait for a job at the chosen kind of point (up to 20 s, then the
    // other kind), then kill its worker after a random delay.
    bool late = rng() % 2 == 1;
    std::string victim;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::pair<std::string, int64_t> victim_attempt;
    while (victim.empty()) {
      if (std::chrono::steady_clock::now() > give_up) late = !late;
      std::vector<std::pair<std::string, Job>> busy;
      std::string seen;
      all_done = true;
      for (const auto& name : names) {
        Job job = GetJob(*api, name);
        seen += std::to_string(job.state()) + "/" + std::to_string(job.attempt()) + "/" +
                std::to_string(job.progress().stage()) + "/" +
                std::to_string(job.progress().block()) + ";";
        if (!IsTerminal(job.state())) all_done = false;
        const bool in_late_stage = job.progress().stage() == quantd::v1::EVALUATE ||
                                   job.progress().stage() == quantd::v1::EXPORT;
        if (job.state() == quantd::v1::RUNNING && workers.count(job.worker()) &&
            in_late_stage == late)
          busy.emplace_back(job.worker(), job);
      }
      if (all_done) break;
      if (seen != last_seen) {
        last_seen = seen;
        moved = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - moved > kStall) {
        stalled = true;
        break;
      }
      if (busy.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      const auto& pick = busy[rng() % busy.size()];
      victim = pick.first;
      victim_attempt = {pick.second.name(), pick.second.attempt()};
    }
    if (victim.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % (late ? 200 : 600)));
    ASSERT_NE(workers[victim]->Stop(SIGKILL), -1);
    workers.erase(victim);
    killed.insert(victim_attempt);
    ++kills;
    start_worker();
  }
  ASSERT_FALSE(stalled) << "no job moved for " << kStall.count() << " s" << quantd->Log();
  std::printf("killed %d workers while running jobs\n", kills);
  // The queue is long enough for every kill to land on a running job.
  EXPECT_EQ(kills, kKills);

  int attempts = 0, resumed_jobs = 0, other_expiries = 0;
  for (const auto& name : names) {
    Job job = WaitForJob(*api, name);
    ASSERT_EQ(job.state(), quantd::v1::SUCCEEDED) << name << ": " << job.error().message();
    attempts += job.attempt();
    ASSERT_EQ(job.result().artifacts_size(), 1);
    const std::string out = job.result().artifacts(0).uri().substr(7);
    auto sha = Sha256File(out + "/model.safetensors");
    ASSERT_TRUE(sha.ok()) << out;
    EXPECT_EQ(*sha, *reference) << name << " (attempt " << job.attempt() << ")";
    EXPECT_EQ(job.result().artifacts(0).sha256(), *sha);

    // Exactly once: one SUCCEEDED state event and one result in the stream.
    int succeeded = 0, results = 0;
    bool resumed = false;
    for (const auto& ev : Events(*api, name)) {
      if (ev.has_state() && ev.state() == quantd::v1::SUCCEEDED) ++succeeded;
      if (ev.has_result()) ++results;
      if (ev.has_log() && ev.log().message().find("resumed") != std::string::npos) resumed = true;
      // "lease expired on worker w3, attempt 2 of 40": an attempt not killed here.
      int64_t attempt = 0;
      if (ev.has_log() &&
          std::sscanf(ev.log().message().c_str(), "lease expired on worker %*s attempt %" SCNd64,
                      &attempt) == 1 &&
          !killed.count({name, attempt}))
        ++other_expiries;
    }
    EXPECT_EQ(succeeded, 1) << name;
    EXPECT_EQ(results, 1) << name;
    resumed_jobs += resumed;
  }
  std::printf(
      "%d jobs, %d attempts in all, %d resumed from a checkpoint, %d leases expired on live "
      "workers\n",
      kJobs, attempts, resumed_jobs, other_expiries);
  EXPECT_GE(resumed_jobs, 1);
  // A kill costs its job one attempt (none when the job finished in the
  // instant between the check and the kill); so does a lease that expired on
  // a live worker whose heartbeat a loaded machine held up past 1 s.
  EXPECT_LE(attempts, kJobs + kills + other_expiries);
  EXPECT_GE(attempts, kJobs + kills / 2);

  // One final artifact per job and no staging leftovers beside them.
  int dirs = 0;
  for (const auto& e : fs::directory_iterator(data)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("out", 0) == 0) ++dirs;
    EXPECT_EQ(n.find(".partial-"), std::string::npos) << n;
  }
  EXPECT_EQ(dirs, kJobs);
}

}  // namespace
}  // namespace quantd::e2e
