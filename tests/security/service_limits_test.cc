// Attacks on the service as a whole, each against its own quantd
// (they need their own flags): one tenant holding every WatchJob slot;
// quantd listening on all interfaces without tokens; a quantd started with
// no roots; SIGTERM while handlers are busy; and --worker-arg values with
// commas, which must reach a local worker as one argument each.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"
#include "tests/security/security_harness.h"

namespace quantd::security {
namespace {

namespace fs = std::filesystem;
using quantd::v1::Job;
using quantd::v1::JobSpec;

// A spec quantd accepts; no CPU worker runs in these tests, so it stays
// QUEUED.
JobSpec QueuedSpec(const std::string& dir) {
  CopyModel(dir + "/models/stories260K");
  JobSpec spec = FastSpec(dir + "/models/stories260K");
  spec.set_device("cpu");
  return spec;
}

// The roots of QueuedSpec's model and an output directory (both made here:
// quantd refuses roots that do not exist).
std::vector<std::string> RootsFlag(const std::string& dir) {
  fs::create_directories(dir + "/models");
  fs::create_directories(dir + "/out");
  return {"--allowed-uri-roots=file://" + dir + "/models,file://" + dir + "/out"};
}

// The tenant has no job: every attack above was refused before storing.
void ListJobsResponseHasNone(Client& client) {
  quantd::v1::ListJobsResponse list;
  ASSERT_TRUE(client.List(&list).ok());
  EXPECT_EQ(list.jobs_size(), 0);
}

// An open WatchJob stream: open once its first event (the replay) arrived.
struct Watch {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<quantd::v1::JobEvent>> reader;
  bool open = false;
};

std::unique_ptr<Watch> OpenWatch(Client& client, const std::string& name) {
  auto w = std::make_unique<Watch>();
  client.Prepare(&w->ctx);
  quantd::v1::WatchJobRequest req;
  req.set_name(name);
  w->reader = client.jobs().WatchJob(&w->ctx, req);
  quantd::v1::JobEvent ev;
  w->open = w->reader->Read(&ev);
  return w;
}

TEST(ServiceLimitsTest, OneTenantCannotHoldEveryWatchSlot) {
  const std::string dir = e2e::TempDir("security_watches");
  const Tokens tokens = WriteTokens(dir);
  std::string log;
  auto server = Server::Start(dir + "/data",
                              {"--auth-tokens=" + tokens.file, "--max-watches-per-tenant=3",
                               "--max-concurrent-watches=100", RootsFlag(dir)[0]},
                              &log);
  ASSERT_NE(server, nullptr) << log;
  Client acme(server->address(), tokens.acme), beta(server->address(), tokens.beta);
  const JobSpec spec = QueuedSpec(dir);
  Job a, b;
  ASSERT_TRUE(acme.Create(spec, &a).ok());
  ASSERT_TRUE(beta.Create(spec, &b).ok());

  std::vector<std::unique_ptr<Watch>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(OpenWatch(acme, a.name()));
    ASSERT_TRUE(held.back()->open) << "watch " << i + 1 << " of acme's quota";
  }
  // Acme's fourth is refused, naming the per-tenant limit.
  auto fourth = OpenWatch(acme, a.name());
  EXPECT_FALSE(fourth->open);
  const grpc::Status refused = fourth->reader->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(refused);
  EXPECT_EQ(Reason(refused), "TOO_MANY_WATCHES") << Describe(refused);
  EXPECT_NE(refused.error_message().find("tenant"), std::string::npos) << Describe(refused);
  // Beta still watches.
  auto other = OpenWatch(beta, b.name());
  EXPECT_TRUE(other->open) << "beta was starved";

