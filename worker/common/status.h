// Status and StatusOr for the engine.
//
// The engine (everything under worker/ except the gRPC glue) builds on GPU
// hosts that have only a vendor LibTorch and CMake, so it cannot depend on
// Abseil. This header gives it the same vocabulary as absl::Status
// (canonical codes, ok(), code(), message()) plus what quantd's errors carry
// across the RPC boundary: an ErrorInfo reason (UPPER_SNAKE) and BadRequest
// field violations. It is the one status type of quantd, server included
// (docs/design.md, "Errors"); worker/job_spec/rpc_status.h converts it to and from
// google.rpc.Status in one place.
#ifndef QUANTD_WORKER_COMMON_STATUS_H_
#define QUANTD_WORKER_COMMON_STATUS_H_

#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace quantd {

// Canonical codes; values equal grpc::StatusCode and absl::StatusCode.
enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

const char* StatusCodeName(StatusCode code);

// One bad field of a request, as in google.rpc.BadRequest.FieldViolation.
struct FieldViolation {
  std::string
      field;  // dotted path, e.g. "quantization.config.global_quant_config.weight.group_size"
  std::string description;  // what is wrong and what would be accepted

  bool operator==(const FieldViolation& o) const {
    return field == o.field && description == o.description;
  }
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message, std::string reason = "")
      : code_(code), message_(std::move(message)), reason_(std::move(reason)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // ErrorInfo reason in UPPER_SNAKE, e.g. "INVALID_CONFIG". May be empty.
  const std::string& reason() const { return reason_; }
  const std::vector<FieldViolation>& violations() const { return violations_; }

  Status& WithReason(std::string reason) & {
    reason_ = std::move(reason);
    return *this;
  }
  Status&& WithReason(std::string reason) && {
    reason_ = std::move(reason);
    return std::move(*this);
  }
  Status& AddViolation(std::string field, std::string description) {
    violations_.push_back({std::move(field), std::move(description)});
    return *this;
  }
  // Prefixes the message with context, e.g. "loading model.safetensors: ".
  Status& Prepend(const std::string& context) {
    if (!ok()) message_ = context + message_;
    return *this;
  }

  // For a failure that is deliberately dropped (a best-effort ROLLBACK).
  void IgnoreError() const {}

  bool operator==(const Status& o) const {
    return code_ == o.code_ && message_ == o.message_ && reason_ == o.reason_ &&
           violations_ == o.violations_;
  }
  bool operator!=(const Status& o) const { return !(*this == o); }

  std::string ToString() const {
    if (ok()) return "OK";
    std::string s = std::string(StatusCodeName(code_)) + ": " + message_;
    for (const auto& v : violations_) s += "\n  " + v.field + ": " + v.description;
    return s;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string reason_;
  std::vector<FieldViolation> violations_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgumentError(std::string msg) {
  return Status(StatusCode::kInvalidArgument, std::move(msg));
}
inline Status NotFoundError(std::string msg) {
  return Status(StatusCode::kNotFound, std::move(msg));
}
inline Status FailedPreconditionError(std::string msg) {
  return Status(StatusCode::kFailedPrecondition, std::move(msg));
}
inline Status UnimplementedError(std::string msg) {
  return Status(StatusCode::kUnimplemented, std::move(msg));
}
inline Status InternalError(std::string msg) {
  return Status(StatusCode::kInternal, std::move(msg));
}
inline Status CancelledError(std::string msg) {
  return Status(StatusCode::kCancelled, std::move(msg));
}
inline Status DataLossError(std::string msg) {
  return Status(StatusCode::kDataLoss, std::move(msg));
}
inline Status OutOfRangeError(std::string msg) {
  return Status(StatusCode::kOutOfRange, std::move(msg));
}
inline Status ResourceExhaustedError(std::string msg) {
  return Status(StatusCode::kResourceExhausted, std::move(msg));
}
inline Status PermissionDeniedError(std::string msg) {
  return Status(StatusCode::kPermissionDenied, std::move(msg));
}
inline Status UnavailableError(std::string msg) {
  return Status(StatusCode::kUnavailable, std::move(msg));
}
inline Status AlreadyExistsError(std::string msg) {
  return Status(StatusCode::kAlreadyExists, std::move(msg));
}
inline Status AbortedError(std::string msg) { return Status(StatusCode::kAborted, std::move(msg)); }
inline Status DeadlineExceededError(std::string msg) {
  return Status(StatusCode::kDeadlineExceeded, std::move(msg));
}
inline Status UnauthenticatedError(std::string msg) {
  return Status(StatusCode::kUnauthenticated, std::move(msg));
}
inline Status UnknownError(std::string msg) { return Status(StatusCode::kUnknown, std::move(msg)); }

inline const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kCancelled:
      return "CANCELLED";
    case StatusCode::kUnknown:
      return "UNKNOWN";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kAborted:
      return "ABORTED";
    case StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case StatusCode::kInternal:
      return "INTERNAL";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kDataLoss:
      return "DATA_LOSS";
    case StatusCode::kUnauthenticated:
      return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

inline std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : v_(status) {  // NOLINT: implicit like absl
    if (status.ok()) v_ = Status(StatusCode::kInternal, "StatusOr built from an OK status");
  }
  StatusOr(Status&& status) : v_(std::move(status)) {  // NOLINT
    if (std::get<0>(v_).ok())
      v_ = Status(StatusCode::kInternal, "StatusOr built from an OK status");
  }
  StatusOr(const T& value) : v_(value) {}        // NOLINT
  StatusOr(T&& value) : v_(std::move(value)) {}  // NOLINT
  template <typename U, typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                                    !std::is_same_v<std::decay_t<U>, T> &&
                                                    !std::is_same_v<std::decay_t<U>, Status>>>
  StatusOr(U&& value) : v_(T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return v_.index() == 1; }
  // A reference, as absl::StatusOr gives, so that `x.status().violations()`
  // on a named StatusOr never reads a destroyed temporary.
  const Status& status() const& { return ok() ? OkRef() : std::get<0>(v_); }
  Status status() && { return ok() ? Status() : std::get<0>(std::move(v_)); }

  const T& value() const& { return std::get<1>(v_); }
  T& value() & { return std::get<1>(v_); }
  T&& value() && { return std::get<1>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  static const Status& OkRef() {
    static const Status* const ok = new Status();
    return *ok;
  }
  std::variant<Status, T> v_;
};

namespace status_internal {
inline Status AsStatus(const Status& s) { return s; }
template <typename T>
Status AsStatus(const StatusOr<T>& s) {
  return s.status();
}
}  // namespace status_internal

}  // namespace quantd

#define QD_STATUS_CONCAT_INNER_(a, b) a##b
#define QD_STATUS_CONCAT_(a, b) QD_STATUS_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define QD_RETURN_IF_ERROR(expr)                                             \
  do {                                                                       \
    ::quantd::Status qd_status_ = ::quantd::status_internal::AsStatus(expr); \
    if (!qd_status_.ok()) return qd_status_;                                 \
  } while (0)

// `QD_ASSIGN_OR_RETURN(auto x, F());` declares x from a StatusOr or returns.
#define QD_ASSIGN_OR_RETURN(lhs, expr) \
  QD_ASSIGN_OR_RETURN_IMPL_(QD_STATUS_CONCAT_(qd_statusor_, __LINE__), lhs, expr)
#define QD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#endif  // QUANTD_WORKER_COMMON_STATUS_H_
