#include "server/http/router.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/api/annotations.pb.h"
#include "google/api/http.pb.h"
#include "server/common/errors.h"
#include "server/http/http_rule.h"

namespace quantd::server::http {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// A query parameter's name as echoed in a field violation: bounded, and
// escaped so that hostile bytes stay readable.
std::string Printable(absl::string_view s) {
  constexpr size_t kMax = 64;
  std::string out = absl::CHexEscape(s.substr(0, kMax));
  if (s.size() > kMax) out += "...";
  return out;
}

bool IsValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    int extra = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (extra < 0 || i + extra >= s.size()) return false;
    uint32_t cp = extra == 0 ? c : c & (0x3f >> extra);
    for (int k = 1; k <= extra; ++k) {
      unsigned char cc = s[i + k];
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

const FieldDescriptor* FindTopLevelField(const google::protobuf::Descriptor* type,
                                         absl::string_view name) {
  const std::string n(name);
  if (const FieldDescriptor* f = type->FindFieldByName(n)) return f;
  for (int i = 0; i < type->field_count(); ++i) {
    if (type->field(i)->json_name() == n) return type->field(i);
  }
  return nullptr;
}

// Parses one scalar or enum query value into `msg`'s field (appending for a
// repeated field). An empty string on success, else what is wrong.
std::string SetScalar(Message* msg, const FieldDescriptor* f, const std::string& value) {
  const Reflection* r = msg->GetReflection();
  const bool rep = f->is_repeated();
  auto bad = [&](absl::string_view what) {
    return absl::StrCat("\"", Printable(value), "\" is not ", what);
  };
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      int32_t v;
      if (!absl::SimpleAtoi(value, &v)) return bad("a 32-bit integer");
      rep ? r->AddInt32(msg, f, v) : r->SetInt32(msg, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t v;
      if (!absl::SimpleAtoi(value, &v)) return bad("a 64-bit integer");
      rep ? r->AddInt64(msg, f, v) : r->SetInt64(msg, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t v;
      if (value.empty() || value[0] == '-' || !absl::SimpleAtoi(value, &v)) {
        return bad("an unsigned 32-bit integer");
      }
      rep ? r->AddUInt32(msg, f, v) : r->SetUInt32(msg, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t v;
      if (value.empty() || value[0] == '-' || !absl::SimpleAtoi(value, &v)) {
        return bad("an unsigned 64-bit integer");
      }
      rep ? r->AddUInt64(msg, f, v) : r->SetUInt64(msg, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      double v;
      if (!absl::SimpleAtod(value, &v)) return bad("a number");
      rep ? r->AddDouble(msg, f, v) : r->SetDouble(msg, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      float v;
      if (!absl::SimpleAtof(value, &v)) return bad("a number");
      rep ? r->AddFloat(msg, f, v) : r->SetFloat(msg, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool v;
      if (value == "true") {
        v = true;
      } else if (value == "false") {
        v = false;
      } else {
        return bad("true or false");
      }
      rep ? r->AddBool(msg, f, v) : r->SetBool(msg, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* v = f->enum_type()->FindValueByName(value);
      if (v == nullptr) {
        std::vector<std::string> names;
        for (int i = 0; i < f->enum_type()->value_count(); ++i) {
          names.push_back(f->enum_type()->value(i)->name());
        }
        return bad(absl::StrCat("one of ", absl::StrJoin(names, ", ")));
      }
      rep ? r->AddEnum(msg, f, v) : r->SetEnum(msg, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string v = value;
      if (f->type() == FieldDescriptor::TYPE_BYTES) {
        if (!absl::WebSafeBase64Unescape(value, &v) && !absl::Base64Unescape(value, &v)) {
          return bad("base64");
        }
      } else if (!IsValidUtf8(value)) {
        return "the value is not valid UTF-8";
      }
      rep ? r->AddString(msg, f, std::move(v)) : r->SetString(msg, f, std::move(v));
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return "a message field cannot be set from the query string";
  }
  return "";
}

// Binds a GET request's query string to `msg`. Every problem becomes a
// violation named after the parameter as the client spelt it.
void BindQuery(absl::string_view query, const std::set<std::string>& path_fields, Message* msg,
               std::vector<FieldViolation>* violations) {
  const google::protobuf::Descriptor* type = msg->GetDescriptor();
  const Reflection* r = msg->GetReflection();
  std::set<const FieldDescriptor*> seen;
  std::map<std::pair<const FieldDescriptor*, std::string>, bool> map_keys;
  size_t count = 0;
  for (absl::string_view pair : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    if (++count > kMaxQueryParameters) {
      violations->push_back(
          {"(query)", absl::StrCat("more than ", kMaxQueryParameters, " query parameters")});
      return;
    }
    size_t eq = pair.find('=');
    absl::string_view raw_key = pair.substr(0, eq);
    std::optional<std::string> key = PercentDecode(raw_key, /*plus_is_space=*/true);
    if (!key.has_value()) {
      violations->push_back({Printable(raw_key), "malformed %-escape in the parameter name"});
      continue;
    }
    if (eq == absl::string_view::npos) {
      violations->push_back({Printable(*key), "a parameter needs a value (name=value)"});
      continue;
    }
    std::optional<std::string> value = PercentDecode(pair.substr(eq + 1), true);
    if (!value.has_value()) {
      violations->push_back({Printable(*key), "malformed %-escape in the value"});
      continue;
    }
    // labels[KEY]=VALUE sets one entry of a map field.
    std::string map_key;
    bool is_map_entry = false;
    absl::string_view field_name = *key;
    if (size_t open = key->find('['); open != std::string::npos && key->back() == ']') {
      field_name = absl::string_view(*key).substr(0, open);
      map_key = key->substr(open + 1, key->size() - open - 2);
      is_map_entry = true;
    }
    const FieldDescriptor* f = FindTopLevelField(type, field_name);
    if (f == nullptr) {
      violations->push_back({Printable(*key), "unknown query parameter"});
      continue;
    }
    if (path_fields.count(f->name())) {
      violations->push_back({Printable(*key), "this field is set by the request path"});
      continue;
    }
    if (f->is_map() != is_map_entry) {
      violations->push_back({Printable(*key), f->is_map() ? absl::StrCat("a map field is given as ",
                                                                         f->name(), "[KEY]=VALUE")
                                                          : "only a map field takes [KEY]"});
      continue;
    }
    if (f->is_map()) {
      const FieldDescriptor* kf = f->message_type()->map_key();
      const FieldDescriptor* vf = f->message_type()->map_value();
      if (kf->cpp_type() != FieldDescriptor::CPPTYPE_STRING ||
          vf->cpp_type() != FieldDescriptor::CPPTYPE_STRING) {
        violations->push_back({Printable(*key), "only string maps can be set from the query"});
        continue;
      }
      if (!map_keys.emplace(std::make_pair(f, map_key), true).second) {
        violations->push_back({Printable(*key), "the same map key is given twice"});
        continue;
      }
      if (!IsValidUtf8(map_key) || !IsValidUtf8(*value)) {
        violations->push_back({Printable(*key), "the key or value is not valid UTF-8"});
        continue;
      }
      Message* entry = r->AddMessage(msg, f);
      entry->GetReflection()->SetString(entry, kf, map_key);
      entry->GetReflection()->SetString(entry, vf, *value);
      continue;
    }
    if (!f->is_repeated() && !seen.insert(f).second) {
      violations->push_back({Printable(*key), "given more than once (the field is not repeated)"});
      continue;
    }
    if (std::string why = SetScalar(msg, f, *value); !why.empty()) {
      violations->push_back({Printable(*key), std::move(why)});
    }
  }
}

bool IsJsonContentType(absl::string_view content_type) {
  absl::string_view media = content_type.substr(0, content_type.find(';'));
  return absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(media), "application/json");
}

}  // namespace

quantd::StatusOr<Router> Router::ForService(const google::protobuf::ServiceDescriptor* service) {
  Router router;
  for (int i = 0; i < service->method_count(); ++i) {
    const google::protobuf::MethodDescriptor* m = service->method(i);
    for (const google::api::HttpRule* rule : HttpRules(*m)) {
      auto bad = [&](absl::string_view why) {
        return quantd::InvalidArgumentError(
            absl::StrCat("google.api.http of ", m->full_name(), ": ", why));
      };
      Route route;
      route.method = m;
      const HttpRuleBinding binding = MethodAndPath(*rule);
      if (binding.method.empty()) return bad("no pattern");
      route.http_method = binding.method;
      const std::string& path = binding.path;
      if (m->client_streaming()) return bad("client streaming cannot be served over HTTP");
      if (!rule->response_body().empty()) return bad("response_body is not supported");
      if (rule->body() != "" && rule->body() != "*") return bad("body must be \"\" or \"*\"");
      route.body_is_request = rule->body() == "*";
      QD_ASSIGN_OR_RETURN(route.path, PathTemplate::Parse(path));
      for (const std::string& field : route.path.Fields()) {
        const FieldDescriptor* f = m->input_type()->FindFieldByName(field);
        if (f == nullptr || f->is_repeated() || f->type() != FieldDescriptor::TYPE_STRING) {
          return bad(
              absl::StrCat("path variable ", field, " is not a top-level singular string field"));
        }
      }
      router.routes_.push_back(std::move(route));
    }
  }
  return router;
}

const Route* Router::Find(absl::string_view method, absl::string_view target,
                          RouteError* error) const {
  absl::string_view raw_path = target.substr(0, target.find('?'));
  quantd::StatusOr<SplitPath> split = SplitRequestPath(raw_path);
  if (!split.ok()) {
    error->http_status = 400;
    error->status =
        MakeError(quantd::StatusCode::kInvalidArgument, "MALFORMED_PATH", split.status().message());
    return nullptr;
  }
  std::set<std::string> allowed;
  for (const Route& route : routes_) {
    if (!route.path.Match(*split).has_value()) continue;
    if (route.http_method == method) return &route;
    allowed.insert(route.http_method);
  }
  if (allowed.empty()) {
    error->http_status = 404;
    error->status = MakeError(
        quantd::StatusCode::kNotFound, "ROUTE_NOT_FOUND",
        absl::StrCat("no route for ", Printable(method), " ", Printable(raw_path.substr(0, 256))));
  } else {
    error->http_status = 405;
    error->allow = absl::StrJoin(allowed, ", ");
    error->status =
        MakeError(quantd::StatusCode::kUnimplemented, "METHOD_NOT_ALLOWED",
                  absl::StrCat(Printable(method), " is not allowed here; allowed: ", error->allow));
  }
  return nullptr;
}

bool Router::Resolve(const HttpRequestView& request, Resolved* out, RouteError* error) const {
  const Route* route = Find(request.method, request.target, error);
  if (route == nullptr) return false;
  const size_t q = request.target.find('?');
  const absl::string_view query =
      q == absl::string_view::npos ? absl::string_view() : request.target.substr(q + 1);
  // Find already split this path successfully.
  SplitPath split = *SplitRequestPath(request.target.substr(0, q));
  PathTemplate::Matched matched = *route->path.Match(split);

  std::unique_ptr<Message> msg(google::protobuf::MessageFactory::generated_factory()
                                   ->GetPrototype(route->method->input_type())
                                   ->New());
  std::vector<FieldViolation> violations = matched.violations;
  auto fail = [&](int http_status, quantd::Status status) {
    error->http_status = http_status;
    error->status = std::move(status);
    return false;
  };
  if (route->body_is_request) {
    if (!query.empty()) {
      violations.push_back({"(query)",
                            "this route takes its request from the JSON body; "
                            "query parameters are not accepted"});
    }
    absl::string_view body = request.body;
    if (!absl::StripAsciiWhitespace(body).empty()) {
      if (!IsJsonContentType(request.content_type)) {
        return fail(415, MakeError(quantd::StatusCode::kInvalidArgument, "UNSUPPORTED_MEDIA_TYPE",
                                   "the request body must be Content-Type: application/json"));
      }
      google::protobuf::util::JsonParseOptions options;
      auto parsed = google::protobuf::util::JsonStringToMessage(
          google::protobuf::StringPiece(body.data(), body.size()), msg.get(), options);
      if (!parsed.ok()) {
        violations.push_back(
            {"(body)", absl::StrCat("not a JSON ", route->method->input_type()->full_name(), ": ",
                                    std::string(parsed.message()))});
      }
    }
  } else {
    std::set<std::string> path_fields;
    for (const PathBinding& b : matched.bindings) path_fields.insert(b.field);
    BindQuery(query, path_fields, msg.get(), &violations);
  }
  const Reflection* r = msg->GetReflection();
  for (const PathBinding& b : matched.bindings) {
    const FieldDescriptor* f = msg->GetDescriptor()->FindFieldByName(b.field);
    if (!IsValidUtf8(b.value)) {
      violations.push_back({b.field, "the path segment is not valid UTF-8"});
      continue;
    }
    const std::string from_body = r->GetString(*msg, f);
    if (!from_body.empty() && from_body != b.value) {
      violations.push_back({b.field, absl::StrCat("the body's ", f->json_name(),
                                                  " differs from the one in the path")});
    }
    r->SetString(msg.get(), f, b.value);
  }
  if (!violations.empty()) return fail(400, InvalidRequestError(violations));
  out->route = route;
  out->request = std::move(msg);
  return true;
}

}  // namespace quantd::server::http
