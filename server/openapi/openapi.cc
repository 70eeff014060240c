#include "server/openapi/openapi.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "google/api/annotations.pb.h"
#include "google/api/http.pb.h"
#include "google/rpc/error_details.pb.h"
#include "quantd/v1/quantization_service.pb.h"
#include "server/http/http_rule.h"

namespace quantd::openapi {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::MethodDescriptor;
using google::protobuf::ServiceDescriptor;
// Insertion order: properties in field order, paths in method order.
using Json = nlohmann::ordered_json;

Json SchemaRef(const std::string& name) { return Json{{"$ref", "#/components/schemas/" + name}}; }

[[noreturn]] void Fail(const MethodDescriptor& method, const std::string& what) {
  throw std::invalid_argument("google.api.http rule of " + method.full_name() + ": " + what);
}

// "jobs" -> "jobId", "model-versions" -> "modelVersionId".
std::string IdParameterName(const std::string& collection) {
  std::string singular = collection;
  if (singular.size() > 3 && singular.compare(singular.size() - 3, 3, "ies") == 0) {
    singular.replace(singular.size() - 3, 3, "y");
  } else if (singular.size() > 1 && singular.back() == 's' &&
             singular[singular.size() - 2] != 's') {
    singular.pop_back();
  }
  std::string camel;
  bool upper = false;
  for (char c : singular) {
    if (!std::isalnum(static_cast<unsigned char>(c))) {
      upper = !camel.empty();
      continue;
    }
    camel += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return camel + "Id";
}

bool IsIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// A literal path segment: what RFC 3986 allows unescaped in a segment, minus
// the template's own punctuation.
bool IsLiteral(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string("-._~!$&'()+,;=@").find(c) == std::string::npos) {
      return false;
    }
  }
  return true;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    parts.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

struct PathParameter {
  std::string name;
  std::string description;
  Json schema;
};

struct MappedPath {
  std::string path;  // OpenAPI path template
  std::vector<PathParameter> parameters;
  std::set<std::string> bound_fields;  // top-level request fields in the path
};

class Generator {
 public:
  Json Document(const ServiceDescriptor& service, const DocumentInfo& info);

 private:
  Json MessageSchema(const Descriptor& message);
  Json ValueSchema(const FieldDescriptor& field);
  Json FieldSchema(const FieldDescriptor& field);
  void AddMessage(const Descriptor& message);
  void AddEnum(const EnumDescriptor& enumeration);
  Json BodySchema(const Descriptor& request, const std::set<std::string>& bound);
  Json QueryParameters(const Descriptor& request, const std::set<std::string>& excluded);
  MappedPath MapPath(const MethodDescriptor& method, const std::string& pattern);
  Json Operation(const MethodDescriptor& method, const google::api::HttpRule& rule,
                 const MappedPath& path, const std::string& operation_id);
  void AddErrorSchemas();

