#include "server/http/router.h"

#include <gmock/gmock.h>
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include "quantd/v1/quantization_service.grpc.pb.h"
#include "quantd/v1/quantization_service.pb.h"

namespace quantd::server::http {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;

const google::protobuf::ServiceDescriptor* Service() {
  return google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      v1::QuantizationService::service_full_name());
}

Router MakeRouter() {
  auto router = Router::ForService(Service());
  EXPECT_TRUE(router.ok()) << router.status().ToString();
  return std::move(*router);
}

TEST(PathTemplateTest, ParsesVariablesAndVerbs) {
  auto t = PathTemplate::Parse("/v1/{name=jobs/*}:cancel");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->verb(), "cancel");
  EXPECT_THAT(t->Fields(), ElementsAre("name"));

  auto split = SplitRequestPath("/v1/jobs/abc:cancel");
  ASSERT_TRUE(split.ok());
  auto m = t->Match(*split);
  ASSERT_TRUE(m.has_value());
  ASSERT_EQ(m->bindings.size(), 1u);
  EXPECT_EQ(m->bindings[0].field, "name");
  EXPECT_EQ(m->bindings[0].value, "jobs/abc");
  EXPECT_TRUE(m->violations.empty());

  // Without the verb, or with another one, it does not match.
  EXPECT_FALSE(t->Match(*SplitRequestPath("/v1/jobs/abc")).has_value());
  EXPECT_FALSE(t->Match(*SplitRequestPath("/v1/jobs/abc:watch")).has_value());
  EXPECT_FALSE(t->Match(*SplitRequestPath("/v1/jobs/abc/x:cancel")).has_value());
  EXPECT_FALSE(t->Match(*SplitRequestPath("/v1/tasks/abc:cancel")).has_value());
}

TEST(PathTemplateTest, ShorthandVariableAndLiterals) {
  auto t = PathTemplate::Parse("/v1/things/{id}");
  ASSERT_TRUE(t.ok());
  auto m = t->Match(*SplitRequestPath("/v1/things/x%20y"));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->bindings[0].value, "x y");
}

TEST(PathTemplateTest, RefusesUnsupportedTemplates) {
  for (const char* bad : {"v1/jobs", "/v1/{name=**}", "/v1/{name=jobs/*", "/v1//jobs", "/v1/{1x}",
                          "/v1/{a}/{a}", "/v1/x{a}", "/v1/jobs/", "/v1/jobs:"}) {
    EXPECT_FALSE(PathTemplate::Parse(bad).ok()) << bad;
  }
}

TEST(PathTemplateTest, EncodedSlashAndEmptySegmentsAreViolations) {
  auto t = PathTemplate::Parse("/v1/{name=jobs/*}");
  ASSERT_TRUE(t.ok());
  for (const char* path : {"/v1/jobs/a%2Fb", "/v1/jobs/"}) {
    auto m = t->Match(*SplitRequestPath(path));
    ASSERT_TRUE(m.has_value()) << path;
    EXPECT_THAT(m->violations, ElementsAre(Field(&FieldViolation::field, "name"))) << path;
  }
  // An encoded ':' does not split off a verb.
  auto m = t->Match(*SplitRequestPath("/v1/jobs/a%3Acancel"));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->bindings[0].value, "jobs/a:cancel");
}

TEST(PathTemplateTest, MalformedPaths) {
  EXPECT_FALSE(SplitRequestPath("v1/jobs").ok());
  EXPECT_FALSE(SplitRequestPath("/v1/jobs/%zz").ok());
  EXPECT_FALSE(SplitRequestPath("/v1/jobs/%4").ok());
  EXPECT_FALSE(SplitRequestPath("/v1/jobs/%0a").ok());
  EXPECT_EQ(PercentDecode("a+b%2B", true), "a b+");
  EXPECT_EQ(PercentDecode("a+b", false), "a+b");
  EXPECT_EQ(PercentDecode("%", false), std::nullopt);
}

