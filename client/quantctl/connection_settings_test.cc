#include "client/quantctl/connection_settings.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace quantd::quantctl {
namespace {

namespace fs = std::filesystem;

ParsedArgs Args(const std::vector<std::string>& argv) {
  auto parsed = ParseQuantctlArgs(argv);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : ParsedArgs{};
}

// A fresh directory under TEST_TMPDIR.
std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  fs::path dir = fs::path(base ? base : "/tmp") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void WriteFile(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(ConnectionSettingsTest, DefaultsWithoutFlagsEnvironmentOrFile) {
  auto s = ResolveConnectionSettings(Args({"list"}), ClientEnvironment{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->address, "127.0.0.1:50051");
  EXPECT_EQ(s->token, "");
  EXPECT_FALSE(s->UsesTls());
}

TEST(ConnectionSettingsTest, ConfigFileAtTheDefaultPathWithRelativeTlsPaths) {
  const std::string home = TempDir("cs_home");
  WriteFile(home + "/.config/quantd/quantctl.json",
            R"({"address": "quantd.example:443", "token": "file-token",
                "tls_ca": "certs/ca.pem", "tls_cert": "/abs/me.pem", "tls_key": "me.key",
                "tls_server_name": "quantd.internal"})");
  ClientEnvironment env;
  env.home = home;
  auto s = ResolveConnectionSettings(Args({"list"}), env);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->address, "quantd.example:443");
  EXPECT_EQ(s->token, "file-token");
  EXPECT_EQ(s->tls_ca, home + "/.config/quantd/certs/ca.pem");
  EXPECT_EQ(s->tls_cert, "/abs/me.pem");
  EXPECT_EQ(s->tls_key, home + "/.config/quantd/me.key");
  EXPECT_EQ(s->tls_server_name, "quantd.internal");
  EXPECT_TRUE(s->UsesTls());

  // XDG_CONFIG_HOME takes the place of ~/.config.
  env.xdg_config_home = home + "/xdg";
  WriteFile(home + "/xdg/quantd/quantctl.json", R"({"address": "xdg:1", "tls": true})");
  s = ResolveConnectionSettings(Args({"list"}), env);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->address, "xdg:1");
  EXPECT_TRUE(s->tls);
  EXPECT_EQ(s->token, "");
}

TEST(ConnectionSettingsTest, FlagsOverrideTheEnvironmentWhichOverridesTheFile) {
  const std::string dir = TempDir("cs_precedence");
  WriteFile(dir + "/c.json",
            R"({"address": "file:1", "token": "file-token", "allow_plaintext_token": true})");
  ClientEnvironment env;
  env.config = dir + "/c.json";  // $QUANTCTL_CONFIG
  auto file_only = ResolveConnectionSettings(Args({"list"}), env);
  ASSERT_TRUE(file_only.ok()) << file_only.status();
  EXPECT_EQ(file_only->address, "file:1");
  EXPECT_EQ(file_only->token, "file-token");

  env.server = "env:2";
  env.token = "env-token";
  auto with_env = ResolveConnectionSettings(Args({"list"}), env);
  ASSERT_TRUE(with_env.ok());
  EXPECT_EQ(with_env->address, "env:2");
  EXPECT_EQ(with_env->token, "env-token");

  auto with_flags = ResolveConnectionSettings(
      Args({"--server", "flag:3", "list", "--token=flag-token", "--tls-ca", "ca.pem"}), env);
  ASSERT_TRUE(with_flags.ok());
  EXPECT_EQ(with_flags->address, "flag:3");
  EXPECT_EQ(with_flags->token, "flag-token");
  EXPECT_EQ(with_flags->tls_ca, "ca.pem");  // flags are taken as given
  EXPECT_TRUE(with_flags->UsesTls());

  // --quantctl-config beats $QUANTCTL_CONFIG.
  WriteFile(dir + "/other.json", R"({"address": "other:4", "allow_plaintext_token": true})");
  env.server.clear();
  auto other =
      ResolveConnectionSettings(Args({"--quantctl-config", dir + "/other.json", "get"}), env);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->address, "other:4");
  EXPECT_EQ(other->token, "env-token");
}

