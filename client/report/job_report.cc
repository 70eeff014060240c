#include "client/report/job_report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli_common/render.h"
#include "client/report/svg_chart.h"
#include "google/protobuf/util/time_util.h"

namespace quantd::report {
namespace {

using quantd::v1::Job;
using quantd::v1::Metrics;

// The layers whose input ranges the report shows (the widest first).
constexpr size_t kOutlyingLayers = 12;

using Rows = std::vector<std::pair<std::string, std::string>>;

// The facts both renderers print, taken from the job once.
struct ReportData {
  std::string title;
  std::string state;
  Rows summary;
  Rows accuracy;
  Rows size;
  BarChart block_error;
  BarChart block_seconds;
  Heatmap sqnr;
  // spec.sensitivity: layers x candidates, the block output SQNR with the
  // layer alone quantized (-10 log10 of sensitivity_relative_mse).
  Heatmap sensitivity;
  RangeChart activations;
  BarChart stages;
  std::vector<std::vector<std::string>> artifacts;  // format, uri, bytes, sha256, accepted
  std::string error;
};

std::string Time(const google::protobuf::Timestamp& t) {
  return t.seconds() == 0 && t.nanos() == 0 ? "" : google::protobuf::util::TimeUtil::ToString(t);
}

std::string Percent(double ratio) { return absl::StrFormat("%+.2f%%", (ratio - 1) * 100); }

void Add(Rows& rows, const std::string& key, const std::string& value) {
  if (!value.empty()) rows.emplace_back(key, value);
}

ReportData Collect(const Job& job) {
  ReportData d;
  const auto& spec = job.spec();
  const Metrics& m = job.result().metrics();
  d.title = job.name().empty() ? "quantd job" : job.name();
  d.state = quantd::v1::JobState_Name(job.state());

  Add(d.summary, "Model", spec.model_uri());
  Add(d.summary, "Model commit", job.result().resolved_revision());
  Add(d.summary, "Quantization", cli_common::DescribeQuantization(spec));
  Add(d.summary, "Calibration data", spec.calibration().dataset_uri());
  Add(d.summary, "Evaluation data", spec.evaluation().dataset_uri());
  Add(d.summary, "Device", spec.device());
  std::vector<std::string> labels;
  for (const auto& [k, v] :
       std::map<std::string, std::string>(spec.labels().begin(), spec.labels().end())) {
    labels.push_back(k + "=" + v);
  }
  Add(d.summary, "Labels", absl::StrJoin(labels, ", "));
  Add(d.summary, "Tenant", job.tenant());
  Add(d.summary, "Created", Time(job.create_time()));
  Add(d.summary, "Started", Time(job.start_time()));
  Add(d.summary, "Ended", Time(job.end_time()));
  if (job.has_start_time() && job.has_end_time()) {
    const double seconds =
        static_cast<double>(google::protobuf::util::TimeUtil::DurationToMilliseconds(
            job.end_time() - job.start_time())) /
        1000;
    Add(d.summary, "Run time", absl::StrFormat("%.1f s", seconds));
  }
  Add(d.summary, "Attempt", job.attempt() > 0 ? std::to_string(job.attempt()) : "");
  Add(d.summary, "Worker", job.worker());

  if (m.has_float_perplexity() || m.has_quantized_perplexity()) {
    const double f = m.float_perplexity().perplexity();
    const double q = m.quantized_perplexity().perplexity();
    Add(d.accuracy, "Float perplexity", m.has_float_perplexity() ? FormatNumber(f) : "");
    Add(d.accuracy, "Quantized perplexity",
        m.has_quantized_perplexity()
            ? FormatNumber(q) +
                  (f > 0 && m.has_float_perplexity() ? " (" + Percent(q / f) + ")" : "")
            : "");
    const auto& p = m.quantized_perplexity().protocol();
    if (p.windows() > 0) {
      Add(d.accuracy, "Measured on",
          absl::StrCat(p.windows(), " windows of ", p.n_ctx(), " tokens (", p.tokens(),
                       " tokens scored)"));
    }
  }
  if (m.has_kl_divergence_mean()) {
    Add(d.accuracy, "KL(float || quantized), mean", FormatNumber(m.kl_divergence_mean()));
  }
  if (m.has_kl_divergence_p99()) Add(d.accuracy, "KL, p99", FormatNumber(m.kl_divergence_p99()));
  if (m.has_top1_agreement()) {
    Add(d.accuracy, "Top-1 agreement", absl::StrFormat("%.2f%%", m.top1_agreement() * 100));
  }
  if (m.float_model_bytes() > 0) {
    Add(d.size, "Float model", cli_common::HumanBytes(m.float_model_bytes()));
  }
  if (m.quantized_model_bytes() > 0) {
    Add(d.size, "Quantized model",
        cli_common::HumanBytes(m.quantized_model_bytes()) +
            (m.float_model_bytes() > 0
                 ? absl::StrFormat(" (%.2fx smaller)",
                                   static_cast<double>(m.float_model_bytes()) /
                                       static_cast<double>(m.quantized_model_bytes()))
                 : ""));
  }

  d.block_error = {"block-output-error", "Block output error (relative MSE, log scale)", "", {}, {},
                   /*log_scale=*/true};
  d.block_seconds = {"block-seconds", "Seconds per block", " s", {}, {}};
  d.sqnr = {"layer-sqnr", "Weight SQNR per layer and block (dB)", " dB", {}, {}, {}};
  d.activations = {
      "activation-ranges", "Widest calibration input ranges (static activations)", {}, {}, {}};
  std::map<std::string, size_t> role_row;
  struct Range {
    std::string name;
    double min, max;
  };
  std::vector<Range> ranges;
  for (const auto& b : m.blocks()) {
    const std::string label = std::to_string(b.block());
    d.block_error.labels.push_back(label);
    d.block_error.values.push_back(b.has_output_rel_mse() ? b.output_rel_mse() : std::nan(""));
    d.block_seconds.labels.push_back(label);
    d.block_seconds.values.push_back(b.seconds());
    const size_t column = d.sqnr.column_labels.size();
    d.sqnr.column_labels.push_back(label);
    for (auto& row : d.sqnr.cells) row.emplace_back();
    for (const auto& l : b.layers()) {
      const std::string role = LayerRole(l.name());
      auto [it, added] = role_row.emplace(role, d.sqnr.row_labels.size());
      if (added) {
        d.sqnr.row_labels.push_back(role);
        d.sqnr.cells.emplace_back(column + 1);
      }
      d.sqnr.cells[it->second][column] =
          l.excluded() ? std::numeric_limits<double>::infinity() : l.weight_sqnr_db();
      if (l.input_min() != 0 || l.input_max() != 0) {
        ranges.push_back({l.name(), l.input_min(), l.input_max()});
      }
      // One value per candidate of the spec (a job JSON edited by hand may
      // disagree: no row then).
      if (l.sensitivity_relative_mse_size() > 0 &&
          l.sensitivity_relative_mse_size() == job.spec().sensitivity().candidates_size()) {
        d.sensitivity.row_labels.push_back(l.name());
        auto& row = d.sensitivity.cells.emplace_back();
        for (double e : l.sensitivity_relative_mse())
          row.emplace_back(e > 0 ? -10 * std::log10(e) : 200.0);  // no error at all
      }
    }
  }
  d.sensitivity.series = "layer-sensitivity";
  d.sensitivity.title =
      "Block output SQNR with the layer alone quantized, per candidate (dB; low = sensitive)";
  d.sensitivity.unit = " dB";
  for (const std::string& c : job.spec().sensitivity().candidates())
    d.sensitivity.column_labels.push_back(c);
  std::stable_sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return std::max(std::abs(a.min), std::abs(a.max)) > std::max(std::abs(b.min), std::abs(b.max));
  });
  for (size_t i = 0; i < ranges.size() && i < kOutlyingLayers; ++i) {
    d.activations.labels.push_back(ranges[i].name);
    d.activations.min.push_back(ranges[i].min);
    d.activations.max.push_back(ranges[i].max);
  }
  d.stages = {"stage-seconds", "Seconds per stage", " s", {}, {}, false, /*horizontal=*/true};
  for (const auto& t : m.stage_timings()) {
    std::string stage = quantd::v1::Stage_Name(t.stage());
    std::transform(stage.begin(), stage.end(), stage.begin(), ::tolower);
    d.stages.labels.push_back(stage);
    d.stages.values.push_back(t.seconds());
  }
  for (const auto& a : job.result().artifacts()) {
    d.artifacts.push_back({quantd::v1::ExportFormat_Name(a.format()), a.uri(),
                           cli_common::HumanBytes(a.bytes()), a.sha256(),
                           a.accepted() ? "yes" : "no (accuracy gate)"});
  }
  if (job.has_error() && job.error().code() != 0) {
    d.error = absl::StrCat("code ", job.error().code(), ": ", job.error().message());
  }
  return d;
}

