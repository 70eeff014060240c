// Renders a job report from a Job's proto3 JSON (`quantctl -o json get
// NAME`) without a server: for saved jobs, the docs' example report and the
// report's browser test.
//
//   render_job_report JOB.json [html|md] > report.html
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "client/report/job_report.h"
#include "google/protobuf/util/json_util.h"

namespace {

// A job with every per-block metric of a large model is a few MiB.
constexpr std::streamoff kMaxJobJsonBytes = 64 << 20;

int Main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: render_job_report JOB.json [html|md]\n";
    return 2;
  }
  const std::string format = argc == 3 ? argv[2] : "html";
  if (format != "html" && format != "md") {
    std::cerr << "render_job_report: the format is html or md, not '" << format << "'\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary | std::ios::ate);
  if (!in) {
    std::cerr << "render_job_report: cannot read " << argv[1] << "\n";
    return 1;
  }
  if (in.tellg() > kMaxJobJsonBytes) {
    std::cerr << "render_job_report: " << argv[1] << " is larger than " << kMaxJobJsonBytes
              << " bytes\n";
    return 1;
  }
  in.seekg(0);
  std::stringstream text;
  text << in.rdbuf();
  quantd::v1::Job job;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(text.str(), &job, options);
  if (!status.ok()) {
    std::cerr << "render_job_report: " << argv[1] << " is not a quantd.v1.Job: " << status << "\n";
    return 1;
  }
  std::cout << (format == "html" ? quantd::report::RenderJobReportHtml(job)
                                 : quantd::report::RenderJobReportMarkdown(job));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
