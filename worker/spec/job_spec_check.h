// Engine-side validation of a JobSpec, run by quantd at CreateJob (before the
// job is stored) and by the worker before it runs one.
//
// It knows what the engine can do: a field naming a feature the engine does
// not support is refused with UNIMPLEMENTED naming that field, never
// ignored; malformed values are INVALID_ARGUMENT with one field violation
// per bad field. Torch-free, so the frontend links it without LibTorch.
#ifndef QUANTD_WORKER_SPEC_JOB_SPEC_CHECK_H_
#define QUANTD_WORKER_SPEC_JOB_SPEC_CHECK_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "quantd/v1/job.pb.h"
#include "worker/common/status.h"
#include "worker/export/artifact.h"

namespace quantd::pipeline {

// OK, INVALID_ARGUMENT (reason INVALID_JOB_SPEC, every bad field listed as a
// violation with a path such as "spec.evaluation.n_ctx"), or UNIMPLEMENTED
// (reason FEATURE_NOT_BUILT) naming the first unsupported field.
//
// The quantization settings resolve through worker/config
// (config::ResolveQuantizationSettings: every preset, structured config and
// reference JSON, with all their violations at job-spec paths such as
// "spec.quantization.config.layer_quant_config[0].config.weight.group_size").
// When the model's config.json is readable here (a file:// model_uri), the
// config is also checked against the model's layers
// (config::ValidateSettingsForLayers: group sizes that do not divide a layer).
//
// The check has a time budget (steady clock), since the work on a config's
// name patterns grows with the model's layers: past it, the check stops and
// returns INVALID_ARGUMENT (reason INVALID_JOB_SPEC) with the violations
// found so far plus one on the field it was checking, "validation exceeded
// its budget of 2000 ms; ...". A budget of 0 or less means no limit.
inline constexpr std::chrono::milliseconds kDefaultSpecCheckBudget{2000};

Status CheckJobSpec(const quantd::v1::JobSpec& spec);

// The same, and appends to `warnings` what is suspicious but not an error
// (a layer / exclude glob that matches no layer of the model), for the
// job's events.
Status CheckJobSpec(const quantd::v1::JobSpec& spec, std::vector<std::string>* warnings,
                    std::chrono::milliseconds budget = kDefaultSpecCheckBudget);

// The engine's export format for a proto ExportFormat value; nullopt for
// EXPORT_FORMAT_UNSPECIFIED and unknown values.
std::optional<exporter::ExportFormat> ExportFormatFromProto(int format);
quantd::v1::ExportFormat ExportFormatToProto(exporter::ExportFormat format);

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_SPEC_JOB_SPEC_CHECK_H_
