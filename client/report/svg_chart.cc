#include "client/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace quantd::report {
namespace {

constexpr double kWidth = 720;
constexpr double kPlotHeight = 200;
constexpr double kLeft = 70;
constexpr double kTop = 34;
constexpr double kBottom = 56;
constexpr double kRowHeight = 18;
constexpr double kCharWidth = 6.6;  // of the 11px sans-serif labels

std::string Px(double v) { return absl::StrFormat("%.1f", v); }

std::string Title(const std::string& title, double x) {
  return absl::StrCat("<text class=\"title\" x=\"", Px(x), "\" y=\"18\">", EscapeXml(title),
                      "</text>");
}

std::string Open(const std::string& cls, const std::string& series, double w, double h) {
  return absl::StrCat("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart ", cls,
                      "\" data-series=\"", EscapeXml(series), "\" width=\"", Px(w), "\" height=\"",
                      Px(h), "\" viewBox=\"0 0 ", Px(w), " ", Px(h), "\">");
}

// Label width in pixels, for the left column of horizontal charts.
double LabelWidth(const std::vector<std::string>& labels) {
  size_t longest = 4;
  for (const std::string& l : labels) longest = std::max(longest, l.size());
  return std::min(320.0, 12 + kCharWidth * static_cast<double>(longest));
}

// Ticks of a value axis: 5 evenly spaced values, or the powers of ten.
std::vector<double> Ticks(double lo, double hi, bool log_scale) {
  std::vector<double> ticks;
  if (log_scale) {
    for (double e = std::floor(lo); e <= std::ceil(hi) + 1e-9; e += 1) ticks.push_back(e);
    return ticks;
  }
  for (int i = 0; i <= 4; ++i) ticks.push_back(lo + (hi - lo) * i / 4);
  return ticks;
}

// Warm (low) to cool (high) through yellow.
std::string Colour(double t) {
  t = std::clamp(t, 0.0, 1.0);
  struct Rgb {
    double r, g, b;
  };
  constexpr Rgb kStops[] = {{192, 57, 43}, {241, 196, 15}, {39, 174, 96}};
  const double x = t * 2;
  const int i = std::min(1, static_cast<int>(x));
  const double f = x - i;
  const Rgb& a = kStops[i];
  const Rgb& b = kStops[i + 1];
  return absl::StrFormat("#%02x%02x%02x", static_cast<int>(a.r + (b.r - a.r) * f),
                         static_cast<int>(a.g + (b.g - a.g) * f),
                         static_cast<int>(a.b + (b.b - a.b) * f));
}

}  // namespace

std::string EscapeXml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string FormatNumber(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return absl::StrFormat("%.4g", v);
}

