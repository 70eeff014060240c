#include "server/http/http_rule.h"

#include "google/api/annotations.pb.h"

namespace quantd::server::http {

std::vector<const google::api::HttpRule*> HttpRules(
    const google::protobuf::MethodDescriptor& method) {
  std::vector<const google::api::HttpRule*> rules;
  if (!method.options().HasExtension(google::api::http)) return rules;
  const google::api::HttpRule& top = method.options().GetExtension(google::api::http);
  rules.push_back(&top);
  for (const auto& binding : top.additional_bindings()) rules.push_back(&binding);
  return rules;
}

HttpRuleBinding MethodAndPath(const google::api::HttpRule& rule) {
  switch (rule.pattern_case()) {
    case google::api::HttpRule::kGet:
      return {"GET", rule.get()};
    case google::api::HttpRule::kPost:
      return {"POST", rule.post()};
    case google::api::HttpRule::kPut:
      return {"PUT", rule.put()};
    case google::api::HttpRule::kDelete:
      return {"DELETE", rule.delete_()};
    case google::api::HttpRule::kPatch:
      return {"PATCH", rule.patch()};
    case google::api::HttpRule::kCustom:
      return {rule.custom().kind(), rule.custom().path()};
    case google::api::HttpRule::PATTERN_NOT_SET:
      break;
  }
  return {};
}

}  // namespace quantd::server::http