TEST(RouterTest, RoutesComeFromTheAnnotations) {
  Router router = MakeRouter();
  std::vector<std::string> routes;
  for (const Route& r : router.routes()) {
    routes.push_back(r.http_method + " " + r.path.text() + " " + r.method->name());
  }
  EXPECT_THAT(routes,
              ElementsAre("POST /v1/jobs CreateJob", "GET /v1/{name=jobs/*} GetJob",
                          "GET /v1/jobs ListJobs", "POST /v1/{name=jobs/*}:cancel CancelJob",
                          "GET /v1/{name=jobs/*}:watch WatchJob"));
}

TEST(RouterTest, NotFoundAndMethodNotAllowed) {
  Router router = MakeRouter();
  RouteError error;
  EXPECT_EQ(router.Find("GET", "/v2/jobs", &error), nullptr);
  EXPECT_EQ(error.http_status, 404);
  EXPECT_EQ(error.status.reason(), "ROUTE_NOT_FOUND");

  error = {};
  EXPECT_EQ(router.Find("DELETE", "/v1/jobs/abc", &error), nullptr);
  EXPECT_EQ(error.http_status, 405);
  EXPECT_EQ(error.allow, "GET");
  error = {};
  EXPECT_EQ(router.Find("PUT", "/v1/jobs?x=1", &error), nullptr);
  EXPECT_EQ(error.allow, "GET, POST");
  error = {};
  EXPECT_EQ(router.Find("GET", "/v1/jobs/abc:cancel", &error), nullptr);
  EXPECT_EQ(error.http_status, 405);
  EXPECT_EQ(error.allow, "POST");

  const Route* r = router.Find("GET", "/v1/jobs/abc:watch", &error);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->method->name(), "WatchJob");
}

TEST(RouterTest, BodyRequestWithPathField) {
  Router router = MakeRouter();
  Resolved resolved;
  RouteError error;
  ASSERT_TRUE(
      router.Resolve({"POST", "/v1/jobs/abc:cancel", "application/json", "{}"}, &resolved, &error))
      << error.status.ToString();
  EXPECT_EQ(static_cast<v1::CancelJobRequest&>(*resolved.request).name(), "jobs/abc");
  // An empty body is an empty request.
  ASSERT_TRUE(router.Resolve({"POST", "/v1/jobs/abc:cancel", "", ""}, &resolved, &error));
  // The body may repeat the path's name, not contradict it.
  ASSERT_TRUE(router.Resolve(
      {"POST", "/v1/jobs/abc:cancel", "application/json; charset=utf-8", R"({"name": "jobs/abc"})"},
      &resolved, &error));
  EXPECT_FALSE(router.Resolve(
      {"POST", "/v1/jobs/abc:cancel", "application/json", R"({"name": "jobs/other"})"}, &resolved,
      &error));
  EXPECT_EQ(error.http_status, 400);
  EXPECT_THAT(error.status.violations(), ElementsAre(Field(&FieldViolation::field, "name")));
}

TEST(RouterTest, CreateJobBody) {
  Router router = MakeRouter();
  Resolved resolved;
  RouteError error;
  ASSERT_TRUE(router.Resolve({"POST", "/v1/jobs", "application/json",
                              R"({"spec": {"modelUri": "file:///m", "labels": {"a": "b"}},
                                  "request_id": "r1"})"},
                             &resolved, &error))
      << error.status.ToString();
  auto& request = static_cast<v1::CreateJobRequest&>(*resolved.request);
  EXPECT_EQ(request.spec().model_uri(), "file:///m");
  EXPECT_EQ(request.request_id(), "r1");
  EXPECT_EQ(request.spec().labels().at("a"), "b");

  EXPECT_FALSE(router.Resolve({"POST", "/v1/jobs", "text/plain", "{}"}, &resolved, &error));
  EXPECT_EQ(error.http_status, 415);
  EXPECT_FALSE(router.Resolve({"POST", "/v1/jobs", "application/json", R"({"nope": 1})"}, &resolved,
                              &error));
  EXPECT_EQ(error.http_status, 400);
  EXPECT_THAT(error.status.violations(), ElementsAre(Field(&FieldViolation::field, "(body)")));
  EXPECT_FALSE(router.Resolve({"POST", "/v1/jobs?validate_only=true", "application/json", "{}"},
                              &resolved, &error));
  EXPECT_THAT(error.status.violations(), ElementsAre(Field(&FieldViolation::field, "(query)")));
}

