#include "server/uri_policy/uri_policy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "gtest/gtest.h"
#include "server/common/errors.h"
#include "server/store/testing/test_database.h"
#include "worker/common/status.h"
#include "worker/export/artifact.h"
#include "worker/io/uri/uri_roots.h"

namespace quantd::server {
namespace {

class UriPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char buf[PATH_MAX];
    const std::string made = testing::MakeTempDir("uri-policy");
    base_ = realpath(made.c_str(), buf) != nullptr ? buf : made;
    models_ = base_ + "/models";
    out_ = base_ + "/out";
    outside_ = base_ + "/outside";
    data_ = base_ + "/data";
    for (const std::string& d : {models_, out_, outside_, models_ + "/llama", base_ + "/tenants",
                                 base_ + "/tenants/acme", data_, data_ + "/artifacts"}) {
      ASSERT_EQ(mkdir(d.c_str(), 0755), 0) << d;
    }
    // Symlinks inside the roots that point out of them.
    ASSERT_EQ(symlink(outside_.c_str(), (models_ + "/escape").c_str()), 0);
    ASSERT_EQ(symlink(outside_.c_str(), (out_ + "/link").c_str()), 0);
    roots_ = {"file://" + models_, out_, "file://" + base_ + "/tenants/{tenant}",
              "https://huggingface.co/acme/"};
    auto policy = UriPolicy::Create(roots_, data_);
    ASSERT_TRUE(policy.ok()) << policy.status();
    policy_ = std::make_unique<UriPolicy>(*policy);
  }

  void ExpectDenied(const std::string& uri, const std::string& why) {
    quantd::Status s = policy_->CheckInput("spec.model_uri", uri, "");
    EXPECT_EQ(s.code(), quantd::StatusCode::kPermissionDenied) << uri;
    EXPECT_EQ(s.reason(), "URI_NOT_ALLOWED") << uri;
    EXPECT_NE(std::string(s.message()).find(why), std::string::npos) << s.message();
    EXPECT_EQ(std::string(s.message()).rfind("spec.model_uri: ", 0), 0u) << s.message();
    ASSERT_EQ(s.violations().size(), 1u);
    EXPECT_EQ(s.violations()[0].field, "spec.model_uri");
  }

  void ExpectInvalid(const std::string& uri, const std::string& why) {
    quantd::Status s = policy_->CheckInput("spec.model_uri", uri, "");
    EXPECT_EQ(s.code(), quantd::StatusCode::kInvalidArgument) << uri;
    EXPECT_EQ(s.reason(), "INVALID_URI") << uri;
    EXPECT_NE(std::string(s.message()).find(why), std::string::npos) << s.message();
    ASSERT_EQ(s.violations().size(), 1u);
  }

  std::string base_, models_, out_, outside_, data_;
  std::vector<std::string> roots_;
  std::unique_ptr<UriPolicy> policy_;
};

TEST_F(UriPolicyTest, AllowsInputsUnderTheRoots) {
  for (const std::string& uri : std::vector<std::string>{
           "file://" + models_, "file://" + models_ + "/llama",
           "file://" + models_ + "/llama/x.json", "file://localhost" + models_ + "/llama",
           "file://" + out_ + "/previous-output",
           "https://huggingface.co/acme/model/resolve/main/x", "HTTPS://HuggingFace.co/acme/m"}) {
    EXPECT_TRUE(policy_->CheckInput("f", uri, "").ok()) << uri;
  }
}

TEST_F(UriPolicyTest, RefusesEscapes) {
  ExpectDenied("file:///etc/passwd", "is outside the allowed roots");
  ExpectDenied("file://" + models_ + "/../outside", "'..'");
  ExpectDenied("file://" + models_ + "/%2e%2e/outside", "'..'");
  ExpectDenied("file://" + models_ + "/./llama", "'.'");
  ExpectDenied("file://" + models_ + "/escape/secret", "resolves to " + outside_ + "/secret");
  ExpectDenied("file://" + models_ + "x/llama", "is outside the allowed roots");
  ExpectDenied("http://huggingface.co/acme/m", "is outside");
  ExpectDenied("https://huggingface.co/other/m", "is outside");
  ExpectDenied("https://huggingface.co.evil.com/acme/m", "is outside");
  ExpectDenied("file://" + data_ + "/artifacts/other-job", "is outside");
  ExpectInvalid("file://otherhost" + models_, "names the host");
  ExpectInvalid("https://user:pw@huggingface.co/acme/m", "credentials");
  ExpectInvalid("gs://bucket/acme", "'gs'");
  ExpectInvalid(models_ + "/llama", "no scheme");
  ExpectInvalid("file://" + models_ + "/a%00b", "NUL");
  ExpectInvalid("file://" + models_ + "?/../outside", "query");
  ExpectInvalid("file://" + models_ + "#/../outside", "fragment");
  ExpectInvalid("file://" + models_ + "/x%2F..%2F..%2Foutside", "encodes a '/'");
}