std::string DrawBarChart(const BarChart& c) {
  const size_t n = c.labels.size();
  std::vector<double> shown;  // the drawn coordinate of each value (log10 when log_scale)
  double lo = c.log_scale ? std::numeric_limits<double>::infinity() : 0;
  double hi = c.log_scale ? -std::numeric_limits<double>::infinity() : 0;
  for (size_t i = 0; i < n; ++i) {
    const double v = i < c.values.size() ? c.values[i] : std::nan("");
    double s = std::nan("");
    if (std::isfinite(v) && (!c.log_scale || v > 0)) s = c.log_scale ? std::log10(v) : v;
    shown.push_back(s);
    if (!std::isnan(s)) {
      lo = std::min(lo, s);
      hi = std::max(hi, s);
    }
  }
  if (c.log_scale) {
    if (!std::isfinite(lo)) lo = hi = 0;
    lo = std::floor(lo);
    hi = std::max(lo + 1, std::ceil(hi));
  } else if (hi <= lo) {
    hi = lo + 1;
  }
  const std::vector<double> ticks = Ticks(lo, hi, c.log_scale);
  const auto tick_label = [&](double t) {
    return c.log_scale ? absl::StrCat("1e", static_cast<int>(t)) : FormatNumber(t);
  };

  std::string svg;
  if (c.horizontal) {
    const double left = LabelWidth(c.labels);
    const double plot_w = kWidth - left - 30;
    const double h = kTop + kRowHeight * static_cast<double>(n) + 40;
    const auto x_of = [&](double s) { return left + (s - lo) / (hi - lo) * plot_w; };
    svg = Open("bar-chart", c.series, kWidth, h) + Title(c.title, 8);
    for (double t : ticks) {
      absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", Px(x_of(t)), "\" x2=\"", Px(x_of(t)),
                      "\" y1=\"", Px(kTop - 4), "\" y2=\"", Px(h - 36), "\"/>",
                      "<text class=\"tick\" text-anchor=\"middle\" x=\"", Px(x_of(t)), "\" y=\"",
                      Px(h - 22), "\">", EscapeXml(tick_label(t) + c.unit), "</text>");
    }
    for (size_t i = 0; i < n; ++i) {
      const double y = kTop + kRowHeight * static_cast<double>(i);
      absl::StrAppend(&svg, "<text class=\"label\" text-anchor=\"end\" x=\"", Px(left - 6),
                      "\" y=\"", Px(y + 12), "\">", EscapeXml(c.labels[i]), "</text>");
      if (std::isnan(shown[i])) continue;
      absl::StrAppend(&svg, "<rect class=\"bar\" data-label=\"", EscapeXml(c.labels[i]),
                      "\" data-value=\"", FormatNumber(c.values[i]), "\" x=\"", Px(left), "\" y=\"",
                      Px(y + 2), "\" width=\"", Px(std::max(1.0, x_of(shown[i]) - left)),
                      "\" height=\"", Px(kRowHeight - 4), "\"><title>", EscapeXml(c.labels[i]),
                      ": ", FormatNumber(c.values[i]), EscapeXml(c.unit), "</title></rect>");
    }
    return svg + "</svg>";
  }

  const double plot_w = kWidth - kLeft - 20;
  const double h = kTop + kPlotHeight + kBottom;
  const double base = kTop + kPlotHeight;
  const auto y_of = [&](double s) { return base - (s - lo) / (hi - lo) * kPlotHeight; };
  svg = Open("bar-chart", c.series, kWidth, h) + Title(c.title, kLeft);
  for (double t : ticks) {
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", Px(kLeft), "\" x2=\"", Px(kLeft + plot_w),
                    "\" y1=\"", Px(y_of(t)), "\" y2=\"", Px(y_of(t)), "\"/>",
                    "<text class=\"tick\" text-anchor=\"end\" x=\"", Px(kLeft - 6), "\" y=\"",
                    Px(y_of(t) + 4), "\">", EscapeXml(tick_label(t) + c.unit), "</text>");
  }
  const double slot = plot_w / std::max<size_t>(1, n);
  // At most about 24 axis labels; every label is still in the bar's title.
  const size_t every = std::max<size_t>(1, (n + 23) / 24);
  for (size_t i = 0; i < n; ++i) {
    const double x = kLeft + slot * static_cast<double>(i);
    if (i % every == 0) {
      absl::StrAppend(&svg, "<text class=\"label\" text-anchor=\"middle\" x=\"", Px(x + slot / 2),
                      "\" y=\"", Px(base + 16), "\">", EscapeXml(c.labels[i]), "</text>");
    }
    if (std::isnan(shown[i])) continue;
    const double y = y_of(shown[i]);
    absl::StrAppend(&svg, "<rect class=\"bar\" data-label=\"", EscapeXml(c.labels[i]),
                    "\" data-value=\"", FormatNumber(c.values[i]), "\" x=\"", Px(x + slot * 0.15),
                    "\" y=\"", Px(std::min(y, base - 1)), "\" width=\"", Px(slot * 0.7),
                    "\" height=\"", Px(std::max(1.0, base - y)), "\"><title>",
                    EscapeXml(c.labels[i]), ": ", FormatNumber(c.values[i]), EscapeXml(c.unit),
                    "</title></rect>");
  }
  return svg + "</svg>";
}