  // Ending the jobs ends every stream; then acme's slots are free again.
  ASSERT_TRUE(acme.Cancel(a.name()).ok());
  ASSERT_TRUE(beta.Cancel(b.name()).ok());
  for (auto& w : held) {
    quantd::v1::JobEvent ev;
    while (w->reader->Read(&ev)) {
    }
    EXPECT_TRUE(w->reader->Finish().ok());
  }
  {
    quantd::v1::JobEvent ev;
    while (other->reader->Read(&ev)) {
    }
    EXPECT_TRUE(other->reader->Finish().ok());
  }
  EXPECT_EQ(acme.WaitTerminal(a.name()).state(), quantd::v1::CANCELLED);
  EXPECT_EQ(beta.WaitTerminal(b.name()).state(), quantd::v1::CANCELLED);
  EXPECT_TRUE(e2e::WaitUntil([&] { return OpenWatch(acme, a.name())->open; }))
      << "acme's slots were not given back";
}

// Anyone reaching a non-loopback port could create jobs and act as a worker.
TEST(ServiceLimitsTest, NoTokensOnANonLoopbackAddressNeedsInsecure) {
  const std::string dir = e2e::TempDir("security_listen");
  const Tokens tokens = WriteTokens(dir);
  for (const std::string listen : {"0.0.0.0:0", "[::]:0"}) {
    SCOPED_TRACE(listen);
    std::string log;
    auto refused = Server::Start(dir + "/refused", {"--listen=" + listen}, &log);
    EXPECT_EQ(refused, nullptr) << "quantd served " << listen << " without tokens";
    EXPECT_NE(log.find("--insecure"), std::string::npos) << log;
    EXPECT_NE(log.find("--auth-tokens"), std::string::npos) << log;
  }
  // Told so, or with tokens, it serves.
  std::string log;
  auto insecure = Server::Start(dir + "/insecure", {"--listen=0.0.0.0:0", "--insecure"}, &log);
  ASSERT_NE(insecure, nullptr) << log;
  EXPECT_TRUE(Client(insecure->address(), "").List().ok());
  auto tokened =
      Server::Start(dir + "/tokened", {"--listen=0.0.0.0:0", "--auth-tokens=" + tokens.file}, &log);
  ASSERT_NE(tokened, nullptr) << log;
  EXPECT_TRUE(Client(tokened->address(), tokens.acme).List().ok());
  // Loopback without tokens, as before.
  auto local = Server::Start(dir + "/local", {}, &log);
  ASSERT_NE(local, nullptr) << log;
}

// With no --allowed-uri-roots (the default), jobs used to read and write
// anywhere the worker could. Now no input is allowed, an output goes only
// under <data-dir>/artifacts/, and the startup log says so.
TEST(ServiceLimitsTest, WithNoRootsNothingIsReadAndOutputsStayUnderTheDataDir) {
  const std::string dir = e2e::TempDir("security_no_roots");
  const Tokens tokens = WriteTokens(dir);
  const std::string model = dir + "/models/stories260K";
  CopyModel(model);
  fs::create_directories(dir + "/out");
  std::string log;
  auto server = Server::Start(dir + "/data", {"--auth-tokens=" + tokens.file}, &log);
  ASSERT_NE(server, nullptr) << log;
  Client acme(server->address(), tokens.acme);
  // A URI outside the roots is PERMISSION_DENIED (URI_NOT_ALLOWED), naming
  // every such field.

  const grpc::Status input = acme.Create(FastSpec(model));
  EXPECT_EQ(input.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(input);
  EXPECT_TRUE(NamesField(input, "spec.model_uri")) << Describe(input);

  // Both fields at once, and a data-dir path outside artifacts/ as well.
  for (const std::string& out : {"file://" + dir + "/out/x", "file://" + dir + "/data/x"}) {
    SCOPED_TRACE(out);
    const grpc::Status s = acme.Create(FastSpec(model, out));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
    EXPECT_TRUE(NamesField(s, "spec.model_uri")) << Describe(s);
    EXPECT_TRUE(NamesField(s, "spec.export.output_uri")) << Describe(s);
  }
  EXPECT_FALSE(fs::exists(dir + "/out/x"));
  EXPECT_FALSE(fs::exists(dir + "/data/x"));
  ListJobsResponseHasNone(acme);

  const std::string start_log = server->Log();
  EXPECT_NE(start_log.find("uri policy"), std::string::npos) << start_log;
  EXPECT_NE(start_log.find("every job naming a model or dataset is refused"), std::string::npos)
      << start_log;
}

// SIGTERM ends quantd within --shutdown-grace (plus a margin for a loaded
// machine) while a long poll, a watch and a CPU-bound CreateJob are in its
// handlers; it used to never stop.
TEST(ServiceLimitsTest, SigtermEndsQuantdWhileHandlersAreBusy) {
  const std::string dir = e2e::TempDir("security_sigterm");
  std::string log;
  auto server = Server::Start(dir + "/data", {"--shutdown-grace=2s", RootsFlag(dir)[0]}, &log);
  ASSERT_NE(server, nullptr) << log;
  Client client(server->address(), "");
  Job queued;
  JobSpec spec = QueuedSpec(dir);
  ASSERT_TRUE(client.Create(spec, &queued).ok());

  std::atomic<bool> lease_returned{false};
  std::thread poll([&] {
    grpc::ClientContext ctx;
    client.Prepare(&ctx);
    quantd::v1::LeaseJobRequest req;
    req.mutable_worker()->set_id("idle");
    req.mutable_worker()->set_device("cuda:7");  // nothing to lease: it waits
    req.mutable_wait()->set_seconds(600);
    quantd::v1::LeaseJobResponse resp;
    client.workers().LeaseJob(&ctx, req, &resp);
    lease_returned = true;
  });
  std::thread busy([&] {
    JobSpec slow = spec;
    slow.mutable_quantization()->add_exclude("re:(?:[a-z0-9_.]|[a-z0-9_.])*!");
    for (int i = 0; i < 3; ++i) client.Create(slow);
  });
  auto watch = OpenWatch(client, queued.name());
  ASSERT_TRUE(watch->open);

  ASSERT_TRUE(server->process().Running()) << "quantd died before SIGTERM:\n" << server->Log();
  const auto start = std::chrono::steady_clock::now();
  kill(server->process().pid(), SIGTERM);
  const bool exited =
      e2e::WaitUntil([&] { return !server->process().Running(); }, std::chrono::seconds(600));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("quantd exited %.1f s after SIGTERM (grace 2 s)\n", seconds);
  EXPECT_TRUE(exited) << "quantd still runs 10 minutes after SIGTERM:\n" << server->Log();
  EXPECT_LT(seconds, 2 + 30) << "the grace is 2 s:\n" << server->Log();
  watch->ctx.TryCancel();
  poll.join();
  busy.join();
  EXPECT_TRUE(lease_returned.load());
}

// The arguments of the local worker `pid` of quantd, or empty.
std::vector<std::string> ChildArgs(pid_t parent) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces, so parse after ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != parent) continue;
    std::ifstream cmd(e.path() / "cmdline", std::ios::binary);
    std::vector<std::string> args;
    std::string arg;
    while (std::getline(cmd, arg, '\0')) args.push_back(arg);
    if (!args.empty() && args[0].find("quantd-worker") != std::string::npos) return args;
  }
  return {};
}