TEST_F(UriPolicyTest, OutputsGoBelowAFileRootOrTheArtifacts) {
  for (const std::string& uri :
       std::vector<std::string>{"file://" + out_ + "/new/model", "file://" + models_ + "/q",
                                "file://" + data_ + "/artifacts/mine"}) {
    EXPECT_TRUE(policy_->CheckOutput("spec.export.output_uri", uri, "").ok()) << uri;
  }
  struct Case {
    std::string uri;
    quantd::StatusCode code;
  };
  const Case refused[] = {
      // Issue 17: the old check cut at '?'/'#' and the worker wrote to /srv/victim.
      {"file://" + out_ + "?/../victim", quantd::StatusCode::kInvalidArgument},
      {"file://" + out_ + "#/../victim", quantd::StatusCode::kInvalidArgument},
      {"file://" + out_ + "/%2e%2e/victim", quantd::StatusCode::kPermissionDenied},
      {"file://" + out_ + "/a%2F..%2F..%2Fvictim", quantd::StatusCode::kInvalidArgument},
      {"file://" + out_ + "/link/model", quantd::StatusCode::kPermissionDenied},
      {"file://" + out_, quantd::StatusCode::kPermissionDenied},
      {"file://" + outside_ + "/x", quantd::StatusCode::kPermissionDenied},
      {"https://huggingface.co/acme/out", quantd::StatusCode::kPermissionDenied},
  };
  for (const Case& c : refused) {
    quantd::Status s = policy_->CheckOutput("spec.export.output_uri", c.uri, "");
    EXPECT_EQ(s.code(), c.code) << c.uri << ": " << s;
    ASSERT_EQ(s.violations().size(), 1u) << c.uri;
    EXPECT_EQ(s.violations()[0].field, "spec.export.output_uri");
  }
}

TEST_F(UriPolicyTest, PerTenantRoots) {
  const std::string acme = "file://" + base_ + "/tenants/acme/model";
  EXPECT_TRUE(policy_->CheckInput("spec.model_uri", acme, "acme").ok());
  EXPECT_EQ(policy_->CheckInput("spec.model_uri", acme, "globex").code(),
            quantd::StatusCode::kPermissionDenied);
  EXPECT_EQ(policy_->CheckInput("spec.model_uri", acme, "").code(),
            quantd::StatusCode::kPermissionDenied);
  EXPECT_TRUE(policy_->CheckOutput("o", "file://" + base_ + "/tenants/acme/out", "acme").ok());
  EXPECT_EQ(policy_->CheckOutput("o", "file://" + base_ + "/tenants/acme/out", "globex").code(),
            quantd::StatusCode::kPermissionDenied);
}

TEST_F(UriPolicyTest, WithoutRootsNoInputIsAllowed) {
  auto none = UriPolicy::Create({}, data_);
  ASSERT_TRUE(none.ok());
  quantd::Status s = none->CheckInput("spec.model_uri", "file://" + models_, "");
  EXPECT_EQ(s.code(), quantd::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.reason(), "URI_NOT_ALLOWED");
  EXPECT_NE(std::string(s.message()).find("--allowed-uri-roots"), std::string::npos) << s;
  EXPECT_TRUE(none->CheckOutput("o", "file://" + data_ + "/artifacts/x", "").ok());
  EXPECT_EQ(none->CheckOutput("o", "file://" + out_ + "/x", "").code(),
            quantd::StatusCode::kPermissionDenied);
}

