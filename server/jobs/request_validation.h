// The server's own checks of client requests: the envelope (request ids,
// names, labels, devices, paging), not the quantization settings, which the
// engine's torch-free CheckJobSpec owns. Each function returns every
// problem it finds as a field violation, so one INVALID_ARGUMENT names all
// bad fields at once.
#ifndef QUANTD_SERVER_JOBS_REQUEST_VALIDATION_H_
#define QUANTD_SERVER_JOBS_REQUEST_VALIDATION_H_

#include <vector>

#include "absl/strings/string_view.h"
#include "quantd/v1/quantization_service.pb.h"
#include "quantd/v1/worker_service.pb.h"
#include "server/common/errors.h"

namespace quantd::server {

inline constexpr int kMaxRequestIdLength = 128;
inline constexpr int kMaxLabels = 64;
inline constexpr int kMaxLabelKeyLength = 63;
inline constexpr int kMaxLabelValueLength = 256;
inline constexpr int kMaxMaxAttempts = 100;
inline constexpr int kDefaultPageSize = 50;
inline constexpr int kMaxPageSize = 500;

// Sizes quantd bounds so that whatever it stores can be delivered: every
// Job fits well inside the 4 MiB that gRPC clients (and workers) receive by
// default, whatever a submitter or a worker sends (docs/server.md,
// "Limits"). Bytes of the serialized protobuf.
//
// A JobSpec, at CreateJob.
inline constexpr size_t kMaxJobSpecBytes = 256 << 10;
// One event a worker reports (ReportEvents); WatchJob sends each as one
// message.
inline constexpr size_t kMaxEventBytes = 1 << 20;
// Job.progress as a worker sets it (Heartbeat, progress events).
inline constexpr size_t kMaxProgressBytes = 16 << 10;
// The JobResult of CompleteJob or FailJob.
inline constexpr size_t kMaxResultBytes = 2 << 20;
// The google.rpc.Status of FailJob.
inline constexpr size_t kMaxErrorBytes = 64 << 10;
// WorkerInfo.id (stored as Job.worker).
inline constexpr size_t kMaxWorkerIdBytes = 256;
// What a worker receives when LeaseJobRequest.max_response_bytes is 0
// (gRPC's default receive limit), and the least it may declare (a job at
// its largest, spec included, fits in it).
inline constexpr int64_t kDefaultWorkerReceiveBytes = 4 << 20;
inline constexpr int64_t kMinWorkerReceiveBytes = 1 << 20;
// A ListJobs page stops growing past this (it always holds one job).
inline constexpr size_t kMaxListResponseBytes = 3 << 20;

// request_id, spec presence, spec.model_uri, spec.device, spec.labels,
// spec.max_attempts.
std::vector<FieldViolation> ValidateCreateJobRequest(const v1::CreateJobRequest& request);

// A label key: 1-63 of [a-z0-9._/-], starting with a letter or digit.
// Empty when fine, else what is wrong.
std::string CheckLabelKey(absl::string_view key);
std::string CheckLabelValue(absl::string_view value);

// "", "cpu", "cuda" or "cuda:N" (a job's device). Empty when fine.
std::string CheckJobDevice(absl::string_view device);
// "cpu", "cuda" or "cuda:N" (a worker's device). Empty when fine.
std::string CheckWorkerDevice(absl::string_view device);

// Empty when `spec` serializes to at most kMaxJobSpecBytes; otherwise the
// fields that make it large, each with its size: every field of at least
// 16 KiB, descending into nested messages while one of their own fields is
// that large (e.g. "spec.quantization.quark_json").
std::vector<FieldViolation> CheckJobSpecSize(const v1::JobSpec& spec);

// page_size (>= 0), order_by, states, label filter, view. Does not look at
// the page token (see page_token.h).
std::vector<FieldViolation> ValidateListJobsRequest(const v1::ListJobsRequest& request);

// The effective page size: the default for 0, at most kMaxPageSize.
int EffectivePageSize(int requested);

// True for "create_time asc" (and "create_time"); false for the default
// "create_time desc" and "". Only call on validated requests.
bool OrderAscending(absl::string_view order_by);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_JOBS_REQUEST_VALIDATION_H_
