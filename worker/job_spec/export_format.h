// quantd.v1.ExportFormat <-> the engine's exporter::ExportFormat: the one
// table both directions read (the spec check and ResolveJob going in, the
// worker's JobResult coming out).
#ifndef QUANTD_WORKER_JOB_SPEC_EXPORT_FORMAT_H_
#define QUANTD_WORKER_JOB_SPEC_EXPORT_FORMAT_H_

#include <optional>

#include "quantd/v1/job.pb.h"
#include "worker/export/artifact.h"

namespace quantd::job_spec {

// The engine's export format for a proto ExportFormat value; nullopt for
// EXPORT_FORMAT_UNSPECIFIED and unknown values.
std::optional<exporter::ExportFormat> ExportFormatFromProto(int format);
quantd::v1::ExportFormat ExportFormatToProto(exporter::ExportFormat format);

}  // namespace quantd::job_spec

#endif  // QUANTD_WORKER_JOB_SPEC_EXPORT_FORMAT_H_
