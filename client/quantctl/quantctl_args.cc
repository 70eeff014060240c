#include "client/quantctl/quantctl_args.h"

#include "absl/strings/str_cat.h"
#include "client/cli_common/job_spec_flags.h"

namespace quantd::quantctl {
namespace {

constexpr char kUsageHead[] = R"(quantctl: submit and follow quantd quantization jobs.

usage: quantctl [global flags] <command> [flags] [args]

global flags:
  --server HOST:PORT      quantd address (default $QUANTD_SERVER, the config file's
                          "address", or 127.0.0.1:50051)
  -o, --output-format text|json
                          output format (json prints proto3 JSON)
  --token TOKEN           bearer token (default $QUANTD_TOKEN or the config file's)
  --tls                   TLS with the system's CA roots
  --tls-ca FILE           TLS, verifying quantd with this PEM CA bundle
  --tls-cert FILE, --tls-key FILE
                          client certificate and key (mTLS)
  --tls-server-name NAME  name to verify in quantd's certificate (default: the host)
  --allow-plaintext-token send the token without TLS to an address that is not
                          loopback (a trusted network); refused otherwise
  --quantctl-config FILE  config file (default $QUANTCTL_CONFIG, else
                          ~/.config/quantd/quantctl.json when it exists): JSON with
                          address, token, tls, tls_ca, tls_cert, tls_key,
                          tls_server_name, allow_plaintext_token. Flags override
                          the environment, which overrides the file.

commands:
  submit --model URI (--scheme NAME | --config FILE |
         --auto-precision --candidates LIST) [flags]
)";

// The submit flags after the job flags, then the other commands.
constexpr char kUsageTail[] = R"(      --device D              cpu, cuda or cuda:N (default any)
      --label K=V             job label (repeatable)
      --request-id ID         idempotency key (default random)
      --max-attempts N        leases before the job fails (default 3)
      --wait                  watch the job until it ends
  watch NAME                  live progress, then the final metrics
  get NAME                    show a job
  list [--state S] [--label K=V] [--page-size N] [--all] [--view basic|full]
                              basic (default) leaves out each job's quantization
                              config and per-block metrics; full has everything
  cancel NAME                 cancel a queued or running job
  report NAME [--format html|md] [--out FILE]
                              the job report: one self-contained HTML file with
                              charts (default), or the same facts as Markdown

URIs may be plain paths; they are turned into absolute file:// URIs.
Exit codes: 0 ok, 1 job FAILED/CANCELLED, 2 usage error, 3 request refused or server unreachable.
)";

}  // namespace

const std::set<std::string>& QuantctlValueFlags() {
  static const auto* flags = [] {
    auto* f = new std::set<std::string>{
        "server", "output-format", "request-id", "state", "page-size", "view", "out",
        // connection and credentials (connection_settings.h)
        "token", "tls-ca", "tls-cert", "tls-key", "tls-server-name", "quantctl-config",
        // submit's job flags that a local run does not take (FillJobSpec reads them)
        "device", "label", "max-attempts"};
    const auto& job = cli_common::JobSpecValueFlags();
    f->insert(job.begin(), job.end());
    return f;
  }();
  return *flags;
}

const std::set<std::string>& QuantctlBoolFlags() {
  static const auto* flags = [] {
    auto* f = new std::set<std::string>{"wait", "all", "help", "tls", "allow-plaintext-token"};
    const auto& job = cli_common::JobSpecBoolFlags();
    f->insert(job.begin(), job.end());
    return f;
  }();
  return *flags;
}

quantd::StatusOr<ParsedArgs> ParseQuantctlArgs(const std::vector<std::string>& argv) {
  return cli_common::ParseArgs(argv, QuantctlValueFlags(), QuantctlBoolFlags());
}

std::string QuantctlUsage() {
  // The job flags sit under "submit", four columns deeper than a command.
  return absl::StrCat(kUsageHead, cli_common::JobSpecFlagsUsage(6), kUsageTail);
}

}  // namespace quantd::quantctl
