// spec.export.target at CreateJob (and in the worker's own check of a job):
// under SERVING_TARGET_VLLM, every export format must be one vLLM reads and
// every Linear of the model must be one vLLM's loader serves and decodes as
// the job quantized it (worker/export/serving_target.h has the rules).
// Torch-free.
#ifndef QUANTD_WORKER_JOB_SPEC_SERVING_CHECK_H_
#define QUANTD_WORKER_JOB_SPEC_SERVING_CHECK_H_

#include <optional>
#include <vector>

#include "quantd/v1/job.pb.h"
#include "worker/common/deadline.h"
#include "worker/common/status.h"
#include "worker/config/quant_config.h"
#include "worker/export/artifact.h"

namespace quantd::job_spec {

// For a job under SERVING_TARGET_VLLM: for each of `formats` (the vLLM
// formats it asks for that can hold its config), one violation on the
// quantization's source field ("spec.quantization.scheme", ".config" or
// ".quark_json") listing every problem and the presets vLLM would serve in
// that format for this model with the job's other settings; the default
// export (no format) refused on "spec.export.formats". Trying every preset
// stops at `deadline` (the CreateJob check's budget; the message says so).
// `layers` are the
// model's Linears (nullopt when its config.json could not be read: each
// config entry is checked alone, without shapes, and the export checks the
// shapes before it writes). Empty for SERVING_TARGET_ANY.
std::vector<FieldViolation> CheckServingTarget(
    const quantd::v1::JobSpec& spec, const config::QuantConfig& resolved,
    const std::vector<exporter::ExportFormat>& formats,
    const std::optional<std::vector<config::LayerInfo>>& layers, const Deadline& deadline);

// "target vllm: vLLM serves hf_quark and compressed_tensors exports; gguf is for llama.cpp", for a
// format vLLM does not read.
std::string FormatNotServed(exporter::ExportFormat format);

}  // namespace quantd::job_spec

#endif  // QUANTD_WORKER_JOB_SPEC_SERVING_CHECK_H_
