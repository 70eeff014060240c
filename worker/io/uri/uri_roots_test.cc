#include "worker/io/uri/uri_roots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quantd::io {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class UriRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    base_ = fs::canonical(tmp ? tmp : "/tmp").string() + "/" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(base_);
    for (const char* d : {"models/llama", "out", "outside", "tenants/acme", "tenants/globex/m",
                          "data/artifacts"}) {
      fs::create_directories(base_ + "/" + d);
    }
    std::ofstream(base_ + "/out/file") << "x";
    fs::create_symlink(base_ + "/outside", base_ + "/models/escape");
    fs::create_symlink(base_ + "/outside", base_ + "/out/link");
  }

  UriRoots Make(const std::vector<std::string>& roots) {
    auto r = UriRoots::Create(roots, base_ + "/data/artifacts", "--allowed-uri-roots");
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : *UriRoots::Create({}, "", "");
  }

  std::string File(const std::string& rel) { return "file://" + base_ + "/" + rel; }

  std::string base_;
};

TEST_F(UriRootsTest, WithoutRootsNoInputAndOnlyArtifactsOutputs) {
  UriRoots roots = Make({});
  Status in = roots.CheckInput(File("models/llama"), "");
  EXPECT_EQ(in.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(in.reason(), "URI_NOT_ALLOWED");
  EXPECT_THAT(in.message(), HasSubstr("--allowed-uri-roots=file://"));

  auto out = roots.CheckOutput(File("data/artifacts/job-1"), "");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->base, base_ + "/data/artifacts");
  EXPECT_EQ(out->relative, "job-1");
  EXPECT_EQ(out->path, base_ + "/data/artifacts/job-1");
  EXPECT_TRUE(roots.CheckOutput(File("data/artifacts/a/b"), "").ok());

  auto elsewhere = roots.CheckOutput(File("out/m"), "");
  EXPECT_EQ(elsewhere.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(elsewhere.status().message(), HasSubstr(base_ + "/data/artifacts/"));
  EXPECT_EQ(roots.CheckOutput(File("data/artifacts"), "").status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(roots.CheckOutput(File("data"), "").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(roots.CheckOutput("https://host/x", "").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(roots.OutputRoots(), std::vector<std::string>{base_ + "/data/artifacts/"});
  EXPECT_TRUE(roots.InputRoots().empty());
}

TEST_F(UriRootsTest, InputsStayUnderTheRootsAfterResolvingLinks) {
  UriRoots roots = Make({"file://" + base_ + "/models", base_ + "/out"});
  EXPECT_TRUE(roots.CheckInput(File("models/llama"), "").ok());
  EXPECT_TRUE(roots.CheckInput(File("models/not-yet"), "").ok());
  EXPECT_TRUE(roots.CheckInput("file://localhost" + base_ + "/out/file", "").ok());
  Status escape = roots.CheckInput(File("models/escape/secret"), "");
  EXPECT_EQ(escape.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(escape.message(), HasSubstr("resolves to " + base_ + "/outside/secret"));
  EXPECT_EQ(roots.CheckInput(File("outside"), "").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(roots.CheckInput(File("modelsx"), "").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(roots.CheckInput(File("models/../outside"), "").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(roots.CheckInput(File("models?/../outside"), "").code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(roots.CheckInput("https://huggingface.co/acme/m", "").code(),
            StatusCode::kPermissionDenied);
}

TEST_F(UriRootsTest, OutputsGoStrictlyBelowAFileRootWithoutLinks) {
  UriRoots roots = Make({"file://" + base_ + "/out"});
  auto ok = roots.CheckOutput(File("out/new/model"), "");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->base, base_ + "/out");
  EXPECT_EQ(ok->relative, "new/model");
  EXPECT_TRUE(CheckOutputWalk(*ok).ok());

  // The attacks of issue 17: cut at '?' or '#' before checking.
  EXPECT_EQ(roots.CheckOutput(File("out?/../victim"), "").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(roots.CheckOutput(File("out#/../victim"), "").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(roots.CheckOutput(File("out/%2e%2e/victim"), "").status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(roots.CheckOutput(File("out"), "").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(roots.CheckOutput(File("outside/x"), "").status().code(),
            StatusCode::kPermissionDenied);

  // A symlinked parent: accepted by the lexical match, refused by the walk.
  auto linked = roots.CheckOutput(File("out/link/model"), "");
  ASSERT_TRUE(linked.ok());
  Status walk = CheckOutputWalk(*linked);
  EXPECT_EQ(walk.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(walk.message(), HasSubstr(base_ + "/out/link is a symbolic link"));
  Status last_link = CheckOutputWalk(*roots.CheckOutput(File("out/link"), ""));
  EXPECT_EQ(last_link.code(), StatusCode::kPermissionDenied);
  Status file = CheckOutputWalk(*roots.CheckOutput(File("out/file"), ""));
  EXPECT_EQ(file.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(file.reason(), "OUTPUT_EXISTS");
  EXPECT_EQ(CheckOutputWalk(*roots.CheckOutput(File("out/file/x"), "")).code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(UriRootsTest, PerTenantRoots) {
  UriRoots roots = Make({"file://" + base_ + "/tenants/{tenant}/"});
  EXPECT_EQ(roots.TenantRoots(), std::vector<std::string>{"file://" + base_ + "/tenants/{tenant}/"});
  EXPECT_TRUE(roots.CheckInput(File("tenants/acme/m"), "acme").ok());
  EXPECT_EQ(roots.CheckInput(File("tenants/globex/m"), "acme").code(),
            StatusCode::kPermissionDenied);
  EXPECT_TRUE(roots.CheckInput(File("tenants/globex/m"), "globex").ok());
  EXPECT_EQ(roots.InputDirectories("acme"), std::vector<std::string>{base_ + "/tenants/acme"});

  // No tenant (authentication off): the root matches nothing, and says so.
  Status anonymous = roots.CheckInput(File("tenants/acme/m"), "");
  EXPECT_EQ(anonymous.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(anonymous.message(), HasSubstr("authenticated tenants"));
  for (const std::string bad : {"..", ".", "a/b", "../acme", ".hidden", "a b"}) {
    Status s = roots.CheckInput(File("tenants/acme/m"), bad);
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << bad;
    EXPECT_THAT(s.message(), HasSubstr("not a plain path segment")) << bad;
  }

  auto out = roots.CheckOutput(File("tenants/acme/q/model"), "acme");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->base, base_ + "/tenants");
  EXPECT_EQ(out->relative, "acme/q/model");
  // A new tenant's directory need not exist yet.
  EXPECT_TRUE(roots.CheckOutput(File("tenants/initech/model"), "initech").ok());
  EXPECT_EQ(roots.CheckOutput(File("tenants/globex/model"), "acme").status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(roots.CheckOutput(File("tenants/acme"), "acme").status().code(),
            StatusCode::kPermissionDenied);
  // The default output location stays open to every tenant.
  EXPECT_TRUE(roots.CheckOutput(File("data/artifacts/j"), "acme").ok());
}

TEST_F(UriRootsTest, RootsMustBeUsable) {
  auto create = [&](const std::string& root) {
    return UriRoots::Create({root}, "", "--allowed-roots").status();
  };
  EXPECT_EQ(create("file:///no/such/root").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(create("file:///no/such/root").reason(), "INVALID_URI_ROOT");
  EXPECT_EQ(create("relative/path").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(create(base_ + "/out/file").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(create("https:///nohost").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(create("https://host/a?b").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(create("file://" + base_ + "/out-{tenant}").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(create("file://" + base_ + "/../out").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(create("file://" + base_ + "/nope/{tenant}").code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(create("file://" + base_ + "/tenants/{tenant}/models").ok());
  EXPECT_TRUE(create("file:///").ok());
  EXPECT_EQ(UriRoots::Create({}, "relative", "f").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(UriRootsTest, RemoteRoots) {
  UriRoots roots = Make({"https://huggingface.co/acme/", "hf://acme/", "hf://gpt2",
                         "https://hub.example/{tenant}/"});
  EXPECT_TRUE(roots.CheckInput("https://huggingface.co/acme/m/resolve/main/x", "").ok());
  EXPECT_TRUE(roots.CheckInput("HTTPS://HuggingFace.co/acme/m?download=1", "").ok());
  EXPECT_EQ(roots.CheckInput("http://huggingface.co/acme/m", "").code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(roots.CheckInput("https://huggingface.co/other/m", "").code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(roots.CheckInput("https://huggingface.co/acmex/m", "").code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(roots.CheckInput("https://huggingface.co.evil.com/acme/m", "").code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(roots.CheckInput("https://huggingface.co/acme/%2e%2e/other", "").code(),
            StatusCode::kPermissionDenied);
  EXPECT_TRUE(roots.CheckInput("hf://acme/tiny@v2", "").ok());
  EXPECT_TRUE(roots.CheckInput("hf://gpt2", "").ok());
  EXPECT_EQ(roots.CheckInput("hf://other/tiny", "").code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(roots.CheckInput("https://hub.example/acme/m", "acme").ok());
  EXPECT_EQ(roots.CheckInput("https://hub.example/acme/m", "globex").code(),
            StatusCode::kPermissionDenied);
  // Only file and s3 roots take outputs.
  EXPECT_EQ(roots.OutputRoots(), std::vector<std::string>{base_ + "/data/artifacts/"});
}

TEST_F(UriRootsTest, HubDatasetRootsAreNotModelRoots) {
  UriRoots roots = Make({"hf://acme/", "hf://datasets/wiki/", "hf://datasets/org/chat"});
  EXPECT_TRUE(roots.CheckInput("hf://datasets/wiki/text?split=test", "").ok());
  EXPECT_TRUE(roots.CheckInput("hf://datasets/org/chat@v1?split=train_sft", "").ok());
  EXPECT_EQ(roots.CheckInput("hf://datasets/org/other", "").code(), StatusCode::kPermissionDenied);
  // A model root admits no dataset of its organisation, a dataset root no model.
  EXPECT_EQ(roots.CheckInput("hf://datasets/acme/tiny", "").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(roots.CheckInput("hf://wiki/text", "").code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(roots.CheckInput("hf://acme/tiny", "").ok());
}

TEST_F(UriRootsTest, S3RootsTakeInputsAndOutputsBelowThem) {
  UriRoots roots = Make({"s3://models/", "s3://out/runs/{tenant}"});
  EXPECT_TRUE(roots.CheckInput("s3://models/llama/8b", "").ok());
  EXPECT_EQ(roots.CheckInput("s3://other/llama", "").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(roots.CheckInput("s3://models/a/%2e%2e/b", "").code(), StatusCode::kPermissionDenied);
  auto out = roots.CheckOutput("s3://out/runs/acme/job1", "acme");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->scheme, "s3");
  EXPECT_EQ(out->bucket, "out");
  EXPECT_EQ(out->path, "/runs/acme/job1");
  EXPECT_EQ(out->relative, "job1");
  EXPECT_TRUE(CheckOutputWalk(*out).ok());
  // Another tenant's prefix, the root itself, another bucket.
  EXPECT_EQ(roots.CheckOutput("s3://out/runs/acme/job1", "globex").status().code(),
            StatusCode::kPermissionDenied);
  auto root = roots.CheckOutput("s3://out/runs/acme", "acme");
  EXPECT_THAT(root.status().message(), HasSubstr("an allowed prefix itself"));
  EXPECT_TRUE(roots.CheckOutput("s3://models/x", "acme").ok());  // roots take both
  auto elsewhere = roots.CheckOutput("s3://third/x", "acme");
  EXPECT_EQ(elsewhere.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(elsewhere.status().message(), HasSubstr("s3://out/runs/{tenant}"));
  EXPECT_EQ(roots.OutputRoots(),
            (std::vector<std::string>{"s3://models/", "s3://out/runs/{tenant}",
                                      base_ + "/data/artifacts/"}));
}

}  // namespace
}  // namespace quantd::io
