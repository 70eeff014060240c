// What the security suite (tests/security) shares: a quantd started with
// exactly the flags a test names (tokens, roots, limits), clients that carry
// a tenant's bearer token, the error details quantd attaches, digests of
// victim trees, and waits on conditions.
//
// Every attack is one test case. Each asserts that the attack
// was refused with an error naming the field, or was harmless; that the
// victim is byte-identical afterwards; that the frontend still serves the
// other tenants; and that no job is left stuck.
#ifndef QUANTD_TESTS_SECURITY_SECURITY_HARNESS_H_
#define QUANTD_TESTS_SECURITY_SECURITY_HARNESS_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "quantd/v1/quantization_service.grpc.pb.h"
#include "quantd/v1/worker_service.grpc.pb.h"
#include "tests/e2e/harness.h"

namespace quantd::security {

// Bearer tokens of the suite's callers and the --auth-tokens file naming
// them (sha256 of each token, tenant, role).
struct Tokens {
  std::string acme;      // submitter, tenant acme
  std::string beta;      // submitter, tenant beta
  std::string admin;     // admin, tenant ops
  std::string attacker;  // a worker credential other than the local worker's
  std::string file;
};
Tokens WriteTokens(const std::string& dir);

// quantd on 127.0.0.1:<free port> with --data-dir, --port-file and `flags`
// (nothing else: no default roots or tokens).
class Server {
 public:
  // nullptr when quantd exits before serving; `log` then holds its log.
  static std::unique_ptr<Server> Start(const std::string& data_dir,
                                       const std::vector<std::string>& flags,
                                       std::string* log = nullptr);
  const std::string& address() const { return address_; }
  e2e::Process& process() { return *process_; }
  std::string Log() const { return process_->Log(); }
  // When an attack killed quantd, starts it again (same flags and data) so
  // that the next attack is judged on its own; false if it cannot start.
  bool Revive(std::string* log = nullptr);

 private:
  bool Launch(std::string* log);

  std::string data_dir_;
  std::vector<std::string> flags_;
  std::unique_ptr<e2e::Process> process_;
  std::string address_;
};

// A caller of both services with one bearer token (none: anonymous).
class Client {
 public:
  Client(const std::string& address, std::string token);

  grpc::Status Create(const quantd::v1::JobSpec& spec, quantd::v1::Job* job = nullptr);
  grpc::Status Get(const std::string& name, quantd::v1::Job* job = nullptr);
  grpc::Status List(quantd::v1::ListJobsResponse* out = nullptr);
  grpc::Status Cancel(const std::string& name, quantd::v1::Job* job = nullptr);
  // Every event of a finished job (WatchJob replays them and ends).
  grpc::Status Events(const std::string& name, std::vector<quantd::v1::JobEvent>* out);
  // Polls GetJob until the job is terminal; fails the test (returning the
  // job as last seen) only when it has not moved for `stall`.
  quantd::v1::Job WaitTerminal(const std::string& name,
                               std::chrono::seconds stall = std::chrono::seconds(300));

  // Adds the token and a generous deadline (a ceiling for a hang).
  void Prepare(grpc::ClientContext* ctx,
               std::chrono::seconds deadline = std::chrono::seconds(300)) const;
  quantd::v1::QuantizationService::Stub& jobs() { return *jobs_; }
  quantd::v1::WorkerService::Stub& workers() { return *workers_; }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<quantd::v1::QuantizationService::Stub> jobs_;
  std::unique_ptr<quantd::v1::WorkerService::Stub> workers_;
  std::string token_;
};

// The ErrorInfo reason quantd attached ("" when none).
std::string Reason(const grpc::Status& s);
// The BadRequest field violations quantd attached, as "field: description".
std::vector<std::string> Violations(const grpc::Status& s);
// Whether the error names `field`, in a violation or in its message.
bool NamesField(const grpc::Status& s, const std::string& field);
// "CODE: message [reason] {violations}" for failure messages.
std::string Describe(const grpc::Status& s);

// relative path -> "dir", "file <sha256>" or "link -> <target>", for every
// entry under `root` (symlinks not followed); {"/": "missing"} when absent.
std::map<std::string, std::string> TreeDigest(const std::string& root);

// Writes `content` to `path` (creating parent directories).
void WriteFile(const std::string& path, const std::string& content);
std::string ReadFile(const std::string& path);
// A copy of the bundled stories260K model (config.json, model.safetensors,
// tokenizer.model) at `dir`, as regular files.
void CopyModel(const std::string& dir);

// A valid spec: `model` (a directory) quantized w_int8_per_channel_sym,
// without evaluation; `output` ("" for the default) as its output URI.
quantd::v1::JobSpec FastSpec(const std::string& model, const std::string& output = "");

// n times `c`.
std::string Repeat(char c, size_t n);

// The fixture of a test file whose cases share one quantd: tokens on, one
// supervised local worker (one intra-op thread: the tiny model needs no
// more, and jobs stay steady beside the test's own threads), a copy of
// stories260K at Model() and the sample text at <root>/models/eval.txt.
// quantd is revived between cases, so an attack that killed it fails only
// its own case; tenant beta's job (the canary) is read back after each.
class SuiteFixture : public ::testing::Test {
 protected:
  // Call from SetUpTestSuite: a temp root named `name`, the directories
  // `dirs` (relative to it) made, quantd started with
  // --allowed-uri-roots=file://<root>/models plus file://<root>/<r> for
  // each of `roots`, and `flags`.
  static void StartSuite(const std::string& name, const std::vector<std::string>& dirs,
                         const std::vector<std::string>& roots,
                         const std::vector<std::string>& flags = {});
  static void TearDownTestSuite();

  // quantd serves (revived if need be) and the canary exists.
  void SetUp() override;
  // quantd is alive and tenant beta is still served: it lists its jobs and
  // reads its canary.
  void ExpectOthersServed();

  static std::string Model() { return *root_ + "/models/stories260K"; }
  Client Acme() { return Client(server_->address(), tokens_->acme); }
  Client Beta() { return Client(server_->address(), tokens_->beta); }

  static std::string* root_;
  static Tokens* tokens_;
  static Server* server_;
  static std::string* log_;
  static std::string* canary_;  // "" when beta could not create it
};

}  // namespace quantd::security

#endif  // QUANTD_TESTS_SECURITY_SECURITY_HARNESS_H_