TEST(ConnectionSettingsTest, SubmitConfigFlagIsNotTheClientConfig) {
  // `submit --config FILE` is the quantization config, not quantctl's.
  auto s = ResolveConnectionSettings(Args({"submit", "--config", "/nonexistent/q.json"}),
                                     ClientEnvironment{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->address, "127.0.0.1:50051");
}

TEST(ConnectionSettingsTest, BadConfigFilesAreErrorsNamingTheProblem) {
  const std::string dir = TempDir("cs_bad");
  ClientEnvironment env;
  auto missing =
      ResolveConnectionSettings(Args({"--quantctl-config", dir + "/none.json", "list"}), env);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "cannot read config file " + dir + "/none.json");

  ConnectionSettings settings;
  quantd::Status typo = ApplyConfigFile(R"({"tokne": "x"})", "q.json", "/d", settings);
  EXPECT_EQ(typo.message(),
            "q.json: unknown key \"tokne\" (known: address, token, tls, tls_ca, tls_cert, tls_key, "
            "tls_server_name, allow_plaintext_token)");
  EXPECT_EQ(ApplyConfigFile("[1]", "q.json", "/d", settings).message(),
            "q.json: not a JSON object (see docs/sdk.md for the keys)");
  EXPECT_EQ(ApplyConfigFile("{", "q.json", "/d", settings).message(),
            "q.json: not a JSON object (see docs/sdk.md for the keys)");
  EXPECT_EQ(ApplyConfigFile(R"({"token": 5})", "q.json", "/d", settings).message(),
            "q.json: \"token\" must be a string");
  EXPECT_EQ(ApplyConfigFile(R"({"tls": "yes"})", "q.json", "/d", settings).message(),
            "q.json: \"tls\" must be true or false");

  auto half_mtls = ResolveConnectionSettings(Args({"--tls-cert", "me.pem", "list"}), env);
  ASSERT_FALSE(half_mtls.ok());
  EXPECT_EQ(half_mtls.status().message(),
            "a client certificate needs both --tls-cert and --tls-key (or tls_cert and tls_key)");
}

TEST(ConnectionSettingsTest, ATokenGoesOverPlaintextOnlyToLoopbackUnlessAllowed) {
  for (const char* address : {"127.0.0.1:50051", "localhost:1", "[::1]:50051", "unix:/run/q.sock",
                              "dns:///localhost:1", "127.8.9.10:5"}) {
    EXPECT_TRUE(IsLoopbackAddress(address)) << address;
    EXPECT_TRUE(
        ResolveConnectionSettings(Args({"--server", address, "--token", "t", "list"}), {}).ok())
        << address;
  }
  for (const char* address : {"192.0.2.1:50051", "quantd.internal:443", "[2001:db8::1]:1"}) {
    EXPECT_FALSE(IsLoopbackAddress(address)) << address;
    auto refused =
        ResolveConnectionSettings(Args({"--server", address, "--token", "t", "list"}), {});
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << address;
    EXPECT_EQ(refused.status().message(),
              std::string("refusing to send a bearer token over plaintext to ") + address +
                  ": use --tls or --tls-ca, or --allow-plaintext-token on a trusted network");
    for (const std::vector<std::string>& ok :
         {std::vector<std::string>{"--server", address, "--token", "t", "--tls", "list"},
          {"--server", address, "--token", "t", "--allow-plaintext-token", "list"},
          {"--server", address, "list"}}) {
      EXPECT_TRUE(ResolveConnectionSettings(Args(ok), {}).ok()) << address;
    }
  }
  const std::string dir = TempDir("cs_plaintext");
  WriteFile(dir + "/c.json", R"({"allow_plaintext_token": "yes"})");
  ClientEnvironment env;
  env.config = dir + "/c.json";
  EXPECT_EQ(ResolveConnectionSettings(Args({"list"}), env).status().message(),
            dir + "/c.json: \"allow_plaintext_token\" must be true or false");
}

TEST(ConnectionSettingsTest, NoDefaultPathWithoutHome) {
  EXPECT_EQ(DefaultConfigPath(ClientEnvironment{}), "");
  ClientEnvironment env;
  env.home = "/home/u";
  EXPECT_EQ(DefaultConfigPath(env), "/home/u/.config/quantd/quantctl.json");
}

}  // namespace
}  // namespace quantd::quantctl