  std::map<std::string, Json> schemas_;  // sorted by name in the document
};

// proto3 JSON of the well-known types (inline), or a reference to the
// message's schema.
Json Generator::MessageSchema(const Descriptor& message) {
  const std::string& name = message.full_name();
  if (name == "google.protobuf.Timestamp") {
    return {{"type", "string"},
            {"format", "date-time"},
            {"description", "RFC 3339, UTC (\"Z\"), e.g. \"2026-01-02T03:04:05.678Z\"."}};
  }
  if (name == "google.protobuf.Duration") {
    return {{"type", "string"},
            {"pattern", "^-?[0-9]+(\\.[0-9]{1,9})?s$"},
            {"description",
             "Seconds with up to 9 fractional digits and the suffix \"s\", e.g. "
             "\"1.5s\"."}};
  }
  if (name == "google.protobuf.FieldMask") {
    return {{"type", "string"}, {"description", "Comma-separated lowerCamelCase field paths."}};
  }
  if (name == "google.protobuf.Struct") {
    return {{"type", "object"}, {"additionalProperties", true}};
  }
  if (name == "google.protobuf.Value") {
    return {{"nullable", true}, {"description", "Any JSON value."}};
  }
  if (name == "google.protobuf.ListValue") {
    return {{"type", "array"}, {"items", Json::object()}};
  }
  if (name == "google.protobuf.Empty") {
    return {{"type", "object"}};
  }
  static const std::map<std::string, std::pair<const char*, const char*>> kWrappers = {
      {"google.protobuf.DoubleValue", {"number", "double"}},
      {"google.protobuf.FloatValue", {"number", "float"}},
      {"google.protobuf.Int64Value", {"string", "int64"}},
      {"google.protobuf.UInt64Value", {"string", "uint64"}},
      {"google.protobuf.Int32Value", {"integer", "int32"}},
      {"google.protobuf.UInt32Value", {"integer", "int64"}},
      {"google.protobuf.BoolValue", {"boolean", nullptr}},
      {"google.protobuf.StringValue", {"string", nullptr}},
      {"google.protobuf.BytesValue", {"string", "byte"}},
  };
  if (auto it = kWrappers.find(name); it != kWrappers.end()) {
    Json schema = {{"type", it->second.first}};
    if (it->second.second != nullptr) schema["format"] = it->second.second;
    schema["nullable"] = true;
    return schema;
  }
  if (name == "google.protobuf.Any") {
    if (!schemas_.count(name)) {
      schemas_[name] = {
          {"type", "object"},
          {"description", "A message of any type: its fields in proto3 JSON, and \"@type\"."},
          {"required", {"@type"}},
          {"properties",
           {{"@type",
             {{"type", "string"},
              {"description",
               "\"type.googleapis.com/\" and the message's full name, e.g. "
               "\"type.googleapis.com/google.rpc.ErrorInfo\"."}}}}},
          {"additionalProperties", true}};
    }
    return SchemaRef(name);
  }
  AddMessage(message);
  return SchemaRef(name);
}

// The schema of one value of the field (an element, for repeated fields).
Json Generator::ValueSchema(const FieldDescriptor& field) {
  switch (field.type()) {
    case FieldDescriptor::TYPE_DOUBLE:
      return {{"type", "number"}, {"format", "double"}};
    case FieldDescriptor::TYPE_FLOAT:
      return {{"type", "number"}, {"format", "float"}};
    case FieldDescriptor::TYPE_INT64:
    case FieldDescriptor::TYPE_SINT64:
    case FieldDescriptor::TYPE_SFIXED64:
      return {{"type", "string"}, {"format", "int64"}};
    case FieldDescriptor::TYPE_UINT64:
    case FieldDescriptor::TYPE_FIXED64:
      return {{"type", "string"}, {"format", "uint64"}};
    case FieldDescriptor::TYPE_INT32:
    case FieldDescriptor::TYPE_SINT32:
    case FieldDescriptor::TYPE_SFIXED32:
      return {{"type", "integer"}, {"format", "int32"}};
    case FieldDescriptor::TYPE_UINT32:
    case FieldDescriptor::TYPE_FIXED32:
      return {{"type", "integer"}, {"format", "int64"}, {"minimum", 0}, {"maximum", 4294967295LL}};
    case FieldDescriptor::TYPE_BOOL:
      return {{"type", "boolean"}};
    case FieldDescriptor::TYPE_STRING:
      return {{"type", "string"}};
    case FieldDescriptor::TYPE_BYTES:
      return {{"type", "string"}, {"format", "byte"}};
    case FieldDescriptor::TYPE_ENUM:
      if (field.enum_type()->full_name() == "google.protobuf.NullValue") {
        return {{"nullable", true}, {"description", "JSON null."}};
      }
      AddEnum(*field.enum_type());
      return SchemaRef(field.enum_type()->full_name());
    case FieldDescriptor::TYPE_MESSAGE:
    case FieldDescriptor::TYPE_GROUP:
      return MessageSchema(*field.message_type());
  }
  throw std::logic_error("unknown field type of " + field.full_name());
}

Json Generator::FieldSchema(const FieldDescriptor& field) {
  Json schema;
  if (field.is_map()) {
    const FieldDescriptor& key = *field.message_type()->map_key();
    schema = {{"type", "object"},
              {"additionalProperties", ValueSchema(*field.message_type()->map_value())}};
    if (key.type() != FieldDescriptor::TYPE_STRING) {
      schema["description"] = "Keys are " + std::string(key.type_name()) + " values as strings.";
    }
  } else if (field.is_repeated()) {
    schema = {{"type", "array"}, {"items", ValueSchema(field)}};
  } else {
    schema = ValueSchema(field);
  }
  if (const auto* oneof = field.real_containing_oneof()) {
    std::string members;
    for (int i = 0; i < oneof->field_count(); ++i) {
      members +=
          std::string(members.empty() ? "" : ", ") + "`" + oneof->field(i)->json_name() + "`";
    }
    std::string note =
        "Member of the oneof `" + oneof->name() + "`: at most one of " + members + " is set.";
    // OpenAPI 3.0 ignores the siblings of a $ref.
    if (schema.contains("$ref")) schema = {{"allOf", Json::array({schema})}};
    schema["description"] = schema.contains("description")
                                ? schema["description"].get<std::string>() + " " + note
                                : note;
  }
  return schema;
}

void Generator::AddEnum(const EnumDescriptor& enumeration) {
  if (schemas_.count(enumeration.full_name())) return;
  Json values = Json::array();
  for (int i = 0; i < enumeration.value_count(); ++i) {
    values.push_back(enumeration.value(i)->name());
  }
  schemas_[enumeration.full_name()] = {
      {"type", "string"},
      {"enum", values},
      {"description",
       "Enum " + enumeration.full_name() + ", by value name (requests may also give the number)."}};
}

void Generator::AddMessage(const Descriptor& message) {
  if (schemas_.count(message.full_name())) return;
  // Placeholder first, so that recursive messages end.
  schemas_[message.full_name()] = Json::object();
  Json properties = Json::object();
  for (int i = 0; i < message.field_count(); ++i) {
    const FieldDescriptor& field = *message.field(i);
    properties[field.json_name()] = FieldSchema(field);
  }
  Json schema = {{"type", "object"}};
  std::string description = "Message " + message.full_name() + ".";
  for (int i = 0; i < message.real_oneof_decl_count(); ++i) {
    const auto& oneof = *message.oneof_decl(i);
    std::string members;
    for (int j = 0; j < oneof.field_count(); ++j) {
      members += std::string(members.empty() ? "" : ", ") + "`" + oneof.field(j)->json_name() + "`";
    }
    description += " At most one of " + members + " (oneof `" + oneof.name() + "`).";
  }
  schema["description"] = description;
  schema["properties"] = properties;
  schemas_[message.full_name()] = schema;
}

Json Generator::BodySchema(const Descriptor& request, const std::set<std::string>& bound) {
  if (bound.empty()) return MessageSchema(request);
  Json properties = Json::object();
  for (int i = 0; i < request.field_count(); ++i) {
    const FieldDescriptor& field = *request.field(i);
    if (!bound.count(field.name())) properties[field.json_name()] = FieldSchema(field);
  }
  return {{"type", "object"},
          {"description", request.full_name() + " without the fields in the path."},
          {"properties", properties}};
}

Json Generator::QueryParameters(const Descriptor& request, const std::set<std::string>& excluded) {
  Json parameters = Json::array();
  for (int i = 0; i < request.field_count(); ++i) {
    const FieldDescriptor& field = *request.field(i);
    if (excluded.count(field.name())) continue;
    Json parameter = {{"name", field.name()}, {"in", "query"}};
    std::string description;
    if (field.is_map()) {
      const FieldDescriptor& value = *field.message_type()->map_value();
      if (value.type() == FieldDescriptor::TYPE_MESSAGE) continue;
      parameter["style"] = "deepObject";
      parameter["explode"] = true;
      parameter["schema"] = FieldSchema(field);
      description =
          "One `" + field.name() + "[KEY]=VALUE` per entry, e.g. `" + field.name() + "[team]=ml`.";
    } else if (field.type() == FieldDescriptor::TYPE_MESSAGE ||
               field.type() == FieldDescriptor::TYPE_GROUP) {
      continue;  // only in a body
    } else if (field.is_repeated()) {
      parameter["style"] = "form";
      parameter["explode"] = true;
      parameter["schema"] = FieldSchema(field);
      description =
          "Repeat the parameter once per value: `" + field.name() + "=A&" + field.name() + "=B`.";
    } else {
      parameter["schema"] = FieldSchema(field);
    }
    if (field.json_name() != field.name()) {
      description += std::string(description.empty() ? "" : " ") + "Also accepted as `" +
                     field.json_name() + "`.";
    }
    if (!description.empty()) parameter["description"] = description;
    parameters.push_back(parameter);
  }
  return parameters;
}

MappedPath Generator::MapPath(const MethodDescriptor& method, const std::string& pattern) {
  if (pattern.empty() || pattern[0] != '/')
    Fail(method, "path \"" + pattern + "\" must start with /");
  // The verb is a ":literal" after the last segment (not inside a variable).
  std::string segments_text = pattern;
  std::string verb;
  const size_t colon = pattern.rfind(':');
  const size_t slash = pattern.rfind('/');
  const size_t brace = pattern.rfind('}');
  if (colon != std::string::npos && colon > slash &&
      (brace == std::string::npos || colon > brace)) {
    verb = pattern.substr(colon + 1);
    segments_text = pattern.substr(0, colon);
    if (!IsLiteral(verb)) Fail(method, "bad verb in \"" + pattern + "\"");
  }
  MappedPath mapped;
  std::set<std::string> names;
  auto unique = [&names](std::string name) {
    std::string candidate = name;
    for (int n = 2; names.count(candidate); ++n) candidate = name + std::to_string(n);
    names.insert(candidate);
    return candidate;
  };
  size_t pos = 1;
  while (pos <= segments_text.size()) {
    if (pos < segments_text.size() && segments_text[pos] == '{') {
      const size_t close = segments_text.find('}', pos);
      if (close == std::string::npos) Fail(method, "unclosed { in \"" + pattern + "\"");
      const std::string variable = segments_text.substr(pos + 1, close - pos - 1);
      const size_t equals = variable.find('=');
      const std::string field_path = variable.substr(0, equals);
      const std::vector<std::string> subpattern = equals == std::string::npos
                                                      ? std::vector<std::string>{}
                                                      : Split(variable.substr(equals + 1), '/');
      // Resolve the field: singular messages down to a singular non-message.
      const Descriptor* message = method.input_type();
      const FieldDescriptor* field = nullptr;
      for (const std::string& part : Split(field_path, '.')) {
        if (!IsIdentifier(part)) Fail(method, "bad field path \"" + field_path + "\"");
        if (message == nullptr) Fail(method, "\"" + field_path + "\" goes through a non-message");
        field = message->FindFieldByName(part);
        if (field == nullptr || field->is_repeated()) {
          Fail(method, "\"" + field_path + "\" is no singular field of " +
                           method.input_type()->full_name());
        }
        message = field->type() == FieldDescriptor::TYPE_MESSAGE ? field->message_type() : nullptr;
      }
      if (message != nullptr) Fail(method, "path variable \"" + field_path + "\" is a message");
      if (field_path.find('.') == std::string::npos) mapped.bound_fields.insert(field_path);
      if (subpattern.empty()) {
        PathParameter parameter{unique(field_path), "The request's `" + field_path + "`.",
                                ValueSchema(*field)};
        mapped.path += "/{" + parameter.name + "}";
        mapped.parameters.push_back(parameter);
      } else {
        std::string shape;  // e.g. "jobs/{jobId}", for the descriptions
        std::vector<PathParameter> parameters;
        std::string previous_literal;
        for (size_t i = 0; i < subpattern.size(); ++i) {
          const std::string& part = subpattern[i];
          if (part == "*" || part == "**") {
            if (part == "**" && i + 1 != subpattern.size()) {
              Fail(method, "** must end the variable in \"" + pattern + "\"");
            }
            PathParameter parameter{
                unique(previous_literal.empty() ? field_path : IdParameterName(previous_literal)),
                "",
                {{"type", "string"}}};
            if (part == "**") parameter.description = " May contain `/`.";
            mapped.path += "/{" + parameter.name + "}";
            shape += std::string(shape.empty() ? "" : "/") + "{" + parameter.name + "}";
            parameters.push_back(parameter);
          } else if (IsLiteral(part)) {
            mapped.path += "/" + part;
            shape += std::string(shape.empty() ? "" : "/") + part;
            previous_literal = part;
          } else {
            Fail(method, "bad segment \"" + part + "\" in \"" + pattern + "\"");
          }
        }
        if (parameters.empty()) Fail(method, "variable without wildcard in \"" + pattern + "\"");
        for (auto& parameter : parameters) {
          parameter.description =
              "The request's `" + field_path + "` is `" + shape + "`." + parameter.description;
          mapped.parameters.push_back(parameter);
        }
      }
      pos = close + 1;
    } else {
      const size_t end = std::min(segments_text.find('/', pos), segments_text.size());
      const std::string literal = segments_text.substr(pos, end - pos);
      if (literal == "*" || literal == "**") {
        Fail(method, "wildcard outside a variable in \"" + pattern + "\"");
      }
      if (!IsLiteral(literal))
        Fail(method, "bad segment \"" + literal + "\" in \"" + pattern + "\"");
      mapped.path += "/" + literal;
      pos = end;
    }
    if (pos == segments_text.size()) break;
    if (segments_text[pos] != '/') Fail(method, "bad path \"" + pattern + "\"");
    ++pos;
  }
  if (!verb.empty()) mapped.path += ":" + verb;
  return mapped;
}

Json Generator::Operation(const MethodDescriptor& method, const google::api::HttpRule& rule,
                          const MappedPath& path, const std::string& operation_id) {
  const Descriptor& request = *method.input_type();
  Json operation = {
      {"operationId", operation_id},
      {"tags", {method.service()->name()}},
      {"description", "gRPC: " + method.service()->full_name() + "/" + method.name() + "."}};
  Json parameters = Json::array();
  for (const PathParameter& p : path.parameters) {
    parameters.push_back({{"name", p.name},
                          {"in", "path"},
                          {"required", true},
                          {"description", p.description},
                          {"schema", p.schema}});
  }
  std::set<std::string> excluded = path.bound_fields;
  std::optional<Json> body;
  if (rule.body() == "*") {
    body = BodySchema(request, path.bound_fields);
  } else if (!rule.body().empty()) {
    const FieldDescriptor* field = request.FindFieldByName(rule.body());
    if (field == nullptr || path.bound_fields.count(rule.body())) {
      Fail(method, "body \"" + rule.body() + "\" is no free field of " + request.full_name());
    }
    body = FieldSchema(*field);
    excluded.insert(rule.body());
  }
  if (rule.body() != "*") {
    for (auto& parameter : QueryParameters(request, excluded)) parameters.push_back(parameter);
  }
  if (!parameters.empty()) operation["parameters"] = parameters;
  if (body) {
    // A body without fields ({} for CancelJob) may be left out.
    const bool empty = body->contains("properties") && (*body)["properties"].empty();
    operation["requestBody"] = {{"required", !empty},
                                {"content", {{"application/json", {{"schema", *body}}}}}};
  }
  const Descriptor& response = *method.output_type();
  Json response_schema;
  std::string response_name = response.full_name();
  if (!rule.response_body().empty()) {
    const FieldDescriptor* field = response.FindFieldByName(rule.response_body());
    if (field == nullptr) {
      Fail(method,
           "response_body \"" + rule.response_body() + "\" is no field of " + response.full_name());
    }
    response_schema = FieldSchema(*field);
    response_name += "." + rule.response_body();
  } else {
    response_schema = MessageSchema(response);
  }
  Json ok;
  if (method.server_streaming()) {
    ok = {{"description",
           "Server-sent events: each event's `data:` line is one " + response_name +
               " (proto3 JSON, its schema in x-sse-data-schema); the stream ends when the call "
               "does."},
          {"content",
           {{"text/event-stream",
             {{"schema", {{"type", "string"}}}, {"x-sse-data-schema", response_schema}}}}}};
  } else {
    ok = {{"description", "A " + response_name + "."},
          {"content", {{"application/json", {{"schema", response_schema}}}}}};
  }
  operation["responses"] = {{"200", ok}, {"default", {{"$ref", "#/components/responses/Error"}}}};
  return operation;
}

void Generator::AddErrorSchemas() {
  MessageSchema(*google::protobuf::Any::descriptor());
  AddMessage(*google::rpc::ErrorInfo::descriptor());
  AddMessage(*google::rpc::BadRequest::descriptor());
  // google.rpc.Code names, for `status`.
  Json codes =
      Json::array({"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                   "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                   "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
                   "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"});
  schemas_["ErrorResponse"] = {
      {"type", "object"},
      {"description", "An error (AIP-193): the call's google.rpc.Status."},
      {"required", {"error"}},
      {"properties",
       {{"error",
         {{"type", "object"},
          {"required", {"code", "message", "status"}},
          {"properties",
           {{"code",
             {{"type", "integer"},
              {"format", "int32"},
              {"description", "The HTTP status code of the response, e.g. 400."}}},
            {"message", {{"type", "string"}, {"description", "For developers, in English."}}},
            {"status",
             {{"type", "string"},
              {"enum", codes},
              {"description", "The gRPC status code's name (google.rpc.Code)."}}},
            {"details",
             {{"type", "array"},
              {"description",
               "google.rpc.ErrorInfo (reason; domain \"quantd\") and, for an invalid request, "
               "google.rpc.BadRequest (its field violations), each with its \"@type\"."},
              {"items", SchemaRef("google.protobuf.Any")}}}}}}}}}};
}

Json Generator::Document(const ServiceDescriptor& service, const DocumentInfo& info) {
  Json paths = Json::object();
  for (int i = 0; i < service.method_count(); ++i) {
    const MethodDescriptor& method = *service.method(i);
    const std::vector<const google::api::HttpRule*> rules = server::http::HttpRules(method);
    if (rules.empty()) continue;
    if (method.client_streaming()) Fail(method, "client streaming has no HTTP mapping");
    for (size_t r = 1; r < rules.size(); ++r) {
      if (rules[r]->additional_bindings_size() > 0) Fail(method, "nested additional_bindings");
    }
    for (size_t r = 0; r < rules.size(); ++r) {
      const google::api::HttpRule& rule = *rules[r];
      const server::http::HttpRuleBinding binding = server::http::MethodAndPath(rule);
      if (binding.method.empty()) Fail(method, "no HTTP method");
      std::string verb;
      for (char c : binding.method) {
        verb += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
      if (rule.pattern_case() == google::api::HttpRule::kCustom && verb != "head" &&
          verb != "options" && verb != "trace") {
        Fail(method, "custom kind \"" + rule.custom().kind() + "\" is no HTTP method");
      }
      const std::string& pattern = binding.path;
      if (verb == "get" || verb == "delete" || verb == "head") {
        if (!rule.body().empty()) Fail(method, verb + " with a body");
      }
      const MappedPath mapped = MapPath(method, pattern);
      if (paths.contains(mapped.path) && paths[mapped.path].contains(verb)) {
        Fail(method, verb + " " + mapped.path + " is mapped twice");
      }
      const std::string id = r == 0 ? method.name() : method.name() + "_" + std::to_string(r);
      paths[mapped.path][verb] = Operation(method, rule, mapped, id);
    }
  }
  AddErrorSchemas();

  Json schemas = Json::object();
  for (const auto& [name, schema] : schemas_) schemas[name] = schema;
  Json info_object = {{"title", info.title}, {"version", info.version}};
  if (!info.description.empty()) info_object["description"] = info.description;
  return {{"openapi", "3.0.3"},
          {"info", info_object},
          {"tags",
           {{{"name", service.name()}, {"description", "gRPC service " + service.full_name()}}}},
          {"security", {{{"bearerAuth", Json::array()}}}},
          {"paths", paths},
          {"components",
           {{"schemas", schemas},
            {"responses",
             {{"Error",
               {{"description", "An error, with the gRPC status it stands for."},
                {"content", {{"application/json", {{"schema", SchemaRef("ErrorResponse")}}}}}}}}},
            {"securitySchemes",
             {{"bearerAuth",
               {{"type", "http"},
                {"scheme", "bearer"},
                {"description",
                 "A quantd API token, as gRPC callers send it in `authorization: "
                 "Bearer <token>`. Unused when quantd runs without "
                 "authentication."}}}}}}}};
}

constexpr char kQuantdDescription[] =
    "The HTTP/JSON face of quantd's gRPC QuantizationService: each operation is one RPC, "
    "mapped by its google.api.http rule. Bodies are the messages in protobuf's proto3 JSON "
    "mapping: lowerCamelCase field names (the proto names are accepted too), 64-bit integers "
    "as strings, enums by value name, Timestamps as RFC 3339, fields at their default value "
    "left out; doubles may also be \"NaN\", \"Infinity\" or \"-Infinity\". Query parameters "
    "take the proto field names. Errors are `{\"error\": {...}}` bodies (AIP-193) carrying "
    "the gRPC status's details.";

}  // namespace

std::string BuildDocument(const ServiceDescriptor& service, const DocumentInfo& info) {
  return Generator().Document(service, info).dump(2) + "\n";
}

std::string QuantizationServiceDocument() {
  // Through a message of the file, which links its descriptors in.
  const ServiceDescriptor* service =
      quantd::v1::CreateJobRequest::descriptor()->file()->FindServiceByName("QuantizationService");
  return BuildDocument(*service, DocumentInfo{"quantd", "v1", kQuantdDescription});
}

}  // namespace quantd::openapi
