// Random methods, paths, queries and bodies thrown at the router: it must
// never crash, and every refusal must be one of the statuses the HTTP face
// documents, with a reason.
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "quantd/v1/quantization_service.grpc.pb.h"
#include "server/http/router.h"

namespace quantd::server::http {
namespace {

std::string Pick(std::mt19937& rng, const std::vector<std::string>& items) {
  return items[rng() % items.size()];
}

std::string RandomBytes(std::mt19937& rng, size_t max_len) {
  std::string s(rng() % (max_len + 1), '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// Pieces that make near-miss requests more likely than pure noise.
std::string RandomTarget(std::mt19937& rng) {
  static const std::vector<std::string> pieces = {
      "/",         "v1",          "jobs",          "%2F",     "%",    "%zz",
      ":",         ":cancel",     ":watch",        "?",       "&",    "=",
      "page_size", "pageSize",    "states",        "labels[", "]",    "RUNNING",
      "-1",        "99999999999", "%FF",           "+",       "view", "after_sequence",
      "name",      "01abc",       "labels%5Bk%5D", "[]"};
  static const std::vector<std::string> bases = {"/v1/jobs", "/v1/jobs/01abc",
                                                 "/v1/jobs/01abc:cancel", "/v1/jobs/01abc:watch"};
  std::string s = rng() % 2 == 0   ? Pick(rng, bases) + (rng() % 2 ? "?" : "")
                  : rng() % 8 == 0 ? ""
                                   : "/";
  const int n = rng() % 16;
  for (int i = 0; i < n; ++i) {
    s += rng() % 6 == 0 ? RandomBytes(rng, 4) : Pick(rng, pieces);
  }
  return s;
}

TEST(RouterFuzzTest, NeverCrashesAndAnswersADocumentedStatus) {
  auto router =
      Router::ForService(google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          v1::QuantizationService::service_full_name()));
  ASSERT_TRUE(router.ok());
  std::mt19937 rng(20261205);
  const std::set<int> allowed = {400, 404, 405, 415};
  const std::vector<std::string> methods = {"GET", "POST", "PUT", "DELETE", "HEAD", "", "get"};
  const std::vector<std::string> bodies = {"",
                                           "{}",
                                           "{",
                                           "null",
                                           R"({"spec": {"labels": {"a": 1}}})",
                                           R"({"name": "jobs/x"})",
                                           std::string(2000, '['),
                                           R"({"spec": {"modelUri": "\ud800"}})"};
  int matched = 0;
  for (int i = 0; i < 200000; ++i) {
    const std::string method = Pick(rng, methods);
    const std::string target = RandomTarget(rng);
    const std::string body = rng() % 4 == 0 ? RandomBytes(rng, 64) : Pick(rng, bodies);
    const std::string content_type = rng() % 5 == 0 ? "text/plain" : "application/json";
    Resolved resolved;
    RouteError error;
    if (router->Resolve({method, target, content_type, body}, &resolved, &error)) {
      ASSERT_NE(resolved.request, nullptr);
      ++matched;
    } else {
      ASSERT_TRUE(allowed.count(error.http_status)) << error.http_status << " for " << target;
      ASSERT_FALSE(error.status.ok());
      ASSERT_FALSE(error.status.reason().empty());
    }
  }
  // The generator reaches the routes, not just the 404 branch.
  EXPECT_GT(matched, 100);
}

}  // namespace
}  // namespace quantd::server::http
