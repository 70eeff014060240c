#include "worker/io/uri/uri.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/common/sha256.h"

namespace quantd::io {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A minimal HTTP/1.0 server on 127.0.0.1 serving fixed routes, one
// connection at a time, for the download tests.
class LoopbackHttpServer {
 public:
  struct Response {
    int code = 200;
    std::string body;
    std::string location;  // for redirects
    int delay_ms = 0;      // before the body
  };
  explicit LoopbackHttpServer(std::map<std::string, Response> routes) : routes_(std::move(routes)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 16);
    thread_ = std::thread([this] { Serve(); });
  }
  ~LoopbackHttpServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  int requests() const { return requests_; }

 private:
  void Serve() {
    while (!stop_) {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        req.append(buf, n);
      }
      ++requests_;
      const size_t sp1 = req.find(' '), sp2 = req.find(' ', sp1 + 1);
      std::string path = req.substr(sp1 + 1, sp2 - sp1 - 1);
      path = path.substr(0, path.find('?'));
      auto it = routes_.find(path);
      Response r = it == routes_.end() ? Response{404, "no such route"} : it->second;
      std::string head = "HTTP/1.0 " + std::to_string(r.code) +
                         " X\r\nContent-Length: " + std::to_string(r.body.size()) + "\r\n";
      if (!r.location.empty()) head += "Location: " + r.location + "\r\n";
      head += "\r\n";
      Send(c, head);
      if (r.delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(r.delay_ms));
      Send(c, r.body);
      close(c);
    }
  }
  static void Send(int c, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = send(c, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += n;
    }
  }
  std::map<std::string, Response> routes_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

class UriTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = getenv("TEST_TMPDIR");
    dir_ = fs::path(tmp ? tmp : "/tmp") /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "root" / "model");
    fs::create_directories(dir_ / "outside");
    Write(dir_ / "root" / "model" / "config.json", "{}");
    Write(dir_ / "outside" / "secret.txt", "secret");
    fs::create_symlink(dir_ / "outside" / "secret.txt", dir_ / "root" / "escape.txt");
    options_.allowed_roots = {(dir_ / "root").string()};
    options_.download_cache_dir = (dir_ / "downloads").string();
    fs::create_directories(options_.download_cache_dir);
  }
  static void Write(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }
  StatusOr<ResolvedUri> Resolve(const std::string& uri, const std::string& sha = "") {
    return ResolveUri({uri, sha}, options_);
  }
  fs::path dir_;
  UriOptions options_;
};

