#include "server/supervisor/local_worker_supervisor.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "server/common/errors.h"
#include "server/common/json_log.h"
#include "server/store/testing/test_database.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

std::string FakeWorkerPath() {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/quantd/server/supervisor/fake_worker");
}

// pid -> recorded arguments, for every fake worker that started.
std::map<pid_t, std::vector<std::string>> Recorded(const std::string& dir) {
  std::map<pid_t, std::vector<std::string>> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == ".." || name.find(".tmp") != std::string::npos) continue;
    std::ifstream in(dir + "/" + name);
    std::stringstream text;
    text << in.rdbuf();
    out[std::stoi(name)] = absl::StrSplit(text.str(), '\n', absl::SkipEmpty());
  }
  closedir(d);
  return out;
}

bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetMinLogLevel(LogLevel::kError);
    dir_ = testing::MakeTempDir("fake-workers");
  }

  LocalWorkerOptions Options(const std::string& mode, int count) {
    LocalWorkerOptions options;
    options.binary = FakeWorkerPath();
    options.count = count;
    options.args = [](int i) {
      return std::vector<std::string>{"--server",    "127.0.0.1:50051",
                                      "--device",    "cpu",
                                      "--worker-id", absl::StrCat("host-local-", i)};
    };
    options.extra_env = {"FAKE_WORKER_DIR=" + dir_, "FAKE_WORKER_MODE=" + mode};
    options.initial_backoff = absl::Milliseconds(20);
    options.max_backoff = absl::Milliseconds(80);
    options.stop_grace = absl::Seconds(2);
    return options;
  }

  // Waits until `n` fake workers recorded their arguments.
  std::map<pid_t, std::vector<std::string>> AwaitRecorded(size_t n) {
    for (int i = 0; i < 3000; ++i) {
      auto recorded = Recorded(dir_);
      if (recorded.size() >= n) return recorded;
      absl::SleepFor(absl::Milliseconds(10));
    }
    ADD_FAILURE() << "fewer than " << n << " workers started";
    return Recorded(dir_);
  }

  std::string dir_;
};

TEST_F(SupervisorTest, StartsEachWorkerWithItsArguments) {
  LocalWorkerSupervisor supervisor(Options("serve", 2));
  ASSERT_TRUE(supervisor.Start().ok());
  auto recorded = AwaitRecorded(2);
  ASSERT_EQ(recorded.size(), 2u);
  std::vector<std::string> ids;
  for (const auto& [pid, args] : recorded) {
    ASSERT_EQ(args.size(), 6u);
    EXPECT_EQ(args[0], "--server");
    EXPECT_EQ(args[1], "127.0.0.1:50051");
    EXPECT_EQ(args[3], "cpu");
    ids.push_back(args[5]);
    EXPECT_TRUE(Alive(pid));
  }
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"host-local-0", "host-local-1"}));
  std::vector<pid_t> pids = supervisor.pids();
  supervisor.Stop();
  for (pid_t pid : pids) EXPECT_FALSE(Alive(pid)) << pid;
}

TEST_F(SupervisorTest, RestartsAKilledWorker) {
  LocalWorkerSupervisor supervisor(Options("serve", 2));
  ASSERT_TRUE(supervisor.Start().ok());
  ASSERT_TRUE(supervisor.AwaitStarts(2, absl::Seconds(30)));
  AwaitRecorded(2);
  pid_t victim = supervisor.pids()[0];
  ASSERT_GT(victim, 0);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  ASSERT_TRUE(supervisor.AwaitStarts(3, absl::Seconds(30)));
  auto recorded = AwaitRecorded(3);
  pid_t replacement = supervisor.pids()[0];
  EXPECT_NE(replacement, victim);
  EXPECT_GT(replacement, 0);
  ASSERT_TRUE(recorded.count(replacement));
  EXPECT_EQ(recorded[replacement][5], "host-local-0");  // same slot, same id
  EXPECT_EQ(supervisor.starts(), 3);
  supervisor.Stop();
  EXPECT_FALSE(Alive(replacement));
}

TEST_F(SupervisorTest, CrashLoopIsRestartedWithBackoff) {
  LocalWorkerSupervisor supervisor(Options("crash", 1));
  const absl::Time start = absl::Now();
  ASSERT_TRUE(supervisor.Start().ok());
  // Backoffs 20, 40, 80, 80 ms: five starts take at least 220 ms.
  ASSERT_TRUE(supervisor.AwaitStarts(5, absl::Seconds(30)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(220));
  supervisor.Stop();
  const int starts = supervisor.starts();
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(supervisor.starts(), starts);  // stopped means no more restarts
}

TEST_F(SupervisorTest, WorkerIgnoringSigtermIsKilledAfterTheGrace) {
  LocalWorkerOptions options = Options("stubborn", 1);
  options.stop_grace = absl::Milliseconds(300);
  LocalWorkerSupervisor supervisor(options);
  ASSERT_TRUE(supervisor.Start().ok());
  AwaitRecorded(1);
  pid_t pid = supervisor.pids()[0];
  const absl::Time start = absl::Now();
  supervisor.Stop();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_FALSE(Alive(pid));
}

TEST_F(SupervisorTest, MissingBinaryIsRefusedClearly) {
  LocalWorkerOptions options = Options("serve", 1);
  options.binary = dir_ + "/no-such-worker";
  LocalWorkerSupervisor supervisor(options);
  quantd::Status status = supervisor.Start();
  EXPECT_EQ(status.code(), quantd::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.reason(), "WORKER_BINARY_NOT_FOUND");
  EXPECT_NE(status.message().find("--worker-binary"), std::string::npos);
}

}  // namespace
}  // namespace quantd::server
