// The job report: what a job did and how well, for people to look at.
// RenderJobReportHtml is one self-contained HTML file (inline CSS and SVG
// charts, no scripts, fonts or external references; a Content-Security-
// Policy forbids loading any) and RenderJobReportMarkdown the same facts as
// Markdown text. Both are pure functions of the Job as GetJob returns it
// (the FULL view), used by `quantctl report`.
#ifndef QUANTD_CLIENT_REPORT_JOB_REPORT_H_
#define QUANTD_CLIENT_REPORT_JOB_REPORT_H_

#include <string>

#include "quantd/v1/job.pb.h"

namespace quantd::report {

std::string RenderJobReportHtml(const quantd::v1::Job& job);
std::string RenderJobReportMarkdown(const quantd::v1::Job& job);

// A layer's name without its block prefix: "model.layers.3.self_attn.q_proj"
// is "self_attn.q_proj" (the heatmap's rows); a name without a numeric
// segment is kept whole.
std::string LayerRole(const std::string& name);

}  // namespace quantd::report

#endif  // QUANTD_CLIENT_REPORT_JOB_REPORT_H_
