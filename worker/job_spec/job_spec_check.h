// Engine-side validation of a JobSpec: the checks ResolveJob
// (worker/job_spec/resolve_job.h) runs, so quantd at CreateJob (before the job
// is stored) and the worker before it runs one give the same answer.
//
// It knows what the engine can do: a field naming a feature the engine does
// not support is refused with UNIMPLEMENTED naming that field, never
// ignored; malformed values are INVALID_ARGUMENT with one field violation
// per bad field. Torch-free, so the frontend links it without LibTorch.
#ifndef QUANTD_WORKER_JOB_SPEC_JOB_SPEC_CHECK_H_
#define QUANTD_WORKER_JOB_SPEC_JOB_SPEC_CHECK_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "quantd/v1/job.pb.h"
#include "worker/common/status.h"
#include "worker/config/quant_config.h"

namespace quantd::job_spec {

// OK, INVALID_ARGUMENT (reason INVALID_JOB_SPEC, every bad field listed as a
// violation with a path such as "spec.evaluation.n_ctx"), or UNIMPLEMENTED
// (reason FEATURE_NOT_BUILT) naming the first unsupported field.
//
// The quantization settings resolve through config::ResolveQuantizationSettings
// (worker/job_spec/config_proto.h: every preset, structured config and
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

// `quantization` is what config::ResolveQuantizationSettings made of
// spec.quantization, resolved once by the caller: the config, or the
// settings' violations, which become the spec's. Appends to `warnings` what
// is suspicious but not an error (a layer / exclude glob that matches no
// layer of the model, a config key that takes no effect), for the job's
// events.
Status CheckResolvedJobSpec(const quantd::v1::JobSpec& spec,
                            const StatusOr<config::QuantConfig>& quantization,
                            std::vector<std::string>* warnings,
                            std::chrono::milliseconds budget = kDefaultSpecCheckBudget);

// INVALID_ARGUMENT (reason INVALID_JOB_SPEC) carrying every violation, its
// message naming the first and the count.
Status SpecViolationsStatus(const std::vector<FieldViolation>& violations);

// spec.auto_precision: at most this many candidates; the one that keeps a
// layer in float.
inline constexpr int kMaxAutoPrecisionCandidates = 8;
inline constexpr char kFloatCandidate[] = "float";
// spec.auto_precision.cost_per_weight: the largest cost a table may give.
inline constexpr double kMaxCostPerWeight = 1e6;

}  // namespace quantd::job_spec

#endif  // QUANTD_WORKER_JOB_SPEC_JOB_SPEC_CHECK_H_
