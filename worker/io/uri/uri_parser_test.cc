#include "worker/io/uri/uri_parser.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quantd::io {
namespace {

using ::testing::HasSubstr;

struct Case {
  std::string uri;
  StatusCode code;
  std::string path_or_message;  // the decoded path when OK, else a part of the message
};

TEST(UriParserTest, FileUriTable) {
  const Case cases[] = {
      {"file:///srv/out/model", StatusCode::kOk, "/srv/out/model"},
      {"FILE://LOCALHOST/srv/out", StatusCode::kOk, "/srv/out"},
      {"file:///srv//out///model/", StatusCode::kOk, "/srv/out/model"},
      {"file:///", StatusCode::kOk, "/"},
      {"file:///data/my%20model", StatusCode::kOk, "/data/my model"},
      {"file:///data/q%3Fx%23y", StatusCode::kOk, "/data/q?x#y"},
      // Decoded once: %25 is '%', so this is the file name "%2e%2e".
      {"file:///srv/out/%252e%252e/x", StatusCode::kOk, "/srv/out/%2e%2e/x"},
      {"file:///srv/out/..x/x..", StatusCode::kOk, "/srv/out/..x/x.."},
      // What would make the checked path differ from the written one.
      {"file:///srv/out?/../victim", StatusCode::kInvalidArgument, "has a query"},
      {"file:///srv/out#/../victim", StatusCode::kInvalidArgument, "has a fragment"},
      {"file:///srv/out/a%2F..%2Fvictim", StatusCode::kInvalidArgument, "encodes a '/'"},
      {"file:///srv/out/a%2f..%2fvictim", StatusCode::kInvalidArgument, "encodes a '/'"},
      {"file:///srv/out/a%00b", StatusCode::kInvalidArgument, "NUL"},
      {std::string("file:///srv/out/a\0b", 19), StatusCode::kInvalidArgument, "NUL"},
      {"file:///srv/out/a%0Ab", StatusCode::kInvalidArgument, "control character"},
      {"file:///srv/out/a%zz", StatusCode::kInvalidArgument, "malformed %-escape"},
      {"file:///srv/out/a%2", StatusCode::kInvalidArgument, "malformed %-escape"},
      {"file://otherhost/srv/out", StatusCode::kInvalidArgument, "names the host 'otherhost'"},
      {"file://localhost:22/srv", StatusCode::kInvalidArgument, "names the host"},
      {"file://relative", StatusCode::kInvalidArgument, "names the host 'relative'"},
      {"file://localhost", StatusCode::kInvalidArgument, "no absolute path"},
      {"/srv/out", StatusCode::kInvalidArgument, "no scheme"},
      {"://srv/out", StatusCode::kInvalidArgument, "no scheme"},
      {"gs://bucket/x", StatusCode::kInvalidArgument, "'gs'"},
      {"s3://Bad_Bucket/x", StatusCode::kInvalidArgument, "names no valid bucket"},
      {"s3://bucket/a/../b", StatusCode::kPermissionDenied, ""},
      {"s3://bucket/x?versionId=1", StatusCode::kInvalidArgument, "query"},
      // Escapes.
      {"file:///srv/out/../victim", StatusCode::kPermissionDenied, "'..'"},
      {"file:///srv/out/%2e%2e/victim", StatusCode::kPermissionDenied, "'..'"},
      {"file:///srv/out/%2E%2E/victim", StatusCode::kPermissionDenied, "'..'"},
      {"file:///srv/out/.%2e", StatusCode::kPermissionDenied, "'..'"},
      {"file:///srv/out/./x", StatusCode::kPermissionDenied, "'.'"},
      {"file:///srv/out/%2e", StatusCode::kPermissionDenied, "'.'"},
      {"file:///srv/out/..", StatusCode::kPermissionDenied, "'..'"},
  };
  for (const Case& c : cases) {
    auto p = ParseUri(c.uri);
    EXPECT_EQ(p.status().code(), c.code) << QuoteUri(c.uri) << ": " << p.status();
    if (c.code == StatusCode::kOk) {
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_EQ(p->scheme, "file");
      EXPECT_EQ(p->path, c.path_or_message) << c.uri;
      EXPECT_TRUE(p->host.empty());
    } else {
      EXPECT_THAT(p.status().message(), HasSubstr(c.path_or_message)) << c.uri;
      EXPECT_EQ(p.status().reason(),
                c.code == StatusCode::kPermissionDenied ? "URI_NOT_ALLOWED" : "INVALID_URI");
    }
  }
}

TEST(UriParserTest, MessagesQuoteTheUriSafely) {
  auto p = ParseUri(std::string("file:///a\nb%00", 14));
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("'file:///a\\x0ab%00'"));
  EXPECT_EQ(QuoteUri(std::string(300, 'a')).size(), 256u + 5u);
}

