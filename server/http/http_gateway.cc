#include "server/http/http_gateway.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "server/common/errors.h"
#include "server/grpc/status_conversion.h"
#include "server/http/http_errors.h"
#include "server/http/router.h"

namespace quantd::server::http {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

grpc::ByteBuffer ToByteBuffer(const Message& message) {
  std::string bytes = message.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

bool FromByteBuffer(const grpc::ByteBuffer& buffer, Message* message) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return false;
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return message->ParseFromString(bytes);
}

std::unique_ptr<Message> NewMessage(const google::protobuf::Descriptor* type) {
  return std::unique_ptr<Message>(
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(type)->New());
}

std::chrono::system_clock::time_point Deadline(absl::Duration d) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(d);
}

// One server-streaming call over the generic stub (a bidi call that sends
// one message). The HTTP thread takes events one at a time, so at most one
// read is outstanding: a slow HTTP client slows the gRPC stream rather than
// filling memory.
class StreamCall : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  enum class Next { kEvent, kDone, kTimeout };

  StreamCall(const std::string& authorization, grpc::ByteBuffer request)
      : request_(std::move(request)) {
    if (!authorization.empty()) context_.AddMetadata("authorization", authorization);
  }

  void Start(grpc::GenericStub* stub, const std::string& method) {
    stub->PrepareBidiStreamingCall(&context_, method, grpc::StubOptions(), this);
    StartWriteLast(&request_, grpc::WriteOptions());
    StartRead(&read_);
    StartCall();
  }

  // The next event (and starts reading the one after), the end of the call,
  // or nothing within `timeout`.
  Next Wait(absl::Duration timeout, grpc::ByteBuffer* event) {
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this] { return has_event_ || done_; };
      mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
      if (!has_event_) return done_ ? Next::kDone : Next::kTimeout;
      *event = std::move(read_);
      read_.Clear();
      has_event_ = false;
    }
    StartRead(&read_);  // outside the lock: the reaction may run inline
    return Next::kEvent;
  }

  void Cancel() { context_.TryCancel(); }

  // Blocks until gRPC is done with this reactor (it may then be freed).
  const grpc::Status& WaitDone() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
    return status_;
  }

  void OnReadDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    if (ok) has_event_ = true;
  }
  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    status_ = status;
    done_ = true;
  }

 private:
  grpc::ClientContext context_;
  grpc::ByteBuffer request_;
  absl::Mutex mu_;
  grpc::ByteBuffer read_;
  bool has_event_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

quantd::StatusOr<std::pair<std::string, int>> ParseListen(const std::string& listen) {
  size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return quantd::InvalidArgumentError(
        absl::StrCat("--http-listen must be HOST:PORT (port 0 picks one), got \"", listen, "\""));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "0.0.0.0";
  return std::make_pair(host, port);
}

}  // namespace

class HttpGateway::Impl {
 public:
  Impl(std::shared_ptr<grpc::Channel> channel, Router router, HttpGatewayOptions options)
      : channel_(std::move(channel)),
        stub_(channel_),
        router_(std::move(router)),
        options_(std::move(options)) {}

