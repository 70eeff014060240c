#include "tests/security/security_harness.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "worker/common/sha256.h"

namespace quantd::security {

namespace fs = std::filesystem;
using quantd::v1::Job;

namespace {

std::string RandomHex(size_t bytes) {
  std::random_device rd;
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes; ++i) {
    const unsigned v = rd() & 0xff;
    out += kHex[v >> 4];
    out += kHex[v & 15];
  }
  return out;
}

google::rpc::Status Details(const grpc::Status& s) {
  google::rpc::Status details;
  if (!s.error_details().empty()) details.ParseFromString(s.error_details());
  return details;
}

}  // namespace

Tokens WriteTokens(const std::string& dir) {
  Tokens t;
  t.acme = RandomHex(16);
  t.beta = RandomHex(16);
  t.admin = RandomHex(16);
  t.attacker = RandomHex(16);
  t.file = dir + "/auth-tokens";
  std::ostringstream f;
  f << "# tests/security: sha256 of each token, tenant, role\n";
  f << Sha256Hex(t.acme) << " acme submitter\n";
  f << Sha256Hex(t.beta) << " beta submitter\n";
  f << Sha256Hex(t.admin) << " ops admin\n";
  f << Sha256Hex(t.attacker) << " - worker\n";
  WriteFile(t.file, f.str());
  return t;
}

std::unique_ptr<Server> Server::Start(const std::string& data_dir,
                                      const std::vector<std::string>& flags, std::string* log) {
  auto server = std::unique_ptr<Server>(new Server());
  server->data_dir_ = data_dir;
  server->flags_ = flags;
  if (!server->Launch(log)) return nullptr;
  return server;
}

bool Server::Revive(std::string* log) {
  if (process_->Running()) return true;
  return Launch(log);
}

bool Server::Launch(std::string* log) {
  const std::string port_file = data_dir_ + "/port";
  fs::create_directories(data_dir_);
  fs::remove(port_file);
  address_.clear();
  std::vector<std::string> argv = {e2e::Runfile("server/quantd"), "--listen=127.0.0.1:0",
                                   "--data-dir=" + data_dir_, "--port-file=" + port_file};
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  process_ = e2e::Process::Start(argv, data_dir_ + "/quantd.log");
  // A ceiling for a hang only: a loaded machine starts quantd slowly.
  e2e::WaitUntil(
      [&] {
        std::ifstream in(port_file);
        std::string addr;
        if (in && std::getline(in, addr) && !addr.empty()) {
          address_ = addr;
          return true;
        }
        return !process_->Running();
      },
      std::chrono::seconds(600), std::chrono::milliseconds(50));
  if (address_.empty()) {
    if (log != nullptr) *log = process_->Log();
    return false;
  }
  return true;
}

Client::Client(const std::string& address, std::string token)
    : channel_(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
      jobs_(quantd::v1::QuantizationService::NewStub(channel_)),
      workers_(quantd::v1::WorkerService::NewStub(channel_)),
      token_(std::move(token)) {}

void Client::Prepare(grpc::ClientContext* ctx, std::chrono::seconds deadline) const {
  if (!token_.empty()) ctx->AddMetadata("authorization", "Bearer " + token_);
  ctx->set_deadline(std::chrono::system_clock::now() + deadline);
}

grpc::Status Client::Create(const quantd::v1::JobSpec& spec, Job* job) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  quantd::v1::CreateJobRequest req;
  *req.mutable_spec() = spec;
  Job ignored;
  return jobs_->CreateJob(&ctx, req, job != nullptr ? job : &ignored);
}

grpc::Status Client::Get(const std::string& name, Job* job) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  quantd::v1::GetJobRequest req;
  req.set_name(name);
  Job ignored;
  return jobs_->GetJob(&ctx, req, job != nullptr ? job : &ignored);
}

grpc::Status Client::List(quantd::v1::ListJobsResponse* out) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  quantd::v1::ListJobsRequest req;
  req.set_page_size(500);
  quantd::v1::ListJobsResponse ignored;
  return jobs_->ListJobs(&ctx, req, out != nullptr ? out : &ignored);
}

grpc::Status Client::Cancel(const std::string& name, Job* job) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  quantd::v1::CancelJobRequest req;
  req.set_name(name);
  Job ignored;
  return jobs_->CancelJob(&ctx, req, job != nullptr ? job : &ignored);
}

grpc::Status Client::Events(const std::string& name, std::vector<quantd::v1::JobEvent>* out) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  quantd::v1::WatchJobRequest req;
  req.set_name(name);
  auto reader = jobs_->WatchJob(&ctx, req);
  quantd::v1::JobEvent ev;
  while (reader->Read(&ev)) out->push_back(ev);
  return reader->Finish();
}

Job Client::WaitTerminal(const std::string& name, std::chrono::seconds stall) {
  return e2e::WaitWhileJobMoves(
      name, [&](Job* job) { return Get(name, job).ok(); }, stall);
}

std::string Reason(const grpc::Status& s) {
  const google::rpc::Status details = Details(s);
  for (const auto& any : details.details()) {
    google::rpc::ErrorInfo info;
    if (any.UnpackTo(&info)) return info.reason();
  }
  return "";
}