TEST(UriParserTest, LongPathsAreRefused) {
  EXPECT_TRUE(ParseUri("file:///" + std::string(4000, 'a')).ok());
  EXPECT_EQ(ParseUri("file:///" + std::string(5000, 'a')).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(UriParserTest, HfAndHttpForms) {
  auto hf = ParseUri("hf://meta-llama/Llama-3.1-8B@v1.0");
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_EQ(hf->host, "meta-llama");
  EXPECT_EQ(hf->path, "Llama-3.1-8B");
  EXPECT_EQ(hf->revision, "v1.0");
  EXPECT_EQ(ParseUri("hf://gpt2")->revision, "main");
  EXPECT_EQ(ParseUri("hf://org/..").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ParseUri("hf://../x").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ParseUri("hf://org/a/b").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseUri("hf://org/a?x").status().code(), StatusCode::kInvalidArgument);

  // Refs with slashes, as written or as huggingface_hub encodes them.
  for (const std::string rev :
       {"refs/convert/parquet", "refs%2Fconvert%2Fparquet", "refs%2fpr/12"}) {
    auto ref = ParseUri("hf://datasets/org/name@" + rev + "?split=train");
    ASSERT_TRUE(ref.ok()) << rev << ": " << ref.status();
    EXPECT_EQ(ref->revision, rev == "refs%2fpr/12" ? "refs/pr/12" : "refs/convert/parquet");
    EXPECT_EQ(ref->path, "name");
    EXPECT_EQ(ref->query, "?split=train");
  }
  for (const std::string& rev :
       std::vector<std::string>{"refs/../x", "refs//x", "refs/", "/refs", "refs%2F..%2Fx", "a b",
                                "refs%2e%2e", "1/2/3/4/5/6/7/8/9", std::string(256, 'r')}) {
    auto bad = ParseUri("hf://org/name@" + rev);
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << rev;
  }

  auto http = ParseUri("HTTPS://Example.org:8443/a/b%20c.gguf?x=1#frag");
  ASSERT_TRUE(http.ok()) << http.status();
  EXPECT_EQ(http->scheme, "https");
  EXPECT_EQ(http->host, "example.org:8443");
  EXPECT_EQ(http->path, "/a/b c.gguf");
  EXPECT_EQ(http->query, "?x=1");
  EXPECT_EQ(ParseUri("https://h/org/%2e%2e/other").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ParseUri("https://h/org%2F..%2Fother").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseUri("http://user:pw@host/x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseUri("https:///nohost").status().code(), StatusCode::kInvalidArgument);
}

TEST(UriParserTest, PathToFileUriRoundTrips) {
  for (const std::string path : {"/srv/out/model", "/a/50%/b?c#d", "/x/%2e%2e", "/"}) {
    auto p = ParseUri(PathToFileUri(path));
    ASSERT_TRUE(p.ok()) << path << ": " << p.status();
    EXPECT_EQ(p->path, path);
  }
  EXPECT_EQ(PathToFileUri("/a b/c?"), "file:///a b/c%3F");
}

TEST(UriParserTest, PathIsUnder) {
  EXPECT_TRUE(PathIsUnder("/srv/out", "/srv/out"));
  EXPECT_TRUE(PathIsUnder("/srv/out/a", "/srv/out"));
  EXPECT_FALSE(PathIsUnder("/srv/outside", "/srv/out"));
  EXPECT_FALSE(PathIsUnder("/srv", "/srv/out"));
  EXPECT_TRUE(PathIsUnder("/anything", "/"));
  EXPECT_FALSE(PathIsUnder("relative", "/"));
}

}  // namespace
}  // namespace quantd::io