std::string DrawHeatmap(const Heatmap& m) {
  const double left = LabelWidth(m.row_labels);
  const size_t cols = m.column_labels.size();
  const double cell_w = std::clamp(560.0 / std::max<size_t>(1, cols), 6.0, 40.0);
  const double w = left + cell_w * static_cast<double>(cols) + 20;
  const double h = kTop + 18 + kRowHeight * static_cast<double>(m.row_labels.size()) + 44;
  double lo = std::numeric_limits<double>::infinity();
  double hi = -lo;
  for (const auto& row : m.cells) {
    for (const auto& v : row) {
      if (v && std::isfinite(*v)) {
        lo = std::min(lo, *v);
        hi = std::max(hi, *v);
      }
    }
  }
  if (!std::isfinite(lo)) lo = hi = 0;
  const auto t_of = [&](double v) { return hi > lo ? (v - lo) / (hi - lo) : 1.0; };

  // Wide enough for the legend's text as well.
  std::string svg = Open("heatmap", m.series, std::max(w, left + 420), h) + Title(m.title, 8);
  const double top = kTop + 18;
  const size_t every = std::max<size_t>(1, static_cast<size_t>(std::ceil(24.0 / cell_w)));
  for (size_t c = 0; c < cols; c += every) {
    absl::StrAppend(&svg, "<text class=\"label\" text-anchor=\"middle\" x=\"",
                    Px(left + cell_w * (static_cast<double>(c) + 0.5)), "\" y=\"", Px(top - 5),
                    "\">", EscapeXml(m.column_labels[c]), "</text>");
  }
  for (size_t r = 0; r < m.row_labels.size(); ++r) {
    const double y = top + kRowHeight * static_cast<double>(r);
    absl::StrAppend(&svg, "<text class=\"label\" text-anchor=\"end\" x=\"", Px(left - 6), "\" y=\"",
                    Px(y + 12), "\">", EscapeXml(m.row_labels[r]), "</text>");
    for (size_t c = 0; c < cols; ++c) {
      const std::optional<double> v =
          r < m.cells.size() && c < m.cells[r].size() ? m.cells[r][c] : std::nullopt;
      if (!v) continue;
      const bool kept_float = std::isinf(*v) && *v > 0;
      const std::string text = kept_float ? "float" : FormatNumber(*v) + m.unit;
      absl::StrAppend(&svg, "<rect class=\"cell\" data-row=\"", EscapeXml(m.row_labels[r]),
                      "\" data-column=\"", EscapeXml(m.column_labels[c]), "\" data-value=\"",
                      FormatNumber(*v), "\" x=\"", Px(left + cell_w * static_cast<double>(c)),
                      "\" y=\"", Px(y), "\" width=\"", Px(cell_w - 1), "\" height=\"",
                      Px(kRowHeight - 1), "\" fill=\"",
                      kept_float ? "#bdc3c7" : Colour(std::isfinite(*v) ? t_of(*v) : 0.0),
                      "\"><title>", EscapeXml(m.row_labels[r]), ", ", EscapeXml(m.column_labels[c]),
                      ": ", EscapeXml(text), "</title></rect>");
    }
  }
  // The legend: the colour scale's two ends.
  const double ly = h - 26;
  for (int i = 0; i < 20; ++i) {
    absl::StrAppend(&svg, "<rect class=\"legend\" x=\"", Px(left + 8 * i), "\" y=\"", Px(ly),
                    "\" width=\"8\" height=\"10\" fill=\"", Colour(i / 19.0), "\"/>");
  }
  absl::StrAppend(&svg, "<text class=\"tick\" text-anchor=\"end\" x=\"", Px(left - 4), "\" y=\"",
                  Px(ly + 9), "\">", EscapeXml(FormatNumber(lo) + m.unit), "</text>",
                  "<text class=\"tick\" x=\"", Px(left + 164), "\" y=\"", Px(ly + 9), "\">",
                  EscapeXml(FormatNumber(hi) + m.unit), "  (grey: kept float)</text>");
  return svg + "</svg>";
}

std::string DrawRangeChart(const RangeChart& c) {
  const size_t n = c.labels.size();
  double lo = 0;
  double hi = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isfinite(c.min[i])) lo = std::min(lo, c.min[i]);
    if (std::isfinite(c.max[i])) hi = std::max(hi, c.max[i]);
  }
  if (hi <= lo) hi = lo + 1;
  const double left = LabelWidth(c.labels);
  const double plot_w = kWidth - left - 30;
  const double h = kTop + kRowHeight * static_cast<double>(n) + 40;
  const auto x_of = [&](double v) { return left + (v - lo) / (hi - lo) * plot_w; };
  std::string svg = Open("range-chart", c.series, kWidth, h) + Title(c.title, 8);
  for (double t : Ticks(lo, hi, false)) {
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", Px(x_of(t)), "\" x2=\"", Px(x_of(t)),
                    "\" y1=\"", Px(kTop - 4), "\" y2=\"", Px(h - 36), "\"/>",
                    "<text class=\"tick\" text-anchor=\"middle\" x=\"", Px(x_of(t)), "\" y=\"",
                    Px(h - 22), "\">", FormatNumber(t), "</text>");
  }
  for (size_t i = 0; i < n; ++i) {
    const double y = kTop + kRowHeight * static_cast<double>(i);
    const double x0 = x_of(std::isfinite(c.min[i]) ? c.min[i] : lo);
    const double x1 = x_of(std::isfinite(c.max[i]) ? c.max[i] : hi);
    absl::StrAppend(&svg, "<text class=\"label\" text-anchor=\"end\" x=\"", Px(left - 6), "\" y=\"",
                    Px(y + 12), "\">", EscapeXml(c.labels[i]), "</text>",
                    "<rect class=\"range\" data-label=\"", EscapeXml(c.labels[i]), "\" data-min=\"",
                    FormatNumber(c.min[i]), "\" data-max=\"", FormatNumber(c.max[i]), "\" x=\"",
                    Px(x0), "\" y=\"", Px(y + 2), "\" width=\"", Px(std::max(1.0, x1 - x0)),
                    "\" height=\"", Px(kRowHeight - 4), "\"><title>", EscapeXml(c.labels[i]), ": [",
                    FormatNumber(c.min[i]), ", ", FormatNumber(c.max[i]), "]</title></rect>");
  }
  absl::StrAppend(&svg, "<line class=\"zero\" x1=\"", Px(x_of(0)), "\" x2=\"", Px(x_of(0)),
                  "\" y1=\"", Px(kTop - 4), "\" y2=\"", Px(h - 36), "\"/>");
  return svg + "</svg>";
}

}  // namespace quantd::report
