// quantctl: the command-line client of quantd.
//
//   quantctl [--server HOST:PORT] [-o text|json] <command> [flags] [args]
//
// Commands: submit, watch, get, list, cancel. See `quantctl help` and
// docs/quantctl.md. Exit codes: 0 ok; 1 the job ended FAILED or CANCELLED;
// 2 usage error; 3 the server refused the request or could not be reached.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli_common/job_spec_flags.h"
#include "client/cli_common/render.h"
#include "client/quantctl/connection_settings.h"
#include "client/quantctl/quantctl_args.h"
#include "client/report/job_report.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "quantd/v1/quantization_service.grpc.pb.h"
#include "worker/common/status.h"

namespace quantd::quantctl {
namespace {

using cli_common::FillJobSpec;
using cli_common::ProgressDisplay;
using cli_common::ReadFileText;
using cli_common::RenderBlockMetrics;
using cli_common::RenderJob;
using cli_common::RenderJobTable;
using cli_common::StdoutAndStderrAreTerminals;
using cli_common::ToJson;
using quantd::v1::Job;
using quantd::v1::QuantizationService;

constexpr int kExitOk = 0;
constexpr int kExitJobFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitRpc = 3;

struct Client {
  std::unique_ptr<QuantizationService::Stub> stub;
  bool json = false;
  std::string token;

  // Every call carries the bearer token. It goes in per-call metadata rather
  // than call credentials, which gRPC only sends over TLS: a token on a
  // plaintext loopback channel is a valid setup (TLS terminated elsewhere).
  void Prepare(grpc::ClientContext& ctx) const {
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  }
};

// The one table of code names (worker/common/status.h).
const char* CodeName(grpc::StatusCode code) {
  return quantd::StatusCodeName(static_cast<quantd::StatusCode>(code));
}

// Prints a refused request with its reason and every field violation.
int ReportRpcError(const grpc::Status& s) {
  std::cerr << "error: " << CodeName(s.error_code()) << ": " << s.error_message() << "\n";
  google::rpc::Status details;
  if (!s.error_details().empty() && details.ParseFromString(s.error_details())) {
    for (const auto& any : details.details()) {
      google::rpc::ErrorInfo info;
      google::rpc::BadRequest bad;
      if (any.UnpackTo(&info)) {
        std::cerr << "  reason: " << info.reason() << "\n";
      } else if (any.UnpackTo(&bad)) {
        for (const auto& v : bad.field_violations())
          std::cerr << "  " << v.field() << ": " << v.description() << "\n";
      }
    }
  }
  return kExitRpc;
}

std::string RandomRequestId() {
  std::random_device rd;
  std::mt19937_64 gen(rd());
  return absl::StrCat("quantctl-", absl::Hex(gen(), absl::kZeroPad16));
}

quantd::StatusOr<quantd::v1::CreateJobRequest> BuildCreateRequest(const ParsedArgs& a) {
  quantd::v1::CreateJobRequest req;
  if (quantd::Status s = FillJobSpec(a, req.mutable_spec()); !s.ok())
    return quantd::Status(s.code(), absl::StrCat("submit ", s.message()));
  req.mutable_spec()->set_device(a.Get("device"));
  req.set_request_id(a.Has("request-id") ? a.Get("request-id") : RandomRequestId());
  return req;
}

// A channel to the resolved address: plaintext, or TLS with the given roots
// (system roots when none) and optional client certificate.
quantd::StatusOr<std::shared_ptr<grpc::Channel>> NewChannel(const ConnectionSettings& settings) {
  if (!settings.UsesTls()) {
    return grpc::CreateChannel(settings.address, grpc::InsecureChannelCredentials());
  }
  grpc::SslCredentialsOptions ssl;
  for (auto [path, target] : {std::pair{&settings.tls_ca, &ssl.pem_root_certs},
                              std::pair{&settings.tls_cert, &ssl.pem_cert_chain},
                              std::pair{&settings.tls_key, &ssl.pem_private_key}}) {
    if (path->empty()) continue;
    auto pem = ReadFileText(*path);
    if (!pem.ok()) return pem.status();
    *target = *std::move(pem);
  }
  grpc::ChannelArguments channel_args;
  if (!settings.tls_server_name.empty()) {
    channel_args.SetSslTargetNameOverride(settings.tls_server_name);
  }
  return grpc::CreateCustomChannel(settings.address, grpc::SslCredentials(ssl), channel_args);
}

void PrintStatusLine(const std::string& line) { std::cout << line << std::endl; }

// GetJob: the whole job.
grpc::Status FetchJob(Client& c, const std::string& name, Job& job) {
  grpc::ClientContext ctx;
  c.Prepare(ctx);
  quantd::v1::GetJobRequest req;
  req.set_name(name);
  return c.stub->GetJob(&ctx, req, &job);
}

// Follows a job's event stream, reconnecting after `last sequence` when the
// frontend restarts, then prints the final job. Returns the exit code.
int Watch(Client& c, const std::string& name) {
  int64_t after = 0;
  int block_count = 0;
  ProgressDisplay bar(std::cerr, !c.json && StdoutAndStderrAreTerminals());
  auto close_bar = [&] { bar.EndLine(); };
  auto deadline_reconnect = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (true) {
    grpc::ClientContext ctx;
    c.Prepare(ctx);
    quantd::v1::WatchJobRequest req;
    req.set_name(name);
    req.set_after_sequence(after);
    auto reader = c.stub->WatchJob(&ctx, req);
    quantd::v1::JobEvent ev;
    while (reader->Read(&ev)) {
      after = ev.sequence();
      if (c.json) {
        std::cout << ToJson(ev, false) << std::endl;
        continue;
      }
      switch (ev.payload_case()) {
        case quantd::v1::JobEvent::kState:
          close_bar();
          PrintStatusLine(
              absl::StrCat("state: ", quantd::v1::JobState_Name(ev.state()),
                           ev.attempt() > 0 ? absl::StrCat(" (attempt ", ev.attempt(), ")") : ""));
          break;
        case quantd::v1::JobEvent::kProgress: {
          const auto& p = ev.progress();
          if (p.block_count() > 0) block_count = p.block_count();
          bar.Show(p);
          break;
        }
        case quantd::v1::JobEvent::kLog: {
          close_bar();
          const char* sev = ev.log().severity() == quantd::v1::WARNING ? "warning: "
                            : ev.log().severity() == quantd::v1::ERROR ? "error: "
                                                                       : "";
          PrintStatusLine(absl::StrCat(sev, ev.log().message()));
          break;
        }
        case quantd::v1::JobEvent::kBlockMetrics:
          close_bar();
          PrintStatusLine(
              RenderBlockMetrics(ev.block_metrics(), ev.block_metrics().block_count() > 0
                                                         ? ev.block_metrics().block_count()
                                                         : block_count));
          break;
        default:
          break;
      }
    }
    grpc::Status s = reader->Finish();
    close_bar();
    if (s.ok()) break;
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE &&
        std::chrono::steady_clock::now() < deadline_reconnect) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;  // resume after the last event we saw
    }
    return ReportRpcError(s);
  }
  Job job;
  grpc::Status s = FetchJob(c, name, job);
  if (!s.ok()) return ReportRpcError(s);
  if (c.json) {
    std::cout << ToJson(job, false) << std::endl;
  } else {
    std::cout << RenderJob(job);
  }
  return job.state() == quantd::v1::SUCCEEDED ? kExitOk : kExitJobFailed;
}

