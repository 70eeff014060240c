// The job flags shared by `quantctl submit` and quantd-quantize (the local
// runner): --model, --scheme/--config, calibration, evaluation and accuracy
// gate, export, labels and attempts, turned into a quantd.v1.JobSpec the same
// way for both, so a served run and a local run of the same flags are the
// same job. Plain paths become absolute file:// URIs.
#ifndef QUANTD_CLIENT_CLI_COMMON_JOB_SPEC_FLAGS_H_
#define QUANTD_CLIENT_CLI_COMMON_JOB_SPEC_FLAGS_H_

#include <set>
#include <string>

#include "worker/common/status.h"
#include "client/cli_common/args.h"
#include "quantd/v1/job.pb.h"

namespace quantd::cli_common {

// The job flags both binaries take (ParseArgs' two sets): those taking a
// value, and the booleans. quantctl submit adds --device, --label and
// --max-attempts; quantd-quantize adds --device and its local-run flags.
const std::set<std::string>& JobSpecValueFlags();
const std::set<std::string>& JobSpecBoolFlags();

// The usage lines of JobSpecValueFlags and JobSpecBoolFlags, one flag a line
// (a long help continues on the next), each line indented by `indent`
// spaces and the help starting 24 columns further: both binaries print
// this one text in their --help.
std::string JobSpecFlagsUsage(int indent);

// Fills `spec` from the job flags of `a`, and from --label and
// --max-attempts where the caller takes them (device excepted: its default
// differs between the callers). INVALID_ARGUMENT naming the flag for a
// missing or malformed one, NOT_FOUND for an unreadable --config file.
// Whether the spec is acceptable is the engine's CheckJobSpec's business.
quantd::Status FillJobSpec(const ParsedArgs& a, quantd::v1::JobSpec* spec);

// "hf", "hf-quark", "gguf", "onnx" or "compressed-tensors" (and the aliases
// "hf-fake-quantized", "quark").
quantd::StatusOr<quantd::v1::ExportFormat> ParseExportFormatFlag(const std::string& name);

// "f32", "f16" or "bf16": --gguf-float-type.
quantd::StatusOr<quantd::v1::GgufFloatType> ParseGgufFloatTypeFlag(const std::string& name);

// "concat" or "random-windows" (and the alias "random_windows").
quantd::StatusOr<quantd::v1::SamplingMode> ParseCalibSamplingFlag(const std::string& name);
// --calib-dtype: float32 or bfloat16.
quantd::StatusOr<quantd::v1::ComputeDtype> ParseCalibDtypeFlag(const std::string& name);
// --target: any, vllm.
quantd::StatusOr<quantd::v1::ServingTarget> ParseTargetFlag(const std::string& name);

// A whole file; NOT_FOUND "cannot read <path>" when it cannot be opened.
quantd::StatusOr<std::string> ReadFileText(const std::string& path);

// Plain paths become absolute file:// URIs (relative to the working
// directory, "." and ".." resolved lexically, trailing slashes dropped, and
// '%', '?', '#' percent-encoded so that quantd's URI parser reads back the
// same path); URIs and "" pass through.
std::string ToUri(const std::string& path_or_uri);

}  // namespace quantd::cli_common

#endif  // QUANTD_CLIENT_CLI_COMMON_JOB_SPEC_FLAGS_H_
