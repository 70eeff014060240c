#include "server/openapi/openapi.h"

#include <gmock/gmock.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "google/api/annotations.pb.h"
#include "quantd/v1/quantization_service.pb.h"

namespace quantd::openapi {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

Json QuantdDocument() { return Json::parse(QuantizationServiceDocument()); }

Json Parameter(const Json& operation, const std::string& name) {
  for (const Json& p : operation.at("parameters")) {
    if (p.at("name") == name) return p;
  }
  ADD_FAILURE() << "no parameter " << name << " in " << operation.dump();
  return Json::object();
}

Json Schema(const Json& doc, const std::string& name) {
  return doc.at("components").at("schemas").at(name);
}

std::string Ref(const std::string& name) { return "#/components/schemas/" + name; }

TEST(QuantdDocumentTest, HeaderAndSecurity) {
  const Json doc = QuantdDocument();
  EXPECT_EQ(doc.at("openapi"), "3.0.3");
  EXPECT_EQ(doc.at("info").at("title"), "quantd");
  EXPECT_EQ(doc.at("info").at("version"), "v1");
  EXPECT_EQ(doc.at("security"), Json::parse(R"([{"bearerAuth": []}])"));
  EXPECT_EQ(doc.at("components").at("securitySchemes").at("bearerAuth").at("type"), "http");
  EXPECT_EQ(doc.at("components").at("securitySchemes").at("bearerAuth").at("scheme"), "bearer");
}

TEST(QuantdDocumentTest, PathsAndMethods) {
  const Json doc = QuantdDocument();
  std::map<std::string, std::set<std::string>> methods;
  for (const auto& [path, item] : doc.at("paths").items()) {
    for (const auto& [method, operation] : item.items()) {
      methods[path].insert(method + " " + operation.at("operationId").get<std::string>());
    }
  }
  const std::map<std::string, std::set<std::string>> expected = {
      {"/v1/jobs", {"post CreateJob", "get ListJobs"}},
      {"/v1/jobs/{jobId}", {"get GetJob"}},
      {"/v1/jobs/{jobId}:cancel", {"post CancelJob"}},
      {"/v1/jobs/{jobId}:watch", {"get WatchJob"}},
  };
  EXPECT_EQ(methods, expected);
}

TEST(QuantdDocumentTest, ListJobsQueryParameters) {
  const Json list = QuantdDocument().at("paths").at("/v1/jobs").at("get");
  std::vector<std::string> names;
  for (const Json& p : list.at("parameters")) {
    EXPECT_EQ(p.at("in"), "query");
    names.push_back(p.at("name"));
  }
  EXPECT_THAT(names,
              ElementsAre("page_size", "page_token", "states", "labels", "order_by", "view"));

  const Json page_size = Parameter(list, "page_size");
  EXPECT_EQ(page_size.at("schema"), Json::parse(R"({"type": "integer", "format": "int32"})"));
  EXPECT_THAT(page_size.at("description").get<std::string>(), HasSubstr("`pageSize`"));

  const Json states = Parameter(list, "states");
  EXPECT_EQ(states.at("style"), "form");
  EXPECT_EQ(states.at("explode"), true);
  EXPECT_EQ(states.at("schema").at("type"), "array");
  EXPECT_EQ(states.at("schema").at("items").at("$ref"), Ref("quantd.v1.JobState"));

  const Json labels = Parameter(list, "labels");
  EXPECT_EQ(labels.at("style"), "deepObject");
  EXPECT_EQ(labels.at("explode"), true);
  EXPECT_EQ(labels.at("schema"),
            Json::parse(R"({"type": "object", "additionalProperties": {"type": "string"}})"));
  EXPECT_THAT(labels.at("description").get<std::string>(), HasSubstr("labels[KEY]=VALUE"));

  EXPECT_EQ(Parameter(list, "view").at("schema").at("$ref"), Ref("quantd.v1.JobView"));
  EXPECT_FALSE(list.contains("requestBody"));
  EXPECT_EQ(
      list.at("responses").at("200").at("content").at("application/json").at("schema").at("$ref"),
      Ref("quantd.v1.ListJobsResponse"));
  EXPECT_EQ(list.at("responses").at("default").at("$ref"), "#/components/responses/Error");
}

TEST(QuantdDocumentTest, PathParameterAndBodies) {
  const Json doc = QuantdDocument();
  const Json get = doc.at("paths").at("/v1/jobs/{jobId}").at("get");
  ASSERT_EQ(get.at("parameters").size(), 1u);  // name is in the path: no query
  const Json job_id = get.at("parameters").at(0);
  EXPECT_EQ(job_id.at("name"), "jobId");
  EXPECT_EQ(job_id.at("in"), "path");
  EXPECT_EQ(job_id.at("required"), true);
  EXPECT_THAT(job_id.at("description").get<std::string>(), HasSubstr("`name` is `jobs/{jobId}`"));

  const Json create = doc.at("paths").at("/v1/jobs").at("post");
  EXPECT_FALSE(create.contains("parameters"));
  EXPECT_EQ(create.at("requestBody").at("required"), true);
  EXPECT_EQ(create.at("requestBody").at("content").at("application/json").at("schema").at("$ref"),
            Ref("quantd.v1.CreateJobRequest"));

  // CancelJobRequest has only the name, which is in the path.
  const Json cancel = doc.at("paths").at("/v1/jobs/{jobId}:cancel").at("post");
  const Json cancel_body = cancel.at("requestBody");
  EXPECT_EQ(cancel_body.at("required"), false);
  EXPECT_EQ(cancel_body.at("content").at("application/json").at("schema").at("properties"),
            Json::object());
}

TEST(QuantdDocumentTest, WatchJobIsAnEventStream) {
  const Json watch = QuantdDocument().at("paths").at("/v1/jobs/{jobId}:watch").at("get");
  const Json after = Parameter(watch, "after_sequence");
  EXPECT_EQ(after.at("in"), "query");
  EXPECT_EQ(after.at("schema"), Json::parse(R"({"type": "string", "format": "int64"})"));
  const Json ok = watch.at("responses").at("200");
  EXPECT_FALSE(ok.at("content").contains("application/json"));
  const Json stream = ok.at("content").at("text/event-stream");
  EXPECT_EQ(stream.at("x-sse-data-schema").at("$ref"), Ref("quantd.v1.JobEvent"));
  EXPECT_THAT(ok.at("description").get<std::string>(), HasSubstr("`data:` line is one"));
}

TEST(QuantdDocumentTest, Proto3JsonSchemas) {
  const Json doc = QuantdDocument();
  const Json event = Schema(doc, "quantd.v1.JobEvent").at("properties");
  EXPECT_EQ(event.at("sequence"), Json::parse(R"({"type": "string", "format": "int64"})"));
  EXPECT_EQ(event.at("blockMetrics").at("allOf").at(0).at("$ref"), Ref("quantd.v1.BlockMetrics"));
  EXPECT_THAT(event.at("blockMetrics").at("description").get<std::string>(),
              HasSubstr("oneof `payload`"));
  EXPECT_FALSE(event.contains("block_metrics"));

  const Json job = Schema(doc, "quantd.v1.Job").at("properties");
  EXPECT_EQ(job.at("createTime").at("type"), "string");
  EXPECT_EQ(job.at("createTime").at("format"), "date-time");
  EXPECT_EQ(job.at("error").at("$ref"), Ref("google.rpc.Status"));
  EXPECT_EQ(job.at("state").at("$ref"), Ref("quantd.v1.JobState"));

  const Json state = Schema(doc, "quantd.v1.JobState");
  EXPECT_EQ(state.at("type"), "string");
  EXPECT_THAT(state.at("enum").get<std::vector<std::string>>(),
              ElementsAre("JOB_STATE_UNSPECIFIED", "QUEUED", "RUNNING", "SUCCEEDED", "FAILED",
                          "CANCELLING", "CANCELLED"));

  const Json spec = Schema(doc, "quantd.v1.JobSpec").at("properties");
  EXPECT_EQ(spec.at("labels"),
            Json::parse(R"({"type": "object", "additionalProperties": {"type": "string"}})"));
  EXPECT_EQ(spec.at("modelUri"), Json::parse(R"({"type": "string"})"));

  const Json calibration = Schema(doc, "quantd.v1.CalibrationSpec").at("properties");
  EXPECT_EQ(calibration.at("seed"), Json::parse(R"({"type": "string", "format": "uint64"})"));
  EXPECT_EQ(calibration.at("numSamples"), Json::parse(R"({"type": "integer", "format": "int32"})"));

  const Json metrics = Schema(doc, "quantd.v1.Metrics").at("properties");
  EXPECT_EQ(metrics.at("klDivergenceMean"),
            Json::parse(R"({"type": "number", "format": "double"})"));
  EXPECT_EQ(metrics.at("blocks").at("type"), "array");
  EXPECT_EQ(metrics.at("blocks").at("items").at("$ref"), Ref("quantd.v1.BlockMetrics"));

  const Json smooth = Schema(doc, "quantd.v1.SmoothQuantConfig").at("properties");
  EXPECT_EQ(smooth.at("layerAlpha").at("additionalProperties"),
            Json::parse(R"({"type": "number", "format": "double"})"));

  const Json status = Schema(doc, "google.rpc.Status").at("properties");
  EXPECT_EQ(status.at("details").at("items").at("$ref"), Ref("google.protobuf.Any"));
  EXPECT_EQ(Schema(doc, "google.protobuf.Any").at("required"), Json::parse(R"(["@type"])"));

  const Json settings = Schema(doc, "quantd.v1.QuantizationSettings");
  EXPECT_THAT(settings.at("description").get<std::string>(),
              HasSubstr("At most one of `scheme`, `config`, `quarkJson` (oneof `source`)"));
  // proto3 `optional` is a synthetic oneof, not a real one.
  EXPECT_EQ(settings.at("properties").at("groupSize"),
            Json::parse(R"({"type": "integer", "format": "int32"})"));

  // Only what QuantizationService reaches: not the worker API.
  EXPECT_FALSE(doc.at("components").at("schemas").contains("quantd.v1.Lease"));
}

TEST(QuantdDocumentTest, ErrorResponse) {
  const Json doc = QuantdDocument();
  const Json response = doc.at("components").at("responses").at("Error");
  EXPECT_EQ(response.at("content").at("application/json").at("schema").at("$ref"),
            Ref("ErrorResponse"));
  const Json error = Schema(doc, "ErrorResponse").at("properties").at("error");
  EXPECT_EQ(error.at("properties").at("code").at("type"), "integer");
  EXPECT_EQ(error.at("properties").at("message").at("type"), "string");
  EXPECT_THAT(error.at("properties").at("status").at("enum").get<std::vector<std::string>>(),
              ::testing::Contains("INVALID_ARGUMENT"));
  EXPECT_EQ(error.at("properties").at("details").at("items").at("$ref"),
            Ref("google.protobuf.Any"));
  EXPECT_TRUE(Schema(doc, "google.rpc.ErrorInfo").at("properties").contains("reason"));
  EXPECT_TRUE(Schema(doc, "google.rpc.BadRequest").at("properties").contains("fieldViolations"));
}

// Every $ref names a schema or response of the document.
TEST(QuantdDocumentTest, ReferencesResolve) {
  const Json doc = QuantdDocument();
  int refs = 0;
  std::function<void(const Json&)> walk = [&](const Json& node) {
    if (node.is_object()) {
      for (const auto& [key, value] : node.items()) {
        if (key == "$ref") {
          ++refs;
          const std::string ref = value.get<std::string>();
          ASSERT_EQ(ref.rfind("#/", 0), 0u) << ref;
          Json::json_pointer pointer(ref.substr(1));
          EXPECT_TRUE(doc.contains(pointer)) << ref;
        } else {
          walk(value);
        }
      }
    } else if (node.is_array()) {
      for (const Json& value : node) walk(value);
    }
  };
  walk(doc);
  EXPECT_GT(refs, 50);
}

// A service of its own, for the template forms quantd's rules do not use.
class SyntheticServiceTest : public ::testing::Test {
 protected:
  const google::protobuf::ServiceDescriptor& Build(const std::string& methods) {
    google::protobuf::FileDescriptorProto file;
    const std::string text =
        R"pb(
          name: "shelf.proto"
          package: "shelf.v1"
          syntax: "proto3"
          message_type {
            name: "Book"
            field {
              name: "name"
              number: 1
              type: TYPE_STRING
              label: LABEL_OPTIONAL
              json_name: "name"
            }
            field {
              name: "pages"
              number: 2
              type: TYPE_INT64
              label: LABEL_OPTIONAL
              json_name: "pages"
            }
          }
          message_type {
            name: "UpdateBookRequest"
            field {
              name: "book"
              number: 1
              type: TYPE_MESSAGE
              type_name: ".shelf.v1.Book"
              label: LABEL_OPTIONAL
              json_name: "book"
            }
            field {
              name: "dry_run"
              number: 2
              type: TYPE_BOOL
              label: LABEL_OPTIONAL
              json_name: "dryRun"
            }
            field { name: "ids" number: 3 type: TYPE_UINT32 label: LABEL_REPEATED json_name: "ids" }
          }
          message_type {
            name: "GetFileRequest"
            field {
              name: "path"
              number: 1
              type: TYPE_STRING
              label: LABEL_OPTIONAL
              json_name: "path"
            }
            field {
              name: "blob"
              number: 2
              type: TYPE_BYTES
              label: LABEL_OPTIONAL
              json_name: "blob"
            }
          }
          service { name: "Shelf")pb" +
        methods + "}";
    if (!google::protobuf::TextFormat::ParseFromString(text, &file)) {
      ADD_FAILURE() << "bad descriptor text";
    }
    // A pool per service: a file name can be built once per pool.
    pools_.push_back(std::make_unique<google::protobuf::DescriptorPool>());
    const google::protobuf::FileDescriptor* built = pools_.back()->BuildFile(file);
    if (built == nullptr) throw std::runtime_error("BuildFile failed");
    return *built->service(0);
  }