TEST_F(UriPolicyTest, ChecksEveryUriOfASpecAtOnce) {
  v1::JobSpec spec;
  spec.set_model_uri("file://" + models_ + "/llama");
  spec.mutable_evaluation()->set_dataset_uri("file://" + models_ + "/wiki.txt");
  EXPECT_TRUE(policy_->CheckSpec(spec, "").ok());
  spec.mutable_export_()->set_output_uri("file:///etc/quantd");
  spec.mutable_calibration()->set_dataset_uri("file:///root/.ssh/id_rsa");
  quantd::Status s = policy_->CheckSpec(spec, "");
  EXPECT_EQ(s.code(), quantd::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.reason(), "URI_NOT_ALLOWED");
  ASSERT_EQ(s.violations().size(), 2u);
  EXPECT_EQ(s.violations()[0].field, "spec.calibration.dataset_uri");
  EXPECT_EQ(s.violations()[1].field, "spec.export.output_uri");

  spec.mutable_calibration()->clear_dataset_uri();
  spec.mutable_export_()->set_output_uri("file://" + out_ + "?x");
  spec.set_model_uri("file://" + models_ + "#y");
  s = policy_->CheckSpec(spec, "");
  EXPECT_EQ(s.code(), quantd::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.reason(), "INVALID_URI");
  ASSERT_EQ(s.violations().size(), 2u);
}

TEST_F(UriPolicyTest, RootsMustBeUsable) {
  EXPECT_EQ(UriPolicy::Create({"file:///no/such/root"}, data_).status().code(),
            quantd::StatusCode::kInvalidArgument);
  EXPECT_EQ(UriPolicy::Create({"plain/path"}, data_).status().code(),
            quantd::StatusCode::kInvalidArgument);
  EXPECT_EQ(UriPolicy::Create({"https:///nohost"}, data_).status().reason(), "INVALID_URI_ROOT");
}

// The frontend and the worker decide with the same functions: for every URI
// the frontend's answer equals what the worker's roots (and, for outputs, its
// confined walk in StagedDirectory) answer.
TEST_F(UriPolicyTest, FrontendAndWorkerAgree) {
  auto worker_roots = io::UriRoots::Create(roots_, data_ + "/artifacts", "--allowed-roots");
  ASSERT_TRUE(worker_roots.ok()) << worker_roots.status();
  const std::vector<std::string> uris = {
      "file://" + models_ + "/llama",
      "file://" + models_ + "/escape/secret",
      "file://" + models_ + "/%6Clama",
      "file://" + models_ + "/%2e%2e/outside",
      "file://" + models_ + "?/../outside",
      "file://" + models_ + "#/../outside",
      "file://" + models_ + "/a%2Fb",
      "file://" + models_ + "/a%00b",
      "file://" + models_ + "/%252e%252e",
      "file://evil" + models_,
      "file://" + out_ + "/new",
      "file://" + out_ + "/link/new",
      "file://" + out_,
      "file://" + outside_ + "/new",
      "file://" + data_ + "/artifacts/job",
      "file://" + base_ + "/tenants/acme/m",
      "https://huggingface.co/acme/m",
      "https://huggingface.co/acme/%2e%2e/x",
  };
  for (const std::string tenant : {"", "acme", "globex", "../acme"}) {
    for (const std::string& uri : uris) {
      const quantd::Status front_in = policy_->CheckInput("f", uri, tenant);
      const Status worker_in = worker_roots->CheckInput(uri, tenant);
      EXPECT_EQ(static_cast<int>(front_in.code()), static_cast<int>(worker_in.code()))
          << "input " << uri << " tenant " << tenant;

      const quantd::Status front_out = policy_->CheckOutput("f", uri, tenant);
      Status worker_out;
      auto where = worker_roots->CheckOutput(uri, tenant);
      struct stat st;
      if (where.ok() && lstat(where->path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        // Whether an existing directory may be replaced (its owner marker)
        // is the worker's to judge when it writes; a CreateJob retried
        // after its job ran must not be refused for the job's own output.
        EXPECT_TRUE(front_out.ok()) << uri << ": " << front_out;
        continue;
      }
      if (!where.ok()) {
        worker_out = where.status();
      } else {
        exporter::OutputOwner owner{where->base, "jobs/agree", tenant};
        auto staged = exporter::StagedDirectory::Create(where->path, false, owner);
        worker_out = staged.status();
      }
      EXPECT_EQ(static_cast<int>(front_out.code()), static_cast<int>(worker_out.code()))
          << "output " << uri << " tenant " << tenant << ": " << front_out << " / " << worker_out;
    }
  }
}

}  // namespace
}  // namespace quantd::server
