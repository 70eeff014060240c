// Inline SVG charts for the job report (job_report.h): bar charts, a
// heatmap and range bars, drawn as plain SVG elements so that the report is
// one self-contained HTML file a browser shows without scripts or fonts.
// Every chart is an <svg class="chart" data-series="..."> whose marks carry
// data-* attributes with their values, so tests can read what was drawn.
#ifndef QUANTD_CLIENT_REPORT_SVG_CHART_H_
#define QUANTD_CLIENT_REPORT_SVG_CHART_H_

#include <optional>
#include <string>
#include <vector>

namespace quantd::report {

// Text for HTML and SVG: & < > " ' escaped (labels and names come from
// tenants).
std::string EscapeXml(const std::string& text);

// A number as the report prints it: 4 significant digits, "inf", "nan".
std::string FormatNumber(double v);

struct BarChart {
  std::string series;  // data-series, e.g. "block-output-error"
  std::string title;
  std::string unit;  // appended to axis labels, e.g. "s"
  std::vector<std::string> labels;
  std::vector<double> values;  // one per label; NaN = not measured (no bar)
  // Logarithmic value axis (only positive values are drawn); for errors
  // that span orders of magnitude.
  bool log_scale = false;
  // Horizontal bars, one row per label (for long labels).
  bool horizontal = false;
};
std::string DrawBarChart(const BarChart& chart);

struct Heatmap {
  std::string series;
  std::string title;
  std::string unit;
  std::vector<std::string> row_labels;
  std::vector<std::string> column_labels;
  // cells[row][column]; nullopt = no such cell (drawn empty); +inf = kept
  // float (drawn grey and labelled "float").
  std::vector<std::vector<std::optional<double>>> cells;
  // Colour from low (warm) to high (cool): low values are the bad ones for
  // an SQNR.
};
std::string DrawHeatmap(const Heatmap& map);

struct RangeChart {
  std::string series;
  std::string title;
  std::vector<std::string> labels;
  std::vector<double> min;
  std::vector<double> max;
};
// One horizontal bar per label from min to max, on a shared axis through 0.
std::string DrawRangeChart(const RangeChart& chart);

}  // namespace quantd::report

#endif  // QUANTD_CLIENT_REPORT_SVG_CHART_H_