  Json Document(const std::string& methods) {
    return Json::parse(BuildDocument(Build(methods), DocumentInfo{"shelf", "1", ""}));
  }

  std::string Error(const std::string& methods) {
    try {
      BuildDocument(Build(methods), DocumentInfo{"shelf", "1", ""});
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no error";
  }

  std::vector<std::unique_ptr<google::protobuf::DescriptorPool>> pools_;
};

TEST_F(SyntheticServiceTest, NestedFieldBodyFieldAndAdditionalBindings) {
  const Json doc = Document(R"pb(
    method {
      name: "UpdateBook"
      input_type: ".shelf.v1.UpdateBookRequest"
      output_type: ".shelf.v1.Book"
      options {
        [google.api.http] {
          patch: "/v1/{book.name=libraries/*/books/*}"
          body: "book"
          additional_bindings { put: "/v1/books/{book.name}:replace" body: "*" }
        }
      }
    }
    method {
      name: "GetFile"
      input_type: ".shelf.v1.GetFileRequest"
      output_type: ".shelf.v1.Book"
      options {
        [google.api.http] { get: "/v1/{path=files/**}" response_body: "pages" }
      }
    })pb");
  ASSERT_EQ(doc.at("paths").size(), 3u) << doc.at("paths").dump();
  const Json patch = doc.at("paths").at("/v1/libraries/{libraryId}/books/{bookId}").at("patch");
  EXPECT_EQ(patch.at("operationId"), "UpdateBook");
  EXPECT_EQ(patch.at("parameters").at(0).at("name"), "libraryId");
  EXPECT_THAT(patch.at("parameters").at(1).at("description").get<std::string>(),
              HasSubstr("`book.name` is `libraries/{libraryId}/books/{bookId}`"));
  // body "book": the other fields are query parameters.
  EXPECT_EQ(patch.at("requestBody").at("content").at("application/json").at("schema").at("$ref"),
            Ref("shelf.v1.Book"));
  EXPECT_EQ(Parameter(patch, "dry_run").at("in"), "query");
  const Json ids = Parameter(patch, "ids");
  EXPECT_EQ(ids.at("schema").at("items"),
            Json::parse(R"({"type": "integer", "format": "int64", "minimum": 0,
                            "maximum": 4294967295})"));
  EXPECT_EQ(patch.at("parameters").size(), 4u);

  const Json put = doc.at("paths").at("/v1/books/{book.name}:replace").at("put");
  EXPECT_EQ(put.at("operationId"), "UpdateBook_1");
  EXPECT_EQ(put.at("parameters").size(), 1u);  // body "*": no query parameters

  const Json get = doc.at("paths").at("/v1/files/{fileId}").at("get");
  EXPECT_THAT(get.at("parameters").at(0).at("description").get<std::string>(),
              HasSubstr("May contain `/`"));
  EXPECT_EQ(Parameter(get, "blob").at("schema"),
            Json::parse(R"({"type": "string", "format": "byte"})"));
  EXPECT_EQ(get.at("responses").at("200").at("content").at("application/json").at("schema"),
            Json::parse(R"({"type": "string", "format": "int64"})"));
}

TEST_F(SyntheticServiceTest, MethodsWithoutRulesAreLeftOut) {
  const Json doc = Document(R"pb(
    method { name: "GetFile" input_type: ".shelf.v1.GetFileRequest" output_type: ".shelf.v1.Book" }
  )pb");
  EXPECT_EQ(doc.at("paths"), Json::object());
}

TEST_F(SyntheticServiceTest, RulesThatCannotBeMappedAreRefused) {
  const std::string get_file =
      R"(name: "GetFile" input_type: ".shelf.v1.GetFileRequest" output_type: ".shelf.v1.Book" )";
  auto rule = [&](const std::string& http) {
    return "method { " + get_file + "options { [google.api.http] { " + http + " } } }";
  };
  EXPECT_THAT(Error(rule(R"(get: "/v1/*/files")")), HasSubstr("wildcard outside a variable"));
  EXPECT_THAT(Error(rule(R"(get: "/v1/{missing}")")), HasSubstr("no singular field"));
  EXPECT_THAT(Error(rule(R"(get: "v1/files")")), HasSubstr("must start with /"));
  EXPECT_THAT(Error(rule(R"(get: "/v1/{path=**/x}")")), HasSubstr("** must end"));
  EXPECT_THAT(Error(rule(R"(get: "/v1/{path")")), HasSubstr("unclosed"));
  EXPECT_THAT(Error(rule(R"(get: "/v1//x")")), HasSubstr("bad segment"));
  EXPECT_THAT(Error(rule(R"(get: "/v1/files" body: "*")")), HasSubstr("get with a body"));
  EXPECT_THAT(Error(rule(R"(post: "/v1/files" body: "nope")")), HasSubstr("body \"nope\""));
  EXPECT_THAT(Error(rule(R"(custom { kind: "FETCH" path: "/v1/files" })")),
              HasSubstr("no HTTP method"));
  EXPECT_THAT(Error("method { " + get_file +
                    R"(options { [google.api.http] { get: "/v1/f/{path}" } } }
                       method { name: "Other" input_type: ".shelf.v1.GetFileRequest"
                                output_type: ".shelf.v1.Book"
                                options { [google.api.http] { get: "/v1/f/{path}" } } })"),
              HasSubstr("mapped twice"));
}

}  // namespace
}  // namespace quantd::openapi
