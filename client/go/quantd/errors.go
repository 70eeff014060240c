package quantd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	protov1 "github.com/golang/protobuf/proto"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FieldViolation is one bad request field, e.g. Field
// "spec.quantization.scheme".
type FieldViolation struct {
	Field       string
	Description string
}

// Error is a call quantd refused or that failed, with the google.rpc details
// quantd puts in the status (the grpc-status-details-bin trailer). Every
// Client method returns its RPC errors as *Error; use errors.As to get it.
type Error struct {
	Code    codes.Code
	Message string
	// ErrorInfo.reason (UPPER_SNAKE, e.g. "INVALID_JOB_SPEC"); the code's
	// name when the status carried no ErrorInfo.
	Reason string
	// ErrorInfo.domain ("quantd") and metadata.
	Domain   string
	Metadata map[string]string
	// The BadRequest's violations, in the order quantd sent them.
	FieldViolations []FieldViolation
	// RetryInfo.retry_delay when the status carried one (HasRetryDelay).
	RetryDelay    time.Duration
	HasRetryDelay bool

	status *status.Status
	cause  error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s (reason %s)", codeName(e.Code), e.Message, e.Reason)
	for _, v := range e.FieldViolations {
		fmt.Fprintf(&b, "\n  %s: %s", v.Field, v.Description)
	}
	return b.String()
}

// GRPCStatus lets status.FromError and status.Code see the original status.
func (e *Error) GRPCStatus() *status.Status {
	if e.status == nil {
		return status.New(e.Code, e.Message)
	}
	return e.status
}

// Unwrap gives context.Canceled or context.DeadlineExceeded when the call
// ended because its context did, so errors.Is works on them.
func (e *Error) Unwrap() error { return e.cause }

// codeName is the code as the proto enum names it ("INVALID_ARGUMENT"), as
// the other quantd clients print it.
func codeName(c codes.Code) string {
	if name, ok := codeNames[c]; ok {
		return name
	}
	return fmt.Sprintf("CODE_%d", uint32(c))
}

var codeNames = map[codes.Code]string{
	codes.OK:                 "OK",
	codes.Canceled:           "CANCELLED",
	codes.Unknown:            "UNKNOWN",
	codes.InvalidArgument:    "INVALID_ARGUMENT",
	codes.DeadlineExceeded:   "DEADLINE_EXCEEDED",
	codes.NotFound:           "NOT_FOUND",
	codes.AlreadyExists:      "ALREADY_EXISTS",
	codes.PermissionDenied:   "PERMISSION_DENIED",
	codes.ResourceExhausted:  "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION",
	codes.Aborted:            "ABORTED",
	codes.OutOfRange:         "OUT_OF_RANGE",
	codes.Unimplemented:      "UNIMPLEMENTED",
	codes.Internal:           "INTERNAL",
	codes.Unavailable:        "UNAVAILABLE",
	codes.DataLoss:           "DATA_LOSS",
	codes.Unauthenticated:    "UNAUTHENTICATED",
}

// CodeName is the canonical name of a gRPC code ("INVALID_ARGUMENT"), the
// spelling of google.rpc.Code and of the other quantd clients.
func CodeName(c codes.Code) string { return codeName(c) }

// rawDetail is a google.protobuf.Any of either protobuf API generation:
// Debian's genproto holds github.com/golang/protobuf v1.3 messages, newer
// ones google.golang.org/protobuf messages; both have these getters.
type rawDetail struct {
	typeURL string
	value   []byte
}

const typePrefix = "type.googleapis.com/"

// AsError converts an error returned by a gRPC call into *Error. An error
// that is already an *Error is returned as is; nil stays nil.
func AsError(err error) error {
	return asError(nil, err)
}

func asError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var qe *Error
	if errors.As(err, &qe) {
		return qe
	}
	st, ok := status.FromError(err)
	if !ok {
		st = status.New(codes.Unknown, err.Error())
	}
	var details []rawDetail
	for _, d := range st.Proto().GetDetails() {
		details = append(details, rawDetail{d.GetTypeUrl(), d.GetValue()})
	}
	e := fromDetails(st.Code(), st.Message(), details)
	e.status = st
	if ctx != nil {
		e.cause = contextCause(ctx)
	}
	// A server that returns its context's error unconverted sends UNKNOWN.
	if e.cause != nil && e.Code == codes.Unknown {
		e.Code = contextCode(e.cause)
	}
	return e
}

func contextCode(err error) codes.Code {
	if errors.Is(err, context.DeadlineExceeded) {
		return codes.DeadlineExceeded
	}
	return codes.Canceled
}

// contextCause is ctx's error, or context.DeadlineExceeded once its deadline
// has passed even though its timer has not fired yet: under load the
// server's answer to the same deadline can arrive first.
func contextCause(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// FromJobError converts a FAILED (or CANCELLED with a reason) job's
// Job.Error into *Error; nil for a job without one.
func FromJobError(st *spb.Status) *Error {
	if st == nil {
		return nil
	}
	var details []rawDetail
	for _, d := range st.GetDetails() {
		details = append(details, rawDetail{d.GetTypeUrl(), d.GetValue()})
	}
	e := fromDetails(codes.Code(st.GetCode()), st.GetMessage(), details)
	e.status = status.New(e.Code, e.Message)
	return e
}

func fromDetails(code codes.Code, message string, details []rawDetail) *Error {
	e := &Error{Code: code, Message: message, Metadata: map[string]string{}}
	for _, d := range details {
		// An undecodable detail is skipped: the code and message still say
		// what happened, and a newer server may send kinds this client
		// does not know.
		switch strings.TrimPrefix(d.typeURL, typePrefix) {
		case "google.rpc.ErrorInfo":
			var info errdetails.ErrorInfo
			if protov1.Unmarshal(d.value, &info) == nil && e.Reason == "" {
				e.Reason, e.Domain = info.GetReason(), info.GetDomain()
				for k, v := range info.GetMetadata() {
					e.Metadata[k] = v
				}
			}
		case "google.rpc.BadRequest":
			var bad errdetails.BadRequest
			if protov1.Unmarshal(d.value, &bad) == nil {
				for _, v := range bad.GetFieldViolations() {
					e.FieldViolations = append(e.FieldViolations, FieldViolation{v.GetField(), v.GetDescription()})
				}
			}
		case "google.rpc.RetryInfo":
			var retry errdetails.RetryInfo
			if protov1.Unmarshal(d.value, &retry) == nil && retry.GetRetryDelay() != nil {
				delay := retry.GetRetryDelay()
				e.RetryDelay = time.Duration(delay.GetSeconds())*time.Second + time.Duration(delay.GetNanos())
				e.HasRetryDelay = true
			}
		}
	}
	if e.Reason == "" {
		e.Reason = codeName(code)
	}
	return e
}