// A list-valued worker flag (--allowed-roots=A,B) reaches the worker whole,
// and each --worker-arg is its own argument.
TEST(ServiceLimitsTest, WorkerArgWithACommaReachesTheWorkerAsOneArgument) {
  const std::string dir = e2e::TempDir("security_worker_arg");
  fs::create_directories(dir + "/roots/a");
  fs::create_directories(dir + "/roots/b");
  const std::string roots = "--allowed-roots=" + dir + "/roots/a," + dir + "/roots/b";
  std::string log;
  auto server =
      Server::Start(dir + "/data",
                    {"--local-workers=1", "--worker-binary=" + e2e::Runfile("worker/quantd-worker"),
                     "--worker-arg=" + roots, "--worker-arg=--lease-wait-seconds=2"},
                    &log);
  ASSERT_NE(server, nullptr) << log;
  std::vector<std::string> args;
  ASSERT_TRUE(e2e::WaitUntil([&] {
    args = ChildArgs(server->process().pid());
    return !args.empty();
  })) << server->Log();
  std::string all;
  for (const auto& a : args) all += " [" + a + "]";
  EXPECT_NE(std::find(args.begin(), args.end(), roots), args.end()) << all;
  EXPECT_NE(std::find(args.begin(), args.end(), "--lease-wait-seconds=2"), args.end()) << all;
  EXPECT_EQ(std::find(args.begin(), args.end(), dir + "/roots/b"), args.end())
      << "split at the comma:" << all;
}

}  // namespace
}  // namespace quantd::security
