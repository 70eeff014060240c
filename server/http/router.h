// The HTTP routes of a gRPC service, read from the google.api.http option of
// each method in the compiled descriptors (no route table of its own), and
// the mapping of one HTTP request onto a request message: path variables,
// query parameters (GET) or the JSON body (body: "*"). Pure: no sockets, no
// gRPC calls, so every input can be thrown at it in tests.
#ifndef QUANTD_SERVER_HTTP_ROUTER_H_
#define QUANTD_SERVER_HTTP_ROUTER_H_

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/http/path_template.h"
#include "worker/common/status.h"

namespace quantd::server::http {

// At most this many query parameters per request; more is a 400.
inline constexpr size_t kMaxQueryParameters = 64;

struct Route {
  const google::protobuf::MethodDescriptor* method = nullptr;
  std::string http_method;  // "GET", "POST", ...
  PathTemplate path;
  bool body_is_request = false;  // body: "*"
};

// A refused request: the HTTP status, the quantd status (reason, field
// violations) rendered as the JSON error, and for 405 the Allow header.
struct RouteError {
  int http_status = 400;
  quantd::Status status;
  std::string allow;
};

// What the HTTP layer hands the router: the raw request target (path and
// query, not decoded), and for body routes the Content-Type and body.
struct HttpRequestView {
  absl::string_view method;
  absl::string_view target;
  absl::string_view content_type;
  absl::string_view body;
};

struct Resolved {
  const Route* route = nullptr;
  std::unique_ptr<google::protobuf::Message> request;
};

class Router {
 public:
  // INVALID_ARGUMENT naming the method when a rule cannot be served (an
  // unsupported template, a body other than "" or "*", a path variable
  // that is not a top-level singular string field).
  static quantd::StatusOr<Router> ForService(const google::protobuf::ServiceDescriptor* service);

  // The route for a method and target, without reading the body: 404 when
  // no template matches the path, 405 (with Allow) when only other methods'
  // do, 400 for a malformed path. The HTTP layer calls this before it reads
  // a body, so a body for a request refused anyway is never read.
  // nullptr (and `error` filled) when refused.
  const Route* Find(absl::string_view method, absl::string_view target, RouteError* error) const;

  // Find, then the request message from the path, query and body. All bad
  // query parameters (and bad path variables) are named in one 400.
  bool Resolve(const HttpRequestView& request, Resolved* out, RouteError* error) const;

  const std::vector<Route>& routes() const { return routes_; }

 private:
  std::vector<Route> routes_;
};

}  // namespace quantd::server::http

#endif  // QUANTD_SERVER_HTTP_ROUTER_H_