TEST_F(UriTest, ParsesTheThreeForms) {
  auto f = ParseUri("FILE:///data/my%20model");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->scheme, "file");
  EXPECT_EQ(f->path, "/data/my model");
  EXPECT_EQ(ParseUri("file://localhost/x")->path, "/x");
  auto hf = ParseUri("hf://meta-llama/Llama-3.1-8B@v1.0");
  ASSERT_TRUE(hf.ok());
  EXPECT_EQ(hf->host, "meta-llama");
  EXPECT_EQ(hf->path, "Llama-3.1-8B");
  EXPECT_EQ(hf->revision, "v1.0");
  EXPECT_EQ(ParseUri("hf://gpt2")->revision, "main");
  auto http = ParseUri("https://example.org:8443/a/b.gguf?x=1");
  ASSERT_TRUE(http.ok());
  EXPECT_EQ(http->host, "example.org:8443");
  EXPECT_EQ(http->path, "/a/b.gguf");
  EXPECT_EQ(http->query, "?x=1");

  EXPECT_EQ(ParseUri("/plain/path").status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(ParseUri("gs://bucket/x").status().message(), HasSubstr("'gs'"));
  EXPECT_EQ(ParseUri("file://otherhost/x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseUri("file://relative").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseUri("file:///a/../etc/passwd").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ParseUri("file:///a/%2e%2e/etc").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ParseUri("file:///a/%zz").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseUri("hf://org/..").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ParseUri("hf://org/a/b").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseUri("http://user:pw@host/x").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(UriTest, FileUrisStayInsideTheRoots) {
  auto ok = Resolve("file://" + (dir_ / "root" / "model").string());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->local_path, fs::canonical(dir_ / "root" / "model").string());

  auto escape = Resolve("file://" + (dir_ / "root" / "escape.txt").string());
  EXPECT_EQ(escape.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(escape.status().message(), HasSubstr("outside the allowed roots"));
  EXPECT_EQ(Resolve("file://" + (dir_ / "outside" / "secret.txt").string()).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(Resolve("file://" + (dir_ / "root" / "nope").string()).status().code(),
            StatusCode::kNotFound);
  // A root that is a prefix of another directory's name does not admit it.
  fs::create_directories(dir_ / "rootless");
  EXPECT_EQ(Resolve("file://" + (dir_ / "rootless").string()).status().code(),
            StatusCode::kPermissionDenied);

  const std::string cfg = "file://" + (dir_ / "root" / "model" / "config.json").string();
  EXPECT_TRUE(Resolve(cfg, Sha256Hex("{}")).ok());
  EXPECT_EQ(Resolve(cfg, Sha256Hex("[]")).status().code(), StatusCode::kDataLoss);

  options_.allowed_schemes = {"hf"};
  EXPECT_EQ(Resolve(cfg).status().code(), StatusCode::kPermissionDenied);
}

TEST_F(UriTest, HfUrisResolveAgainstTheLocalCache) {
  const fs::path cache = dir_ / "hub";
  const fs::path repo = cache / "models--acme--tiny";
  const std::string commit = "0123456789abcdef0123456789abcdef01234567";
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots" / commit);
  fs::create_directories(repo / "snapshots" / "fedcba");
  Write(repo / "refs" / "main", commit + "\n");
  Write(repo / "refs" / "v2", "fedcba");
  Write(repo / "blobs" / "abc", "{\"model_type\": \"llama\"}");
  fs::create_symlink("../../blobs/abc", repo / "snapshots" / commit / "config.json");
  options_.hf_cache_dir = cache.string();

  auto main = Resolve("hf://acme/tiny");
  ASSERT_TRUE(main.ok()) << main.status();
  EXPECT_EQ(main->local_path, fs::canonical(repo / "snapshots" / commit).string());
  // Files inside the snapshot are symlinks into blobs/, which stay in the cache.
  EXPECT_TRUE(CheckPathAllowed(main->local_path + "/config.json", options_.allowed_roots,
                               fs::canonical(cache).string())
                  .ok());
  EXPECT_EQ(Resolve("hf://acme/tiny@v2")->local_path,
            fs::canonical(repo / "snapshots" / "fedcba").string());
  EXPECT_EQ(Resolve("hf://acme/tiny@" + commit)->local_path, main->local_path);
  EXPECT_EQ(Resolve("hf://acme/tiny@nope").status().code(), StatusCode::kNotFound);
  auto absent = Resolve("hf://acme/huge");
  EXPECT_EQ(absent.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(absent.status().message(), HasSubstr("the worker is offline"));

  // HF_HUB_CACHE is the default cache.
  options_.hf_cache_dir.clear();
  setenv("HF_HUB_CACHE", cache.c_str(), 1);
  EXPECT_TRUE(Resolve("hf://acme/tiny").ok());
  unsetenv("HF_HUB_CACHE");
}

TEST_F(UriTest, HttpDownloadsIntoTheCacheWithChecksAndLimits) {
  const std::string body(100000, 'q');
  LoopbackHttpServer server({
      {"/model.gguf", {200, body}},
      {"/moved", {302, "", "/model.gguf"}},
      {"/forbidden", {403, "no"}},
      {"/big", {200, std::string(300000, 'b')}},
      {"/slow", {200, "late", "", 1500}},
  });
  auto first = Resolve(server.Url("/model.gguf"), Sha256Hex(body));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->downloaded);
  EXPECT_EQ(first->sha256, Sha256Hex(body));
  EXPECT_EQ(fs::file_size(first->local_path), body.size());
  EXPECT_THAT(first->local_path, HasSubstr("model.gguf"));
  EXPECT_EQ(server.requests(), 1);

  // Served from the cache the second time.
  auto second = Resolve(server.Url("/model.gguf"));
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->downloaded);
  EXPECT_EQ(second->local_path, first->local_path);
  EXPECT_EQ(server.requests(), 1);

  auto redirected = Resolve(server.Url("/moved"));
  ASSERT_TRUE(redirected.ok()) << redirected.status();
  EXPECT_EQ(redirected->sha256, Sha256Hex(body));

  auto mismatch = Resolve(server.Url("/model.gguf?v=2"), Sha256Hex("other"));
  EXPECT_EQ(mismatch.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(Resolve(server.Url("/missing")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Resolve(server.Url("/forbidden")).status().code(), StatusCode::kPermissionDenied);

  options_.max_download_bytes = 200000;
  auto big = Resolve(server.Url("/big"));
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("/big"));

  options_.download_limits.timeout_ms = 300;
  EXPECT_EQ(Resolve(server.Url("/slow")).status().code(), StatusCode::kDeadlineExceeded);

  // No partial files are left behind by the failures.
  for (const auto& e : fs::recursive_directory_iterator(options_.download_cache_dir)) {
    if (e.is_regular_file()) {
      EXPECT_THAT(e.path().filename().string(), ::testing::AnyOf("model.gguf", "moved"));
    }
  }

  // Nothing listens on a closed port.
  options_.download_limits.connect_timeout_ms = 2000;
  EXPECT_EQ(Resolve("http://127.0.0.1:1/x").status().code(), StatusCode::kUnavailable);
  options_.allowed_schemes = {"file"};
  EXPECT_EQ(Resolve(server.Url("/model.gguf")).status().code(), StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace quantd::io
