// quantd's HTTP/JSON face (--http-listen): serves the google.api.http routes
// of QuantizationService with cpp-httplib and forwards each request to
// quantd's own gRPC server over its in-process channel, so authentication,
// validation, quotas and metrics are those of the gRPC API. Server-streaming
// methods (WatchJob) become server-sent events. docs/http_api.md describes
// the face; the limits below are its numbers.
#ifndef QUANTD_SERVER_HTTP_HTTP_GATEWAY_H_
#define QUANTD_SERVER_HTTP_HTTP_GATEWAY_H_

#include <google/protobuf/descriptor.h>
#include <grpcpp/channel.h>

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "worker/common/status.h"

namespace quantd::server::http {

struct HttpGatewayOptions {
  // host:port; port 0 picks a free one (HttpGateway::port()).
  std::string listen;
  // Largest request body; quantd passes its gRPC --max-request-bytes.
  size_t max_body_bytes = 16 << 20;
  // Connections are served by this many threads; more wait in the queue.
  int threads = 32;
  // Event streams open at once (each holds a thread while it lasts); more
  // are refused with 429 so streams never take every thread.
  int max_streams = 16;
  absl::Duration read_timeout = absl::Seconds(10);
  absl::Duration write_timeout = absl::Seconds(10);
  // An idle keep-alive connection is closed after this long.
  absl::Duration keep_alive_timeout = absl::Seconds(3);
  // Deadline of each unary call.
  absl::Duration call_deadline = absl::Seconds(60);
  // A ": keep-alive" comment is sent on a quiet event stream this often.
  absl::Duration heartbeat = absl::Seconds(15);
  // How long an event stream waits for its first event (or its end) before
  // it commits to 200: errors until then are JSON errors with their HTTP
  // status, later ones an `event: error`.
  absl::Duration first_event_wait = absl::Seconds(2);
  // Served as GET /openapi.json (application/json) when not empty.
  std::string openapi_json;
};

// Header limits checked on every request (cpp-httplib itself bounds the
// request line at 8192 bytes and each header line at 8192 bytes).
inline constexpr size_t kMaxHeaderCount = 64;
inline constexpr size_t kMaxHeaderBytes = 32 << 10;

class HttpGateway {
 public:
  // Binds and starts serving `service`'s routes over `channel`.
  // INVALID_ARGUMENT for a bad listen address or route, UNAVAILABLE when
  // the address cannot be bound.
  static quantd::StatusOr<std::unique_ptr<HttpGateway>> Start(
      std::shared_ptr<grpc::Channel> channel, const google::protobuf::ServiceDescriptor* service,
      HttpGatewayOptions options);
  ~HttpGateway();  // Stop()

  // The bound port.
  int port() const;
  // Stops accepting, ends open event streams (an `event: error` with
  // UNAVAILABLE), and waits for the serving threads. Idempotent.
  void Stop();

 private:
  class Impl;
  explicit HttpGateway(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace quantd::server::http

#endif  // QUANTD_SERVER_HTTP_HTTP_GATEWAY_H_