// ---- HTML ----

constexpr char kStyle[] = R"(
body { font: 14px/1.45 sans-serif; margin: 24px auto; max-width: 960px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; } td, th { padding: 3px 10px; text-align: left; }
tr:nth-child(even) { background: #f6f6f6; } th { background: #eee; }
.state { padding: 2px 8px; border-radius: 4px; background: #ddd; font-size: 14px; }
.state-SUCCEEDED { background: #d5f5e3; } .state-FAILED { background: #f5b7b1; }
.error { background: #fdedec; padding: 8px; white-space: pre-wrap; }
code { font-size: 12px; word-break: break-all; }
svg.chart { display: block; margin: 8px 0; }
svg .title { font: bold 13px sans-serif; } svg text { font: 11px sans-serif; fill: #333; }
svg .grid { stroke: #e3e3e3; } svg .zero { stroke: #555; }
svg .bar { fill: #2e86c1; } svg .range { fill: #af7ac5; } svg .cell { stroke: none; }
)";

std::string HtmlTable(const Rows& rows) {
  std::string out = "<table>";
  for (const auto& [k, v] : rows) {
    absl::StrAppend(&out, "<tr><th>", EscapeXml(k), "</th><td>", EscapeXml(v), "</td></tr>");
  }
  return out + "</table>";
}

std::string HtmlSection(const std::string& id, const std::string& heading,
                        const std::string& body) {
  return absl::StrCat("<section id=\"", id, "\"><h2>", EscapeXml(heading), "</h2>", body,
                      "</section>\n");
}

// ---- Markdown ----

std::string MdCell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else if (c == '<') {
      out += "&lt;";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string MdTable(const std::vector<std::string>& header,
                    const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::string> cells;
  for (const std::string& h : header) cells.push_back(MdCell(h));
  std::string out = "| " + absl::StrJoin(cells, " | ") + " |\n|";
  for (size_t i = 0; i < header.size(); ++i) out += " --- |";
  out += "\n";
  for (const auto& row : rows) {
    cells.clear();
    for (const std::string& c : row) cells.push_back(MdCell(c));
    out += "| " + absl::StrJoin(cells, " | ") + " |\n";
  }
  return out + "\n";
}

std::string MdRows(const Rows& rows) {
  std::vector<std::vector<std::string>> table;
  for (const auto& [k, v] : rows) table.push_back({k, v});
  return MdTable({"", ""}, table);
}

}  // namespace

std::string LayerRole(const std::string& name) {
  const std::vector<std::string> parts = absl::StrSplit(name, '.');
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!parts[i].empty() && std::all_of(parts[i].begin(), parts[i].end(), ::isdigit)) {
      return absl::StrJoin(parts.begin() + static_cast<std::ptrdiff_t>(i) + 1, parts.end(), ".");
    }
  }
  return name;
}

std::string RenderJobReportHtml(const Job& job) {
  const ReportData d = Collect(job);
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      // Nothing is ever fetched: the report is one file, and a tenant's text
      // in it cannot pull anything in.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'\">\n<title>",
      EscapeXml(d.title), " report</title><style>", kStyle, "</style></head><body>\n<h1>",
      EscapeXml(d.title), " <span class=\"state state-", EscapeXml(d.state), "\">",
      EscapeXml(d.state), "</span></h1>\n");
  html += HtmlSection("summary", "Job", HtmlTable(d.summary));
  if (!d.error.empty()) {
    html += HtmlSection("error", "Error", "<div class=\"error\">" + EscapeXml(d.error) + "</div>");
  }
  if (!d.accuracy.empty()) html += HtmlSection("accuracy", "Accuracy", HtmlTable(d.accuracy));
  if (!d.size.empty()) html += HtmlSection("size", "Size", HtmlTable(d.size));
  if (!d.block_error.labels.empty()) {
    html += HtmlSection("blocks", "Blocks",
                        DrawBarChart(d.block_error) + DrawBarChart(d.block_seconds));
    html += HtmlSection("layers", "Layers", DrawHeatmap(d.sqnr));
  }
  if (!d.sensitivity.row_labels.empty()) {
    html += HtmlSection("sensitivity", "Sensitivity", DrawHeatmap(d.sensitivity));
  }
  if (!d.activations.labels.empty()) {
    html += HtmlSection("activations", "Activation ranges", DrawRangeChart(d.activations));
  }
  if (!d.stages.labels.empty()) html += HtmlSection("stages", "Stages", DrawBarChart(d.stages));
  if (!d.artifacts.empty()) {
    std::string t =
        "<table><tr><th>Format</th><th>URI</th><th>Size</th><th>sha256</th>"
        "<th>Accepted</th></tr>";
    for (const auto& a : d.artifacts) {
      absl::StrAppend(&t, "<tr><td>", EscapeXml(a[0]), "</td><td><code>", EscapeXml(a[1]),
                      "</code></td><td>", EscapeXml(a[2]), "</td><td><code>", EscapeXml(a[3]),
                      "</code></td><td>", EscapeXml(a[4]), "</td></tr>");
    }
    html += HtmlSection("artifacts", "Artifacts", t + "</table>");
  }
  return html + "</body></html>\n";
}

std::string RenderJobReportMarkdown(const Job& job) {
  const ReportData d = Collect(job);
  std::string md = absl::StrCat("# ", MdCell(d.title), " (", d.state, ")\n\n", MdRows(d.summary));
  if (!d.error.empty()) md += "## Error\n\n" + MdCell(d.error) + "\n\n";
  if (!d.accuracy.empty()) md += "## Accuracy\n\n" + MdRows(d.accuracy);
  if (!d.size.empty()) md += "## Size\n\n" + MdRows(d.size);
  if (!d.block_error.labels.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (size_t i = 0; i < d.block_error.labels.size(); ++i) {
      rows.push_back({d.block_error.labels[i], FormatNumber(d.block_error.values[i]),
                      FormatNumber(d.block_seconds.values[i])});
    }
    md += "## Blocks\n\n" + MdTable({"Block", "Output rel. MSE", "Seconds"}, rows);
    std::vector<std::string> header = {"Layer"};
    for (const std::string& c : d.sqnr.column_labels) header.push_back(c);
    rows.clear();
    for (size_t r = 0; r < d.sqnr.row_labels.size(); ++r) {
      std::vector<std::string> row = {d.sqnr.row_labels[r]};
      for (const auto& v : d.sqnr.cells[r]) {
        row.push_back(!v ? "" : std::isinf(*v) && *v > 0 ? "float" : FormatNumber(*v));
      }
      rows.push_back(row);
    }
    md += "## Weight SQNR (dB), layers by block\n\n" + MdTable(header, rows);
  }
  if (!d.sensitivity.row_labels.empty()) {
    std::vector<std::string> header = {"Layer"};
    for (const std::string& c : d.sensitivity.column_labels) header.push_back(c + " (dB)");
    std::vector<std::vector<std::string>> rows;
    for (size_t r = 0; r < d.sensitivity.row_labels.size(); ++r) {
      std::vector<std::string> row = {d.sensitivity.row_labels[r]};
      for (const auto& v : d.sensitivity.cells[r]) row.push_back(v ? FormatNumber(*v) : "");
      rows.push_back(row);
    }
    md += "## Sensitivity: block output SQNR with the layer alone quantized\n\n" +
          MdTable(header, rows);
  }
  if (!d.activations.labels.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (size_t i = 0; i < d.activations.labels.size(); ++i) {
      rows.push_back({d.activations.labels[i], FormatNumber(d.activations.min[i]),
                      FormatNumber(d.activations.max[i])});
    }
    md += "## Widest activation ranges\n\n" + MdTable({"Layer", "Min", "Max"}, rows);
  }
  if (!d.stages.labels.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (size_t i = 0; i < d.stages.labels.size(); ++i) {
      rows.push_back({d.stages.labels[i], FormatNumber(d.stages.values[i])});
    }
    md += "## Stages\n\n" + MdTable({"Stage", "Seconds"}, rows);
  }
  if (!d.artifacts.empty()) {
    md +=
        "## Artifacts\n\n" + MdTable({"Format", "URI", "Size", "sha256", "Accepted"}, d.artifacts);
  }
  return md;
}

}  // namespace quantd::report
