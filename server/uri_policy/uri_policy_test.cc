#include "server/uri_policy/uri_policy.h"

#include <sys/stat.h>
#include <unistd.h>

#include "gtest/gtest.h"
#include "server/common/errors.h"
#include "server/store/testing/test_database.h"

namespace quantd::server {
namespace {

class UriPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = testing::MakeTempDir("uri-policy");
    models_ = base_ + "/models";
    outside_ = base_ + "/outside";
    ASSERT_EQ(mkdir(models_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir(outside_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((models_ + "/llama").c_str(), 0755), 0);
    // A symlink inside the root that points out of it.
    ASSERT_EQ(symlink(outside_.c_str(), (models_ + "/escape").c_str()), 0);
    auto policy = UriPolicy::Create({"file://" + models_, "https://huggingface.co/acme/"});
    ASSERT_TRUE(policy.ok()) << policy.status();
    policy_ = *policy;
  }

  void ExpectDenied(const std::string& uri, const std::string& why) {
    absl::Status s = policy_.CheckUri("spec.model_uri", uri);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << uri;
    EXPECT_EQ(GetReason(s), "URI_NOT_ALLOWED") << uri;
    EXPECT_NE(std::string(s.message()).find(why), std::string::npos) << s.message();
    ASSERT_EQ(GetViolations(s).size(), 1u);
    EXPECT_EQ(GetViolations(s)[0].field, "spec.model_uri");
  }

  std::string base_, models_, outside_;
  UriPolicy policy_;
};

TEST_F(UriPolicyTest, AllowsPathsUnderTheRoots) {
  EXPECT_TRUE(policy_.CheckUri("f", "file://" + models_).ok());
  EXPECT_TRUE(policy_.CheckUri("f", "file://" + models_ + "/llama").ok());
  EXPECT_TRUE(policy_.CheckUri("f", "file://" + models_ + "/llama/config.json").ok());
  EXPECT_TRUE(policy_.CheckUri("f", "file://" + models_ + "/new/output/dir").ok());
  EXPECT_TRUE(policy_.CheckUri("f", "file://localhost" + models_ + "/llama").ok());
  EXPECT_TRUE(policy_.CheckUri("f", "https://huggingface.co/acme/model/resolve/main/x").ok());
  EXPECT_TRUE(policy_.CheckUri("f", "HTTPS://HuggingFace.co/acme/m").ok());
}

TEST_F(UriPolicyTest, RefusesEscapes) {
  ExpectDenied("file:///etc/passwd", "is outside the allowed roots");
  ExpectDenied("file://" + models_ + "/../outside", "'..'");
  ExpectDenied("file://" + models_ + "/%2e%2e/outside", "'..'");
  ExpectDenied("file://" + models_ + "/./llama", "'.'");
  ExpectDenied("file://" + models_ + "/escape/secret", "resolves to " + outside_ + "/secret");
  ExpectDenied("file://" + models_ + "x/llama", "is outside the allowed roots");
  ExpectDenied("file://otherhost" + models_, "names a host");
  ExpectDenied("http://huggingface.co/acme/m", "is outside");
  ExpectDenied("https://huggingface.co/other/m", "is outside");
  ExpectDenied("https://user:pw@huggingface.co/acme/m", "credentials");
  ExpectDenied("https://huggingface.co.evil.com/acme/m", "is outside");
  ExpectDenied("s3://bucket/acme", "is outside");
  ExpectDenied(models_ + "/llama", "not an absolute URI");
  ExpectDenied("file://" + models_ + "/a%00b", "NUL");
}

TEST_F(UriPolicyTest, ChecksEveryUriOfASpec) {
  v1::JobSpec spec;
  spec.set_model_uri("file://" + models_ + "/llama");
  spec.mutable_evaluation()->set_dataset_uri("file://" + models_ + "/wiki.txt");
  EXPECT_TRUE(policy_.CheckSpec(spec).ok());
  spec.mutable_export_()->set_output_uri("file:///etc/quantd");
  absl::Status s = policy_.CheckSpec(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(GetViolations(s)[0].field, "spec.export.output_uri");
  spec.mutable_export_()->clear_output_uri();
  spec.mutable_calibration()->set_dataset_uri("file:///root/.ssh/id_rsa");
  EXPECT_EQ(GetViolations(policy_.CheckSpec(spec))[0].field, "spec.calibration.dataset_uri");
}

TEST_F(UriPolicyTest, RootsMustBeUsable) {
  EXPECT_EQ(UriPolicy::Create({"file:///no/such/root"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UriPolicy::Create({"/plain/path"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GetReason(UriPolicy::Create({"https:///nohost"}).status()), "INVALID_URI_ROOT");
}

}  // namespace
}  // namespace quantd::server