TEST(RouterTest, QueryBindsScalarsEnumsRepeatedAndMaps) {
  Router router = MakeRouter();
  Resolved resolved;
  RouteError error;
  ASSERT_TRUE(router.Resolve({"GET",
                              "/v1/jobs?page_size=5&pageToken=t%2B1&states=RUNNING&states=QUEUED"
                              "&labels%5Brole%5D=a+b&labels[sdk-scenario]=r1&view=FULL"
                              "&orderBy=create_time+asc",
                              "", ""},
                             &resolved, &error))
      << error.status.ToString();
  auto& request = static_cast<v1::ListJobsRequest&>(*resolved.request);
  EXPECT_EQ(request.page_size(), 5);
  EXPECT_EQ(request.page_token(), "t+1");
  EXPECT_THAT(request.states(), ElementsAre(v1::RUNNING, v1::QUEUED));
  EXPECT_EQ(request.labels().at("role"), "a b");
  EXPECT_EQ(request.labels().at("sdk-scenario"), "r1");
  EXPECT_EQ(request.view(), v1::FULL);
  EXPECT_EQ(request.order_by(), "create_time asc");

  ASSERT_TRUE(
      router.Resolve({"GET", "/v1/jobs/abc:watch?after_sequence=7", "", ""}, &resolved, &error));
  auto& watch = static_cast<v1::WatchJobRequest&>(*resolved.request);
  EXPECT_EQ(watch.name(), "jobs/abc");
  EXPECT_EQ(watch.after_sequence(), 7);
}

TEST(RouterTest, AllBadQueryParametersAreNamedTogether) {
  Router router = MakeRouter();
  Resolved resolved;
  RouteError error;
  EXPECT_FALSE(router.Resolve({"GET",
                               "/v1/jobs?bogus=1&page_size=ten&states=NOPE&view=2&labels[a]=1"
                               "&labels[a]=2&page_size=3&labels=x&order_by%ZZ=1&novalue"
                               "&page_token=%FF",
                               "", ""},
                              &resolved, &error));
  EXPECT_EQ(error.http_status, 400);
  EXPECT_EQ(error.status.code(), quantd::StatusCode::kInvalidArgument);
  EXPECT_EQ(error.status.reason(), "INVALID_ARGUMENT");
  std::vector<std::string> fields;
  for (const FieldViolation& v : error.status.violations()) fields.push_back(v.field);
  EXPECT_THAT(fields, ElementsAre("bogus", "page_size", "states", "view", "labels[a]", "page_size",
                                  "labels", "order_by%ZZ", "novalue", "page_token"));
  EXPECT_THAT(error.status.violations()[1].description, HasSubstr("32-bit integer"));
  EXPECT_THAT(error.status.violations()[2].description, HasSubstr("QUEUED"));
  EXPECT_THAT(error.status.message(), HasSubstr("bogus"));

  // The path binds name; the query may not.
  EXPECT_FALSE(router.Resolve({"GET", "/v1/jobs/abc?name=jobs/x", "", ""}, &resolved, &error));
  EXPECT_THAT(error.status.violations(), ElementsAre(Field(&FieldViolation::field, "name")));
  // An empty id is refused by name.
  EXPECT_FALSE(router.Resolve({"GET", "/v1/jobs/", "", ""}, &resolved, &error));
  EXPECT_EQ(error.http_status, 400);
  EXPECT_THAT(error.status.violations(), ElementsAre(Field(&FieldViolation::field, "name")));
}

TEST(RouterTest, TooManyQueryParameters) {
  Router router = MakeRouter();
  std::string target = "/v1/jobs?";
  for (size_t i = 0; i <= kMaxQueryParameters; ++i) target += "states=QUEUED&";
  Resolved resolved;
  RouteError error;
  EXPECT_FALSE(router.Resolve({"GET", target, "", ""}, &resolved, &error));
  EXPECT_EQ(error.http_status, 400);
  EXPECT_THAT(error.status.violations().back().description, HasSubstr("more than 64"));
}

}  // namespace
}  // namespace quantd::server::http