  quantd::Status Start() {
    QD_ASSIGN_OR_RETURN(auto host_port, ParseListen(options_.listen));
    Install();
    const auto& [host, port] = host_port;
    port_ =
        port == 0 ? server_.bind_to_any_port(host) : (server_.bind_to_port(host, port) ? port : -1);
    if (port_ <= 0) {
      return MakeError(quantd::StatusCode::kUnavailable, "LISTEN_FAILED",
                       absl::StrCat("cannot listen on ", options_.listen,
                                    " for HTTP (in use, or not a local address?)"));
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() only takes effect once the accept loop runs; wait for it so
    // that an early Stop() cannot miss it.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return quantd::OkStatus();
  }

  void Stop() {
    if (!thread_.joinable()) return;
    stopping_ = true;
    server_.stop();
    thread_.join();
  }

  int port() const { return port_; }

 private:
  void Install() {
    const int threads = std::max(1, options_.threads);
    server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server_.set_read_timeout(absl::ToChronoMilliseconds(options_.read_timeout));
    server_.set_write_timeout(absl::ToChronoMilliseconds(options_.write_timeout));
    server_.set_keep_alive_timeout(
        std::max<time_t>(1, absl::ToInt64Seconds(options_.keep_alive_timeout)));
    server_.set_keep_alive_max_count(100);
    server_.set_payload_max_length(options_.max_body_bytes);
    server_.set_tcp_nodelay(true);
    server_.set_pre_routing_handler(
        [this](const httplib::Request& req, httplib::Response& res) { return PreRoute(req, res); });
    // Only requests that PreRoute matched to a body route get here, after
    // cpp-httplib has read the body (at most max_body_bytes, else 413).
    auto with_body = [this](const httplib::Request& req, httplib::Response& res) {
      Serve(req, res);
    };
    server_.Post(".*", with_body);
    server_.Put(".*", with_body);
    server_.Patch(".*", with_body);
    server_.Delete(".*", with_body);
    server_.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request&, httplib::Response& res) {
          if (!res.body.empty() || res.content_provider_) {
            return httplib::Server::HandlerResponse::Unhandled;
          }
          ReplyLibraryError(res);
          return httplib::Server::HandlerResponse::Handled;
        }));
    server_.set_exception_handler(
        [this](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
          Reply(res, 500,
                MakeError(quantd::StatusCode::kInternal, "INTERNAL",
                          "the HTTP face failed on this request"));
        });
  }

  void Reply(httplib::Response& res, int http_status, const quantd::Status& status) {
    ReplyGrpc(res, http_status, ToGrpcStatus(status));
  }
  void ReplyGrpc(httplib::Response& res, int http_status, const grpc::Status& status) {
    res.status = http_status;
    // RFC 9110 11.6.1: a 401 names the scheme it wants.
    if (http_status == 401) res.set_header("WWW-Authenticate", "Bearer");
    res.set_content(ErrorJson(http_status, status), "application/json");
  }
  void ReplyRouteError(httplib::Response& res, const RouteError& error) {
    if (!error.allow.empty()) res.set_header("Allow", error.allow);
    Reply(res, error.http_status, error.status);
  }

  // Errors cpp-httplib answers itself, in the same JSON shape.
  void ReplyLibraryError(httplib::Response& res) {
    const int s = res.status;
    quantd::Status status;
    if (s == 413) {
      status = MakeError(
          quantd::StatusCode::kInvalidArgument, "REQUEST_TOO_LARGE",
          absl::StrCat("the request body is larger than ", options_.max_body_bytes, " bytes"));
    } else if (s == 414) {
      status = MakeError(quantd::StatusCode::kInvalidArgument, "URI_TOO_LONG",
                         "the request line is longer than 8192 bytes");
    } else if (s == 404) {
      status = MakeError(quantd::StatusCode::kNotFound, "ROUTE_NOT_FOUND", "no such route");
    } else if (s >= 400 && s < 500) {
      status = MakeError(quantd::StatusCode::kInvalidArgument, "MALFORMED_HTTP_REQUEST",
                         "the HTTP request is malformed");
    } else {
      status = MakeError(quantd::StatusCode::kInternal, "INTERNAL",
                         "the HTTP face failed on this request");
    }
    Reply(res, s, status);
  }

  httplib::Server::HandlerResponse PreRoute(const httplib::Request& req, httplib::Response& res) {
    size_t header_bytes = 0;
    for (const auto& [name, value] : req.headers) header_bytes += name.size() + value.size() + 4;
    if (req.headers.size() > kMaxHeaderCount || header_bytes > kMaxHeaderBytes) {
      Reply(res, 431,
            MakeError(quantd::StatusCode::kInvalidArgument, "HEADERS_TOO_LARGE",
                      absl::StrCat("more than ", kMaxHeaderCount, " headers or ", kMaxHeaderBytes,
                                   " bytes of headers")));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.target == "/openapi.json" && !options_.openapi_json.empty()) {
      if (req.method != "GET") {
        res.set_header("Allow", "GET");
        Reply(res, 405,
              MakeError(quantd::StatusCode::kUnimplemented, "METHOD_NOT_ALLOWED",
                        "only GET is allowed here"));
      } else {
        res.set_content(options_.openapi_json, "application/json");
      }
      return httplib::Server::HandlerResponse::Handled;
    }
    RouteError error;
    const Route* route = router_.Find(req.method, req.target, &error);
    if (route == nullptr) {
      ReplyRouteError(res, error);
      return httplib::Server::HandlerResponse::Handled;
    }
    // A request with neither Content-Length nor chunked encoding has no
    // body (RFC 9112 6.3); cpp-httplib would wait for EOF instead.
    if (route->body_is_request &&
        (req.has_header("Content-Length") || req.has_header("Transfer-Encoding"))) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    Serve(req, res);
    return httplib::Server::HandlerResponse::Handled;
  }

  // The Authorization header as the gRPC `authorization` metadata; false
  // (and a 400) for one gRPC metadata cannot carry.
  bool Authorization(const httplib::Request& req, httplib::Response& res, std::string* out) {
    const size_t count = req.get_header_value_count("Authorization");
    if (count == 0) return true;
    std::string value = req.get_header_value("Authorization");
    bool printable = count == 1;
    for (char c : value) printable = printable && c >= 0x20 && c < 0x7f;
    if (!printable) {
      Reply(res, 400,
            InvalidRequestError({{"Authorization", "one header of printable ASCII is expected"}}));
      return false;
    }
    *out = std::move(value);
    return true;
  }

  void Serve(const httplib::Request& req, httplib::Response& res) {
    const std::string content_type = req.get_header_value("Content-Type");
    HttpRequestView view{req.method, req.target, content_type, req.body};
    Resolved resolved;
    RouteError error;
    if (!router_.Resolve(view, &resolved, &error)) {
      ReplyRouteError(res, error);
      return;
    }
    std::string authorization;
    if (!Authorization(req, res, &authorization)) return;
    const google::protobuf::MethodDescriptor* method = resolved.route->method;
    const std::string path = absl::StrCat("/", method->service()->full_name(), "/", method->name());
    if (method->server_streaming()) {
      Stream(req, res, path, method, std::move(resolved.request), authorization);
    } else {
      Unary(res, path, method, *resolved.request, authorization);
    }
  }

  void Unary(httplib::Response& res, const std::string& path,
             const google::protobuf::MethodDescriptor* method, const Message& request,
             const std::string& authorization) {
    grpc::ClientContext context;
    context.set_deadline(Deadline(options_.call_deadline));
    if (!authorization.empty()) context.AddMetadata("authorization", authorization);
    grpc::ByteBuffer request_bytes = ToByteBuffer(request), response_bytes;
    absl::Notification done;
    grpc::Status status;
    stub_.UnaryCall(&context, path, grpc::StubOptions(), &request_bytes, &response_bytes,
                    [&](grpc::Status s) {
                      status = std::move(s);
                      done.Notify();
                    });
    done.WaitForNotification();
    if (!status.ok()) {
      ReplyGrpc(res, HttpStatusForCode(status.error_code()), status);
      return;
    }
    std::unique_ptr<Message> response = NewMessage(method->output_type());
    std::string json;
    if (!FromByteBuffer(response_bytes, response.get()) ||
        !google::protobuf::util::MessageToJsonString(*response, &json).ok()) {
      Reply(res, 500,
            MakeError(quantd::StatusCode::kInternal, "INTERNAL",
                      "the response could not be converted to JSON"));
      return;
    }
    res.status = 200;
    res.set_content(json, "application/json");
  }

  // `id: <sequence>` (when the event has an int64 `sequence`) and one
  // `data:` line of proto3 JSON.
  std::string FormatEvent(const google::protobuf::MethodDescriptor* method,
                          const grpc::ByteBuffer& bytes) {
    std::unique_ptr<Message> event = NewMessage(method->output_type());
    std::string json;
    if (!FromByteBuffer(bytes, event.get()) ||
        !google::protobuf::util::MessageToJsonString(*event, &json).ok()) {
      return ErrorEvent(ToGrpcStatus(MakeError(quantd::StatusCode::kInternal, "INTERNAL",
                                               "an event could not be converted to JSON")));
    }
    std::string out;
    const FieldDescriptor* seq = event->GetDescriptor()->FindFieldByName("sequence");
    if (seq != nullptr && seq->cpp_type() == FieldDescriptor::CPPTYPE_INT64 &&
        !seq->is_repeated()) {
      absl::StrAppend(&out, "id: ", event->GetReflection()->GetInt64(*event, seq), "\n");
    }
    absl::StrAppend(&out, "data: ", json, "\n\n");
    return out;
  }

  static std::string ErrorEvent(const grpc::Status& status) {
    return absl::StrCat(
        "event: error\ndata: ", ErrorJson(HttpStatusForCode(status.error_code()), status), "\n\n");
  }

  void Stream(const httplib::Request& req, httplib::Response& res, const std::string& path,
              const google::protobuf::MethodDescriptor* method, std::unique_ptr<Message> request,
              const std::string& authorization) {
    // Last-Event-ID (an EventSource reconnecting) resumes after that event.
    const FieldDescriptor* after = request->GetDescriptor()->FindFieldByName("after_sequence");
    if (req.has_header("Last-Event-ID") && after != nullptr &&
        after->cpp_type() == FieldDescriptor::CPPTYPE_INT64) {
      int64_t last = -1;
      if (req.get_header_value_count("Last-Event-ID") != 1 ||
          !absl::SimpleAtoi(req.get_header_value("Last-Event-ID"), &last) || last < 0) {
        Reply(res, 400,
              InvalidRequestError(
                  {{"Last-Event-ID", "must be one non-negative event id (sequence)"}}));
        return;
      }
      request->GetReflection()->SetInt64(request.get(), after, last);
    }
    if (streams_.fetch_add(1) >= options_.max_streams) {
      streams_.fetch_sub(1);
      Reply(res, 429,
            MakeError(quantd::StatusCode::kResourceExhausted, "HTTP_STREAMS_EXHAUSTED",
                      absl::StrCat("this quantd already serves ", options_.max_streams,
                                   " HTTP event streams; retry later")));
      return;
    }
    auto call = std::make_shared<StreamCall>(authorization, ToByteBuffer(*request));
    call->Start(&stub_, path);
    auto first = std::make_shared<grpc::ByteBuffer>();
    StreamCall::Next next = call->Wait(options_.first_event_wait, first.get());
    if (next == StreamCall::Next::kDone) {
      const grpc::Status& status = call->WaitDone();
      if (!status.ok()) {
        streams_.fetch_sub(1);
        ReplyGrpc(res, HttpStatusForCode(status.error_code()), status);
        return;
      }
    }
    auto has_first = std::make_shared<bool>(next == StreamCall::Next::kEvent);
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, call, first, has_first, method](size_t, httplib::DataSink& sink) {
          return Pump(*call, method, *has_first ? first.get() : nullptr, sink);
        },
        [this, call](bool) {
          // However the response ended, the call ends before its slot frees.
          call->Cancel();
          call->WaitDone();
          streams_.fetch_sub(1);
        });
  }

  // Writes the stream until the call ends (true), the client goes away or
  // a write times out (false: cpp-httplib closes the connection).
  bool Pump(StreamCall& call, const google::protobuf::MethodDescriptor* method,
            const grpc::ByteBuffer* first, httplib::DataSink& sink) {
    auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
    auto give_up = [&] {
      call.Cancel();
      return false;
    };
    if (first != nullptr && !write(FormatEvent(method, *first))) return give_up();
    absl::Time last_write = absl::Now();
    // A short wait slice so that Stop() is noticed promptly.
    constexpr absl::Duration kSlice = absl::Milliseconds(250);
    while (true) {
      if (stopping_) {
        call.Cancel();
        write(ErrorEvent(ToGrpcStatus(MakeError(quantd::StatusCode::kUnavailable, "SHUTTING_DOWN",
                                                "quantd is shutting down"))));
        sink.done();
        return true;
      }
      grpc::ByteBuffer event;
      const absl::Duration quiet = absl::Now() - last_write;
      switch (call.Wait(
          std::min(kSlice, std::max(absl::ZeroDuration(), options_.heartbeat - quiet)), &event)) {
        case StreamCall::Next::kEvent:
          if (!write(FormatEvent(method, event))) return give_up();
          last_write = absl::Now();
          break;
        case StreamCall::Next::kDone: {
          const grpc::Status& status = call.WaitDone();
          if (!status.ok()) write(ErrorEvent(status));
          sink.done();
          return true;
        }
        case StreamCall::Next::kTimeout:
          if (absl::Now() - last_write >= options_.heartbeat) {
            if (!write(": keep-alive\n\n")) return give_up();
            last_write = absl::Now();
          }
          break;
      }
    }
  }

  std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
  Router router_;
  HttpGatewayOptions options_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> streams_{0};
};

quantd::StatusOr<std::unique_ptr<HttpGateway>> HttpGateway::Start(
    std::shared_ptr<grpc::Channel> channel, const google::protobuf::ServiceDescriptor* service,
    HttpGatewayOptions options) {
  if (service == nullptr) return quantd::InvalidArgumentError("no service to serve over HTTP");
  QD_ASSIGN_OR_RETURN(Router router, Router::ForService(service));
  // cpp-httplib writes with plain send(): a client that went away must not
  // kill quantd with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  auto impl = std::make_unique<Impl>(std::move(channel), std::move(router), std::move(options));
  QD_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<HttpGateway>(new HttpGateway(std::move(impl)));
}

HttpGateway::HttpGateway(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpGateway::~HttpGateway() { Stop(); }
int HttpGateway::port() const { return impl_->port(); }
void HttpGateway::Stop() { impl_->Stop(); }

}  // namespace quantd::server::http