std::vector<std::string> Violations(const grpc::Status& s) {
  std::vector<std::string> out;
  const google::rpc::Status details = Details(s);
  for (const auto& any : details.details()) {
    google::rpc::BadRequest bad;
    if (!any.UnpackTo(&bad)) continue;
    for (const auto& v : bad.field_violations()) out.push_back(v.field() + ": " + v.description());
  }
  return out;
}

bool NamesField(const grpc::Status& s, const std::string& field) {
  if (s.error_message().find(field) != std::string::npos) return true;
  for (const std::string& v : Violations(s))
    if (v.rfind(field, 0) == 0) return true;
  return false;
}

std::string Describe(const grpc::Status& s) {
  std::string out = std::to_string(s.error_code()) + ": " + s.error_message();
  const std::string reason = Reason(s);
  if (!reason.empty()) out += " [" + reason + "]";
  for (const std::string& v : Violations(s)) out += " {" + v + "}";
  return out;
}

std::map<std::string, std::string> TreeDigest(const std::string& root) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(root, ec))) return {{"/", "missing"}};
  auto describe = [](const fs::path& p) -> std::string {
    std::error_code e;
    const fs::file_status st = fs::symlink_status(p, e);
    if (fs::is_symlink(st)) return "link -> " + fs::read_symlink(p, e).string();
    if (fs::is_directory(st)) return "dir";
    auto sha = Sha256File(p.string());
    return "file " + (sha.ok() ? *sha : std::string("unreadable"));
  };
  out["/"] = describe(root);
  if (out["/"] != "dir") return out;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::end(it); it.increment(ec)) {
    out[fs::relative(it->path(), root).string()] = describe(it->path());
  }
  return out;
}

void WriteFile(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << content;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void CopyModel(const std::string& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Runfiles are symlinks into the source tree: copy the bytes.
  for (const char* name : {"config.json", "model.safetensors", "tokenizer.model"}) {
    fs::copy_file(fs::canonical(e2e::Runfile(std::string("models/stories260K/") + name)),
                  fs::path(dir) / name, fs::copy_options::overwrite_existing);
  }
}

quantd::v1::JobSpec FastSpec(const std::string& model, const std::string& output) {
  quantd::v1::JobSpec spec;
  spec.set_model_uri("file://" + model);
  spec.mutable_quantization()->set_scheme("w_int8_per_channel_sym");
  spec.mutable_evaluation()->set_disabled(true);
  if (!output.empty()) spec.mutable_export_()->set_output_uri(output);
  return spec;
}

std::string Repeat(char c, size_t n) { return std::string(n, c); }

std::string* SuiteFixture::root_ = nullptr;
Tokens* SuiteFixture::tokens_ = nullptr;
Server* SuiteFixture::server_ = nullptr;
std::string* SuiteFixture::log_ = nullptr;
std::string* SuiteFixture::canary_ = nullptr;

void SuiteFixture::StartSuite(const std::string& name, const std::vector<std::string>& dirs,
                              const std::vector<std::string>& roots,
                              const std::vector<std::string>& flags) {
  root_ = new std::string(e2e::TempDir(name));
  tokens_ = new Tokens(WriteTokens(*root_));
  log_ = new std::string();
  canary_ = new std::string();
  CopyModel(Model());
  fs::copy_file(fs::canonical(e2e::Runfile("tests/data/tinystories-sample.txt")),
                *root_ + "/models/eval.txt");
  std::string roots_flag = "--allowed-uri-roots=file://" + *root_ + "/models";
  for (const std::string& r : roots) roots_flag += ",file://" + *root_ + "/" + r;
  for (const std::string& d : dirs) fs::create_directories(*root_ + "/" + d);
  std::vector<std::string> argv = {
      "--auth-tokens=" + tokens_->file, roots_flag, "--local-workers=1",
      "--worker-binary=" + e2e::Runfile("worker/quantd-worker"), "--worker-arg=--threads=1"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  server_ = Server::Start(*root_ + "/data", argv, log_).release();
  if (server_ == nullptr) return;
  Job job;
  if (Client(server_->address(), tokens_->beta).Create(FastSpec(Model()), &job).ok())
    *canary_ = job.name();
}

void SuiteFixture::TearDownTestSuite() {
  delete server_;
  server_ = nullptr;
}

void SuiteFixture::SetUp() {
  ASSERT_NE(server_, nullptr) << "quantd did not start:\n" << *log_;
  ASSERT_TRUE(server_->Revive(log_)) << "quantd does not start again:\n" << *log_;
  ASSERT_FALSE(canary_->empty()) << "tenant beta could not create its job";
}

void SuiteFixture::ExpectOthersServed() {
  if (server_ == nullptr) return;
  EXPECT_TRUE(server_->process().Running()) << "quantd died:\n" << server_->Log();
  Client beta = Beta();
  const grpc::Status list = beta.List();
  EXPECT_TRUE(list.ok()) << Describe(list);
  const grpc::Status get = beta.Get(*canary_);
  EXPECT_TRUE(get.ok()) << Describe(get);
}

}  // namespace quantd::security