int Submit(Client& c, const ParsedArgs& a) {
  auto req = BuildCreateRequest(a);
  if (!req.ok()) {
    std::cerr << "quantctl submit: " << req.status().message() << "\n";
    return kExitUsage;
  }
  Job job;
  grpc::Status s;
  // Retrying is safe: CreateJob is idempotent on request_id.
  for (int attempt = 0; attempt < 5; ++attempt) {
    grpc::ClientContext ctx;
    c.Prepare(ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    s = c.stub->CreateJob(&ctx, *req, &job);
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500 << attempt));
  }
  if (!s.ok()) return ReportRpcError(s);
  if (c.json && !a.Has("wait")) {
    std::cout << ToJson(job) << std::endl;
  } else if (!c.json) {
    std::cout << job.name() << std::endl;
  }
  if (a.Has("wait")) return Watch(c, job.name());
  return kExitOk;
}

int Get(Client& c, const std::string& name) {
  Job job;
  grpc::Status s = FetchJob(c, name, job);
  if (!s.ok()) return ReportRpcError(s);
  std::cout << (c.json ? ToJson(job) + "\n" : RenderJob(job));
  return kExitOk;
}

// The job report: HTML (default) or Markdown, to stdout or --out FILE.
int Report(Client& c, const std::string& name, const ParsedArgs& a) {
  const std::string format = a.Get("format", "html");
  if (format != "html" && format != "md") {
    std::cerr << "quantctl report: --format must be html or md, not '" << format << "'\n";
    return kExitUsage;
  }
  Job job;
  grpc::Status s = FetchJob(c, name, job);
  if (!s.ok()) return ReportRpcError(s);
  const std::string text =
      format == "html" ? report::RenderJobReportHtml(job) : report::RenderJobReportMarkdown(job);
  if (!a.Has("out")) {
    std::cout << text;
    return kExitOk;
  }
  const std::string path = a.Get("out");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) {
    std::cerr << "quantctl report: cannot write " << path << "\n";
    return kExitUsage;
  }
  std::cerr << "wrote " << path << " (" << text.size() << " bytes)\n";
  return kExitOk;
}

