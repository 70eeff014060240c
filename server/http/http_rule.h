// Reading google.api.http rules from a method's descriptor: what the HTTP
// face routes (router.h) and what the OpenAPI document lists
// (server/openapi) are the same rules, decoded in one place.
#ifndef QUANTD_SERVER_HTTP_HTTP_RULE_H_
#define QUANTD_SERVER_HTTP_HTTP_RULE_H_

#include <string>
#include <vector>

#include "google/api/http.pb.h"
#include "google/protobuf/descriptor.h"

namespace quantd::server::http {

// A method's rule and then its additional bindings; empty when the method
// has no google.api.http option. Bindings nested in a binding are not
// followed (the callers refuse or ignore them).
std::vector<const google::api::HttpRule*> HttpRules(
    const google::protobuf::MethodDescriptor& method);

// The HTTP method and path template of one rule as the rule spells them:
// "GET" and "/v1/jobs", or a custom rule's kind as written. The method is
// empty for a rule without a pattern.
struct HttpRuleBinding {
  std::string method;
  std::string path;
};
HttpRuleBinding MethodAndPath(const google::api::HttpRule& rule);

}  // namespace quantd::server::http

#endif  // QUANTD_SERVER_HTTP_HTTP_RULE_H_
