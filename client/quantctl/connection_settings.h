// Where quantctl connects and with which credentials: the server address, a
// bearer token and TLS files, merged from flags, the environment and a JSON
// config file (~/.config/quantd/quantctl.json, or --quantctl-config PATH).
// Flags win over the environment, which wins over the file.
//
// The config file:
//   {"address": "quantd.example:50051", "token": "...",
//    "tls": true, "tls_ca": "ca.pem", "tls_cert": "me.pem", "tls_key": "me.key",
//    "tls_server_name": "quantd.internal", "allow_plaintext_token": false}
// Every key is optional; relative paths are relative to the file's directory;
// an unknown key is an error (a typo must not silently drop a credential).
#ifndef QUANTD_CLIENT_QUANTCTL_CONNECTION_SETTINGS_H_
#define QUANTD_CLIENT_QUANTCTL_CONNECTION_SETTINGS_H_

#include <string>

#include "worker/common/status.h"
#include "client/quantctl/quantctl_args.h"

namespace quantd::quantctl {

inline constexpr char kDefaultServer[] = "127.0.0.1:50051";

struct ConnectionSettings {
  std::string address = kDefaultServer;
  // Sent as "authorization: Bearer <token>" when not empty.
  std::string token;
  // TLS is on when `tls` is set or any TLS file is given.
  bool tls = false;
  std::string tls_ca;    // PEM roots verifying the server (default: system roots)
  std::string tls_cert;  // PEM client certificate (mTLS), with tls_key
  std::string tls_key;
  // Name the server certificate must carry, when it differs from the address.
  std::string tls_server_name;
  // Send the token over plaintext to an address that is not loopback (a
  // trusted network). Without it such settings are refused: anyone on the
  // path could read the token.
  bool allow_plaintext_token = false;

  bool UsesTls() const { return tls || !tls_ca.empty() || !tls_cert.empty(); }
};

// The process environment quantctl reads, injectable for tests.
struct ClientEnvironment {
  std::string home;             // $HOME
  std::string xdg_config_home;  // $XDG_CONFIG_HOME
  std::string server;           // $QUANTD_SERVER
  std::string token;            // $QUANTD_TOKEN
  std::string config;           // $QUANTCTL_CONFIG

  static ClientEnvironment FromProcess();
};

// Applies a config file's JSON text on top of `settings`; relative paths are
// resolved against `base_dir`. Errors name the file and the bad key.
quantd::Status ApplyConfigFile(const std::string& json_text, const std::string& file_name,
                             const std::string& base_dir, ConnectionSettings& settings);

// The default config file: $XDG_CONFIG_HOME/quantd/quantctl.json, else
// $HOME/.config/quantd/quantctl.json ("" without either variable).
std::string DefaultConfigPath(const ClientEnvironment& env);

// Merges defaults, the config file (--quantctl-config, else $QUANTCTL_CONFIG,
// else the default path when it exists), the environment and the flags
// (--server, --token, --tls, --tls-ca, --tls-cert, --tls-key,
// --tls-server-name, --allow-plaintext-token). A named config file that
// cannot be read is an error; so are --tls-cert without --tls-key and the
// reverse, and a token over plaintext to an address that is not loopback
// without allow_plaintext_token.

quantd::StatusOr<ConnectionSettings> ResolveConnectionSettings(const ParsedArgs& args,
                                                             const ClientEnvironment& env);

// Whether a gRPC target is this machine: a Unix socket, "localhost", or a
// loopback IP literal. Other names may resolve anywhere, so they are not.
bool IsLoopbackAddress(const std::string& address);

}  // namespace quantd::quantctl

#endif  // QUANTD_CLIENT_QUANTCTL_CONNECTION_SETTINGS_H_