int Cancel(Client& c, const std::string& name) {
  grpc::ClientContext ctx;
  c.Prepare(ctx);
  quantd::v1::CancelJobRequest req;
  req.set_name(name);
  Job job;
  grpc::Status s = c.stub->CancelJob(&ctx, req, &job);
  if (!s.ok()) return ReportRpcError(s);
  if (c.json) {
    std::cout << ToJson(job) << std::endl;
  } else {
    std::cout << job.name() << ": " << quantd::v1::JobState_Name(job.state()) << std::endl;
  }
  return kExitOk;
}

int List(Client& c, const ParsedArgs& a) {
  quantd::v1::ListJobsRequest req;
  auto size = a.GetInt("page-size", 0);
  if (!size.ok()) {
    std::cerr << "quantctl list: " << size.status().message() << "\n";
    return kExitUsage;
  }
  req.set_page_size(*size);
  const std::string view = absl::AsciiStrToLower(a.Get("view", "basic"));
  if (view == "basic") {
    req.set_view(quantd::v1::BASIC);
  } else if (view == "full") {
    req.set_view(quantd::v1::FULL);
  } else {
    std::cerr << "quantctl list: --view '" << a.Get("view") << "' is not basic or full\n";
    return kExitUsage;
  }
  for (const auto& st : a.GetAll("state")) {
    quantd::v1::JobState state;
    if (!quantd::v1::JobState_Parse(absl::AsciiStrToUpper(st), &state)) {
      std::cerr << "quantctl list: --state '" << st
                << "' is not one of queued, running, succeeded, failed, cancelling, cancelled\n";
      return kExitUsage;
    }
    req.add_states(state);
  }
  for (const auto& kv : a.GetAll("label")) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    (*req.mutable_labels())[p.first] = p.second;
  }
  std::vector<Job> jobs;
  quantd::v1::ListJobsResponse all;
  do {
    grpc::ClientContext ctx;
    c.Prepare(ctx);
    quantd::v1::ListJobsResponse resp;
    grpc::Status s = c.stub->ListJobs(&ctx, req, &resp);
    if (!s.ok()) return ReportRpcError(s);
    for (const auto& j : resp.jobs()) {
      jobs.push_back(j);
      *all.add_jobs() = j;
    }
    req.set_page_token(resp.next_page_token());
    all.set_next_page_token(resp.next_page_token());
  } while (a.Has("all") && !req.page_token().empty());
  if (c.json) {
    std::cout << ToJson(all) << std::endl;
  } else {
    std::cout << RenderJobTable(jobs);
    if (!all.next_page_token().empty()) std::cout << "(more: --all, or --page-size)\n";
  }
  return kExitOk;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = ParseQuantctlArgs(args);
  if (!parsed.ok()) {
    std::cerr << "quantctl: " << parsed.status().message() << "\n\n" << QuantctlUsage();
    return kExitUsage;
  }
  const ParsedArgs& a = *parsed;
  if (a.Has("help") || a.command.empty() || a.command == "help") {
    std::cout << QuantctlUsage();
    return a.command.empty() && !a.Has("help") ? kExitUsage : kExitOk;
  }
  const std::string output = a.Get("output-format", "text");
  if (output != "text" && output != "json") {
    std::cerr << "quantctl: -o must be text or json\n";
    return kExitUsage;
  }
  auto settings = ResolveConnectionSettings(a, ClientEnvironment::FromProcess());
  if (!settings.ok()) {
    std::cerr << "quantctl: " << settings.status().message() << "\n";
    return kExitUsage;
  }
  auto channel = NewChannel(*settings);
  if (!channel.ok()) {
    std::cerr << "quantctl: " << channel.status().message() << "\n";
    return kExitUsage;
  }
  Client c;
  c.json = output == "json";
  c.token = settings->token;
  c.stub = QuantizationService::NewStub(*channel);

  // Accepts "jobs/ID" or the bare ID.
  std::string name;
  auto need_name = [&](const char* cmd) -> bool {
    if (a.positional.size() != 1) {
      std::cerr << "quantctl " << cmd << ": needs exactly one job name, e.g. jobs/0123abcd\n";
      return false;
    }
    name = absl::StartsWith(a.positional[0], "jobs/") ? a.positional[0] : "jobs/" + a.positional[0];
    return true;
  };
  if (a.command == "submit") return Submit(c, a);
  if (a.command == "watch") return need_name("watch") ? Watch(c, name) : kExitUsage;
  if (a.command == "get") return need_name("get") ? Get(c, name) : kExitUsage;
  if (a.command == "cancel") return need_name("cancel") ? Cancel(c, name) : kExitUsage;
  if (a.command == "list") return List(c, a);
  if (a.command == "report") return need_name("report") ? Report(c, name, a) : kExitUsage;
  std::cerr << "quantctl: unknown command '" << a.command << "'\n\n" << QuantctlUsage();
  return kExitUsage;
}

}  // namespace
}  // namespace quantd::quantctl

int main(int argc, char** argv) { return quantd::quantctl::Main(argc, argv); }
