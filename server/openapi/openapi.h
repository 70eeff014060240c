// The OpenAPI 3.0.3 document of a gRPC service's HTTP/JSON face, generated
// from its descriptors: paths and methods from each method's google.api.http
// rule, schemas from the messages in protobuf's proto3 JSON mapping, errors
// as AIP-193 `{"error": {...}}` bodies, bearer-token security. quantd serves
// the QuantizationService document at /openapi.json (docs/sdk.md).
#ifndef QUANTD_SERVER_OPENAPI_OPENAPI_H_
#define QUANTD_SERVER_OPENAPI_OPENAPI_H_

#include <google/protobuf/descriptor.h>

#include <string>

namespace quantd::openapi {

// The document's `info` object.
struct DocumentInfo {
  std::string title;
  std::string version;
  // CommonMark; may be empty.
  std::string description;
};

// The document as JSON text. Methods without a google.api.http rule are
// gRPC only and left out. Mapping of the rules:
// - A path variable `{field}` becomes the parameter `{field}`. A variable
//   with a pattern, `{name=jobs/*}`, keeps the pattern's literals and names
//   each `*` after the literal before it, singular, plus "Id":
//   `/v1/jobs/{jobId}` (the request's `name` is then "jobs/<jobId>").
//   A final `**` matches the rest of the path, slashes included.
// - A custom verb (`:cancel`) stays literal after the last segment.
// - Without a body, every other top-level field of the request that is a
//   scalar, an enum, a repeated scalar or enum, or a map is a query
//   parameter under its proto field name (page_size), repeated ones repeat
//   the parameter, maps are `labels[KEY]=VALUE` (style deepObject).
// - body "*": the request message minus the path fields; body "field": that
//   field, the remaining fields as query parameters.
// - Server streaming: a text/event-stream response, one message (proto3
//   JSON) per event's `data:` line.
// Throws std::invalid_argument for a rule that cannot be mapped (a path
// variable naming no string or scalar field of the request, a wildcard
// outside a variable, an unknown body field, two methods on one path and
// HTTP method, ...).
std::string BuildDocument(const google::protobuf::ServiceDescriptor& service,
                          const DocumentInfo& info);

// The document of quantd.v1.QuantizationService that quantd serves.
std::string QuantizationServiceDocument();

}  // namespace quantd::openapi

#endif  // QUANTD_SERVER_OPENAPI_OPENAPI_H_
