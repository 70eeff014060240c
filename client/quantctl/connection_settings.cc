#include "client/quantctl/connection_settings.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace quantd::quantctl {
namespace {

namespace fs = std::filesystem;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string ResolvePath(const std::string& path, const std::string& base_dir) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return (fs::path(base_dir) / path).lexically_normal().string();
}

}  // namespace

ClientEnvironment ClientEnvironment::FromProcess() {
  ClientEnvironment env;
  env.home = Env("HOME");
  env.xdg_config_home = Env("XDG_CONFIG_HOME");
  env.server = Env("QUANTD_SERVER");
  env.token = Env("QUANTD_TOKEN");
  env.config = Env("QUANTCTL_CONFIG");
  return env;
}

quantd::Status ApplyConfigFile(const std::string& json_text, const std::string& file_name,
                             const std::string& base_dir, ConnectionSettings& settings) {
  nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return quantd::InvalidArgumentError(
        absl::StrCat(file_name, ": not a JSON object (see docs/sdk.md for the keys)"));
  }
  struct StringKey {
    const char* name;
    std::string* target;
    bool is_path;
  };
  const StringKey string_keys[] = {
      {"address", &settings.address, false}, {"token", &settings.token, false},
      {"tls_ca", &settings.tls_ca, true},    {"tls_cert", &settings.tls_cert, true},
      {"tls_key", &settings.tls_key, true},  {"tls_server_name", &settings.tls_server_name, false},
  };
  for (const auto& [key, value] : doc.items()) {
    if (key == "tls" || key == "allow_plaintext_token") {
      if (!value.is_boolean())
        return quantd::InvalidArgumentError(
            absl::StrCat(file_name, ": \"", key, "\" must be true or false"));
      (key == "tls" ? settings.tls : settings.allow_plaintext_token) = value.get<bool>();
      continue;
    }
    const StringKey* match = nullptr;
    for (const StringKey& k : string_keys) {
      if (key == k.name) match = &k;
    }
    if (match == nullptr) {
      return quantd::InvalidArgumentError(absl::StrCat(
          file_name, ": unknown key \"", key,
          "\" (known: address, token, tls, tls_ca, tls_cert, tls_key, tls_server_name, "
          "allow_plaintext_token)"));
    }
    if (!value.is_string())
      return quantd::InvalidArgumentError(
          absl::StrCat(file_name, ": \"", key, "\" must be a string"));
    const std::string text = value.get<std::string>();
    *match->target = match->is_path ? ResolvePath(text, base_dir) : text;
  }
  return quantd::OkStatus();
}

std::string DefaultConfigPath(const ClientEnvironment& env) {
  if (!env.xdg_config_home.empty()) return env.xdg_config_home + "/quantd/quantctl.json";
  if (!env.home.empty()) return env.home + "/.config/quantd/quantctl.json";
  return "";
}

quantd::StatusOr<ConnectionSettings> ResolveConnectionSettings(const ParsedArgs& args,
                                                             const ClientEnvironment& env) {
  ConnectionSettings settings;
  std::string config_path = args.Get("quantctl-config", env.config);
  const bool named = !config_path.empty();
  if (!named) config_path = DefaultConfigPath(env);
  if (!config_path.empty() && (named || fs::exists(config_path))) {
    std::ifstream in(config_path, std::ios::binary);
    if (!in) return quantd::NotFoundError(absl::StrCat("cannot read config file ", config_path));
    std::stringstream text;
    text << in.rdbuf();
    const std::string base_dir = fs::path(config_path).parent_path().string();
    if (quantd::Status s = ApplyConfigFile(text.str(), config_path, base_dir, settings); !s.ok())
      return s;
  }
  if (!env.server.empty()) settings.address = env.server;
  if (!env.token.empty()) settings.token = env.token;
  settings.address = args.Get("server", settings.address);
  settings.token = args.Get("token", settings.token);
  if (args.Has("tls")) settings.tls = args.Get("tls") == "true";
  settings.tls_ca = args.Get("tls-ca", settings.tls_ca);
  settings.tls_cert = args.Get("tls-cert", settings.tls_cert);
  settings.tls_key = args.Get("tls-key", settings.tls_key);
  settings.tls_server_name = args.Get("tls-server-name", settings.tls_server_name);
  if (settings.tls_cert.empty() != settings.tls_key.empty()) {
    return quantd::InvalidArgumentError(
        "a client certificate needs both --tls-cert and --tls-key (or tls_cert and tls_key)");
  }
  if (args.Has("allow-plaintext-token")) {
    settings.allow_plaintext_token = args.Get("allow-plaintext-token") == "true";
  }
  if (settings.address.empty()) return quantd::InvalidArgumentError("the server address is empty");
  if (!settings.token.empty() && !settings.UsesTls() && !settings.allow_plaintext_token &&
      !IsLoopbackAddress(settings.address)) {
    return quantd::InvalidArgumentError(
        absl::StrCat("refusing to send a bearer token over plaintext to ", settings.address,
                     ": use --tls or --tls-ca, or --allow-plaintext-token on a trusted network"));
  }
  return settings;
}

bool IsLoopbackAddress(const std::string& address) {
  if (absl::StartsWith(address, "unix:") || absl::StartsWith(address, "unix-abstract:")) {
    return true;
  }
  std::string host = address;
  for (const char* prefix : {"dns:///", "ipv4:", "ipv6:"}) {
    if (absl::StartsWith(host, prefix)) host = host.substr(std::strlen(prefix));
  }
  if (absl::StartsWith(host, "[")) {
    const size_t end = host.find(']');
    host = host.substr(1, end == std::string::npos ? std::string::npos : end - 1);
  } else if (std::count(host.begin(), host.end(), ':') == 1) {
    host = host.substr(0, host.find(':'));
  }
  if (absl::AsciiStrToLower(host) == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace quantd::quantctl
