#include "client/quantctl/args.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace quantd::quantctl {

std::string ParsedArgs::Get(const std::string& name, const std::string& def) const {
  auto it = flags.find(name);
  return it == flags.end() || it->second.empty() ? def : it->second.back();
}

std::vector<std::string> ParsedArgs::GetAll(const std::string& name) const {
  auto it = flags.find(name);
  return it == flags.end() ? std::vector<std::string>{} : it->second;
}

absl::StatusOr<int> ParsedArgs::GetInt(const std::string& name, int def) const {
  if (!Has(name)) return def;
  int v = 0;
  if (!absl::SimpleAtoi(Get(name), &v))
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " needs an integer, got '", Get(name), "'"));
  return v;
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& argv,
                                     const std::set<std::string>& known_flags,
                                     const std::set<std::string>& bool_flags) {
  ParsedArgs out;
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string a = argv[i];
    if (a == "-o") a = "--output-format";
    if (a == "-h") a = "--help";
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      std::string name = a.substr(2), value;
      bool has_value = false;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      if (!known_flags.count(name) && !bool_flags.count(name))
        return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
      if (bool_flags.count(name)) {
        if (has_value && value != "true" && value != "false")
          return absl::InvalidArgumentError(absl::StrCat("--", name, " takes true or false"));
        out.flags[name].push_back(has_value ? value : "true");
        continue;
      }
      if (!has_value) {
        if (i + 1 >= argv.size())
          return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
        value = argv[++i];
      }
      out.flags[name].push_back(value);
    } else if (out.command.empty()) {
      out.command = a;
    } else {
      out.positional.push_back(a);
    }
  }
  return out;
}

const std::set<std::string>& JobSpecValueFlags() {
  static const auto* flags = new std::set<std::string>{
      "model",  "scheme",       "config",           "group-size", "exclude",     "calib",
      "calib-samples", "calib-seq-len", "calib-sampling", "calib-seed", "eval", "n-ctx",
      "eval-windows", "max-ppl-increase", "max-kl", "format", "output", "device", "label",
      "max-attempts", "gguf-float-type"};
  return *flags;
}

const std::set<std::string>& JobSpecBoolFlags() {
  static const auto* flags = new std::set<std::string>{"overwrite", "no-eval", "fp8-kv-cache"};
  return *flags;
}

const std::set<std::string>& QuantctlValueFlags() {
  static const auto* flags = [] {
    auto* f = new std::set<std::string>{
        "server", "output-format", "request-id", "state", "page-size", "view",
        // connection and credentials (connection_settings.h)
        "token", "tls-ca", "tls-cert", "tls-key", "tls-server-name", "quantctl-config"};
    f->insert(JobSpecValueFlags().begin(), JobSpecValueFlags().end());  // submit's job flags
    return f;
  }();
  return *flags;
}

const std::set<std::string>& QuantctlBoolFlags() {
  static const auto* flags = [] {
    auto* f = new std::set<std::string>{"wait", "all", "help", "tls"};
    f->insert(JobSpecBoolFlags().begin(), JobSpecBoolFlags().end());
    return f;
  }();
  return *flags;
}

absl::StatusOr<ParsedArgs> ParseQuantctlArgs(const std::vector<std::string>& argv) {
  return ParseArgs(argv, QuantctlValueFlags(), QuantctlBoolFlags());
}

}  // namespace quantd::quantctl
