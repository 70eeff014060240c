#include "client/report/job_report.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
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
  // spec.auto_precision: the search's rounds (result.auto_precision).
  std::string auto_precision_summary;
  std::vector<std::string> auto_precision_header;
  std::vector<std::vector<std::string>> auto_precision_rounds;
  // Per candidate, in the result's order: the layers the chosen round put
  // in it.
  std::vector<std::pair<std::string, std::vector<std::string>>> auto_precision_layers;
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

// The rounds table and the chosen formats of result.auto_precision.
void CollectAutoPrecision(const Job& job, ReportData& d) {
  const quantd::v1::AutoPrecisionResult& r = job.result().auto_precision();
  if (r.rounds_size() == 0) return;
  d.auto_precision_summary = cli_common::DescribeAutoPrecision(job);
  const auto& candidates =
      r.candidates().empty() ? job.spec().auto_precision().candidates() : r.candidates();
  using Round = quantd::v1::AutoPrecisionRound;
  const auto number = [](bool has, double v) { return has ? FormatNumber(v) : ""; };
  const auto points = [](bool has, double drop) {
    return has ? cli_common::PointsChange(drop) : "";
  };
  std::vector<cli_common::RoundColumn> columns = {
      {"Round",
       [&](const Round& round) {
         return absl::StrCat(round.round(), round.round() == r.chosen_round() ? " (chosen)" : "");
       }},
      {"Bits/weight",
       [](const Round& round) { return absl::StrFormat("%.3f", round.bits_per_weight()); }},
      {"Weight bytes",
       [](const Round& round) { return cli_common::HumanBytes(round.weight_bytes()); }},
      {"Cost", [&](const Round& round) { return number(round.has_cost(), round.cost()); }}};
  // The accuracy: top-1 for a classifier's search, else perplexity.
  if (cli_common::IsClassifierSearch(r)) {
    columns.push_back({"Top-1 accuracy", [](const Round& round) {
                         return round.has_top1_accuracy()
                                    ? absl::StrFormat("%.2f%%", 100 * round.top1_accuracy())
                                    : "";
                       }});
    columns.push_back({"Top-1 change (points)", [&](const Round& round) {
                         return points(round.has_accuracy_drop(), round.accuracy_drop());
                       }});
    columns.push_back({"Predicted top-1 change (points)", [&](const Round& round) {
                         return points(round.has_predicted_accuracy_drop(),
                                       round.predicted_accuracy_drop());
                       }});
  } else {
    columns.push_back({"Perplexity", [](const Round& round) {
                         return absl::StrFormat("%.4f", round.perplexity());
                       }});
    columns.push_back({"Ppl change", [](const Round& round) {
                         return Percent(1 + round.perplexity_increase());
                       }});
    columns.push_back({"Predicted ppl change", [](const Round& round) {
                         return round.has_predicted_perplexity_increase()
                                    ? Percent(1 + round.predicted_perplexity_increase())
                                    : "";
                       }});
  }
  columns.push_back({"KL mean", [&](const Round& round) {
                       return number(round.has_kl_divergence_mean(), round.kl_divergence_mean());
                     }});
  columns.push_back({"Predicted KL", [&](const Round& round) {
                       return number(round.has_predicted_kl_divergence(),
                                     round.predicted_kl_divergence());
                     }});
  columns.push_back(
      {"Budget", [](const Round& round) { return round.meets_budget() ? "met" : "missed"; }});
  columns.push_back({"Pareto", [](const Round& round) { return round.pareto() ? "yes" : "no"; }});
  // One column of counts, in the candidates' order (the summary line above
  // names them): their names do not fit in a header.
  columns.push_back({"Layers per candidate", [](const Round& round) {
                       return absl::StrJoin(round.layers_per_candidate(), " / ");
                     }});
  // The cost, the predictions and the KL divergence only where some round
  // has them.
  std::vector<std::vector<std::string>> table = cli_common::RoundsTable(r, columns, "");
  d.auto_precision_header = std::move(table[0]);
  d.auto_precision_rounds.assign(std::make_move_iterator(table.begin() + 1),
                                 std::make_move_iterator(table.end()));
  std::map<std::string, size_t> index;
  for (const std::string& c : candidates) {
    index.emplace(c, d.auto_precision_layers.size());
    d.auto_precision_layers.push_back({c, {}});
  }
  for (const auto& l : r.layers()) {
    auto [it, added] = index.emplace(l.candidate(), d.auto_precision_layers.size());
    if (added) d.auto_precision_layers.push_back({l.candidate(), {}});
    d.auto_precision_layers[it->second].second.push_back(l.layer());
  }
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
  if (m.has_float_top1_accuracy() && m.has_quantized_top1_accuracy()) {
    Add(d.accuracy, "Top-1 accuracy",
        absl::StrFormat(
            "%.2f%% float, %.2f%% quantized (%s points, %d samples)", 100 * m.float_top1_accuracy(),
            100 * m.quantized_top1_accuracy(),
            cli_common::PointsChange(m.float_top1_accuracy() - m.quantized_top1_accuracy()),
            m.evaluation_samples()));
  }
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
  CollectAutoPrecision(job, d);
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

// A TorchScript job's one block carries no output error (its evaluation
// compares the model's outputs): its report has no Blocks charts, only the
// layers.
bool HasBlockOutputError(const ReportData& d) {
  return std::any_of(d.block_error.values.begin(), d.block_error.values.end(),
                     [](double v) { return !std::isnan(v); });
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
svg .point { fill: #aed6f1; stroke: #2e86c1; } svg .point.pareto { fill: #2e86c1; }
svg .frontier { fill: none; stroke: #2e86c1; stroke-width: 2; }
svg .chosen { fill: none; stroke: #c0392b; stroke-width: 2.5; }
svg .reference { stroke: #555; stroke-dasharray: 4 3; }
svg .budget { stroke: #c0392b; stroke-dasharray: 6 3; }
)";

// Axis ticks at round numbers: multiples of 1, 2 or 5 times a power of ten,
// four to six of them within [lo, hi].
std::vector<double> NiceTicks(double lo, double hi) {
  const double raw = (hi - lo) / 6;
  if (!(raw > 0) || !std::isfinite(raw)) return {lo};
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  double step = magnitude * 10;
  for (double m : {1.0, 2.0, 5.0}) {
    if (magnitude * m >= raw) {
      step = magnitude * m;
      break;
    }
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  return ticks;
}

// A chart axis's margin, so that no point sits on the frame: 8% of the
// range, or `least` around a single value.
double AxisPad(double lo, double hi, double least) {
  return hi > lo ? (hi - lo) * 0.08 : std::max(least, std::abs(hi) * 0.01);
}

// The auto-precision search's Pareto chart: every measured round a point,
// the Pareto frontier a line through its rounds, the chosen round ringed,
// the float model and the budget dashed across. x is the round's cost under
// the user's table (spec.auto_precision.cost_per_weight) when every round
// has one, else its bits per weight. y is a classifier's top-1 accuracy drop
// in points (float at 0, the budget at evaluation.max_accuracy_drop), else
// the perplexity (the budget float * (1 + evaluation.max_perplexity_increase)).
std::string DrawAutoPrecisionChart(const Job& job) {
  using Round = quantd::v1::AutoPrecisionRound;
  const quantd::v1::AutoPrecisionResult& r = job.result().auto_precision();
  const quantd::v1::EvaluationSpec& ev = job.spec().evaluation();
  const bool by_cost = std::all_of(r.rounds().begin(), r.rounds().end(),
                                   [](const Round& round) { return round.has_cost(); });
  const bool top1 = cli_common::IsClassifierSearch(r);
  const auto x_value = [&](const Round& round) {
    return by_cost ? round.cost() : round.bits_per_weight();
  };
  const auto y_value = [&](const Round& round) {
    return top1 ? 100 * round.accuracy_drop() : round.perplexity();
  };
  struct Reference {
    std::string cls, series;
    double value;
    std::string label;
  };
  std::vector<Reference> references;
  if (top1) {
    references.push_back({"reference", "float-accuracy", 0,
                          r.has_float_top1_accuracy()
                              ? absl::StrFormat("float %.2f%%", 100 * r.float_top1_accuracy())
                              : "float"});
    if (ev.has_max_accuracy_drop())
      references.push_back({"budget", "budget", 100 * ev.max_accuracy_drop(),
                            absl::StrFormat("budget %.2f points", 100 * ev.max_accuracy_drop())});
  } else if (r.float_perplexity() > 0) {
    const double float_ppl = r.float_perplexity();
    references.push_back(
        {"reference", "float-perplexity", float_ppl, "float " + FormatNumber(float_ppl)});
    if (ev.has_max_perplexity_increase()) {
      const double budget = float_ppl * (1 + ev.max_perplexity_increase());
      references.push_back({"budget", "budget", budget,
                            absl::StrCat("budget ", FormatNumber(budget), " (",
                                         Percent(1 + ev.max_perplexity_increase()), ")")});
    }
  }

  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo;
  double y_lo = x_lo, y_hi = -x_lo;
  const auto extend = [](double v, double& lo, double& hi) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  };
  for (const auto& round : r.rounds()) {
    extend(x_value(round), x_lo, x_hi);
    extend(y_value(round), y_lo, y_hi);
  }
  for (const Reference& ref : references) extend(ref.value, y_lo, y_hi);
  if (!std::isfinite(x_lo)) x_lo = x_hi = 0;
  if (!std::isfinite(y_lo)) y_lo = y_hi = 0;
  const double x_pad = AxisPad(x_lo, x_hi, 0.5), y_pad = AxisPad(y_lo, y_hi, 0.05);
  x_lo -= x_pad, x_hi += x_pad, y_lo -= y_pad, y_hi += y_pad;

  constexpr double kW = 720, kLeft = 70, kRight = 150, kTop = 34, kPlotH = 240, kBottom = 50;
  const double plot_w = kW - kLeft - kRight;
  const double h = kTop + kPlotH + kBottom;
  const auto x_of = [&](double v) { return kLeft + (v - x_lo) / (x_hi - x_lo) * plot_w; };
  const auto y_of = [&](double v) { return kTop + kPlotH - (v - y_lo) / (y_hi - y_lo) * kPlotH; };
  const auto px = [](double v) { return absl::StrFormat("%.1f", v); };
  const std::string y_name = top1 ? "top-1 accuracy drop" : "perplexity";

  std::string svg = absl::StrCat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart pareto-chart\" "
      "data-series=\"auto-precision-rounds\" width=\"",
      px(kW), "\" height=\"", px(h), "\" viewBox=\"0 0 ", px(kW), " ", px(h), "\">",
      "<text class=\"title\" x=\"", px(kLeft), "\" y=\"18\">", "Auto precision: ", y_name, " by ",
      by_cost ? "cost" : "bits per weight", ", one point per measured round</text>");
  for (double xv : NiceTicks(x_lo, x_hi)) {
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", px(x_of(xv)), "\" x2=\"", px(x_of(xv)),
                    "\" y1=\"", px(kTop), "\" y2=\"", px(kTop + kPlotH), "\"/>",
                    "<text class=\"tick\" text-anchor=\"middle\" x=\"", px(x_of(xv)), "\" y=\"",
                    px(kTop + kPlotH + 16), "\">", FormatNumber(xv), "</text>");
  }
  for (double yv : NiceTicks(y_lo, y_hi)) {
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", px(kLeft), "\" x2=\"", px(kLeft + plot_w),
                    "\" y1=\"", px(y_of(yv)), "\" y2=\"", px(y_of(yv)), "\"/>",
                    "<text class=\"tick\" text-anchor=\"end\" x=\"", px(kLeft - 6), "\" y=\"",
                    px(y_of(yv) + 4), "\">", FormatNumber(yv), "</text>");
  }
  absl::StrAppend(&svg, "<text class=\"label\" text-anchor=\"middle\" x=\"", px(kLeft + plot_w / 2),
                  "\" y=\"", px(h - 12), "\">",
                  by_cost ? "cost (user table)" : "bits per weight (searched linears)", "</text>",
                  "<text class=\"label\" text-anchor=\"middle\" transform=\"rotate(-90)\" x=\"",
                  px(-(kTop + kPlotH / 2)), "\" y=\"14\">",
                  top1 ? "top-1 accuracy drop (points)" : "perplexity", "</text>");
  // The legend, in the right margin (class "legend" first: not a round).
  const double lx = kLeft + plot_w + 12;
  const std::pair<const char*, const char*> kLegend[] = {{"legend point pareto", "Pareto frontier"},
                                                         {"legend point", "dominated"},
                                                         {"legend chosen", "chosen"}};
  for (size_t i = 0; i < 3; ++i) {
    const double ly = kTop + 8 + 18 * static_cast<double>(i);
    absl::StrAppend(&svg, "<circle class=\"", kLegend[i].first, "\" cx=\"", px(lx), "\" cy=\"",
                    px(ly), "\" r=\"", i == 2 ? "7" : "5", "\"/><text class=\"label\" x=\"",
                    px(lx + 12), "\" y=\"", px(ly + 4), "\">", kLegend[i].second, "</text>");
  }
  // Horizontal references, labelled at the right.
  for (const Reference& ref : references) {
    absl::StrAppend(&svg, "<line class=\"", ref.cls, "\" data-series=\"", ref.series,
                    "\" data-value=\"", FormatNumber(ref.value), "\" x1=\"", px(kLeft), "\" x2=\"",
                    px(kLeft + plot_w), "\" y1=\"", px(y_of(ref.value)), "\" y2=\"",
                    px(y_of(ref.value)), "\"><title>", EscapeXml(ref.label), "</title></line>",
                    "<text class=\"label\" x=\"", px(kLeft + plot_w + 6), "\" y=\"",
                    px(y_of(ref.value) + 4), "\">", EscapeXml(ref.label), "</text>");
  }
  // The frontier, smallest first.
  std::vector<const Round*> frontier;
  // A round without a finite size, cost or accuracy (a diverged evaluation)
  // has no place on the chart; the table still lists it.
  const auto drawable = [&](const Round& round) {
    return std::isfinite(x_value(round)) && std::isfinite(y_value(round));
  };
  for (const auto& round : r.rounds())
    if (round.pareto() && drawable(round)) frontier.push_back(&round);
  std::stable_sort(frontier.begin(), frontier.end(),
                   [&](const Round* a, const Round* b) { return x_value(*a) < x_value(*b); });
  if (!frontier.empty()) {
    std::vector<std::string> points, rounds;
    for (const Round* round : frontier) {
      points.push_back(px(x_of(x_value(*round))) + "," + px(y_of(y_value(*round))));
      rounds.push_back(std::to_string(round->round()));
    }
    absl::StrAppend(&svg, "<polyline class=\"frontier\" data-series=\"pareto-frontier\" ",
                    "data-rounds=\"", absl::StrJoin(rounds, " "), "\" points=\"",
                    absl::StrJoin(points, " "), "\"><title>Pareto frontier: rounds ",
                    absl::StrJoin(rounds, ", "), "</title></polyline>");
  }
  // A round's values as data attributes, and its place.
  const auto data = [&](const Round& round) {
    return absl::StrCat(
        "data-round=\"", round.round(), "\" data-bits-per-weight=\"",
        FormatNumber(round.bits_per_weight()), "\"",
        by_cost ? absl::StrCat(" data-cost=\"", FormatNumber(round.cost()), "\"") : "",
        " data-value=\"", FormatNumber(y_value(round)), "\"");
  };
  const auto at = [&](const Round& round) {
    return absl::StrCat("cx=\"", px(x_of(x_value(round))), "\" cy=\"", px(y_of(y_value(round))),
                        "\"");
  };
  const Round* chosen = nullptr;
  for (const auto& round : r.rounds()) {
    if (!drawable(round)) continue;
    const bool is_chosen = round.round() == r.chosen_round();
    if (is_chosen) chosen = &round;
    const std::string accuracy =
        top1 ? absl::StrFormat("top-1 %.2f%% (%s points)", 100 * round.top1_accuracy(),
                               cli_common::PointsChange(round.accuracy_drop()))
             : absl::StrCat("perplexity ", FormatNumber(round.perplexity()), " (",
                            Percent(1 + round.perplexity_increase()), ")");
    const std::string text = absl::StrCat(
        "round ", round.round(), ": ", absl::StrFormat("%.3f", round.bits_per_weight()),
        " bits/weight", by_cost ? ", cost " + FormatNumber(round.cost()) : "", ", ", accuracy,
        ", budget ", round.meets_budget() ? "met" : "missed", round.pareto() ? ", Pareto" : "",
        is_chosen ? ", chosen" : "");
    absl::StrAppend(&svg, "<circle class=\"point", round.pareto() ? " pareto" : "", "\" ",
                    data(round), " data-meets-budget=\"", round.meets_budget() ? "true" : "false",
                    "\" ", at(round), " r=\"5\"><title>", EscapeXml(text), "</title></circle>",
                    "<text class=\"label\" x=\"", px(x_of(x_value(round)) + 7), "\" y=\"",
                    px(y_of(y_value(round)) - 6), "\">", round.round(), "</text>");
  }
  if (chosen) {
    absl::StrAppend(&svg, "<circle class=\"chosen\" data-series=\"chosen\" ", data(*chosen), " ",
                    at(*chosen), " r=\"10\"><title>chosen: round ", chosen->round(),
                    "</title></circle>");
  }
  return svg + "</svg>";
}

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
  if (HasBlockOutputError(d)) {
    html += HtmlSection("blocks", "Blocks",
                        DrawBarChart(d.block_error) + DrawBarChart(d.block_seconds));
  }
  if (!d.block_error.labels.empty()) html += HtmlSection("layers", "Layers", DrawHeatmap(d.sqnr));
  if (!d.sensitivity.row_labels.empty()) {
    html += HtmlSection("sensitivity", "Sensitivity", DrawHeatmap(d.sensitivity));
  }
  if (!d.auto_precision_rounds.empty()) {
    std::string body = "<p>" + EscapeXml(d.auto_precision_summary) + "</p>" +
                       DrawAutoPrecisionChart(job) + "<table><tr>";
    for (const std::string& h : d.auto_precision_header)
      absl::StrAppend(&body, "<th>", EscapeXml(h), "</th>");
    body += "</tr>";
    for (const auto& row : d.auto_precision_rounds) {
      body += "<tr>";
      for (const std::string& c : row) absl::StrAppend(&body, "<td>", EscapeXml(c), "</td>");
      body += "</tr>";
    }
    body += "</table>";
    if (!job.result().auto_precision().layers().empty()) {
      body +=
          "<h3>Chosen formats</h3><table><tr><th>Candidate</th><th>Layers</th><th>Names</th></tr>";
      for (const auto& [candidate, layers] : d.auto_precision_layers) {
        absl::StrAppend(&body, "<tr><td>", EscapeXml(candidate), "</td><td>", layers.size(),
                        "</td><td><code>", EscapeXml(absl::StrJoin(layers, ", ")),
                        "</code></td></tr>");
      }
      body += "</table>";
    }
    html += HtmlSection("auto-precision", "Auto precision", body);
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
    if (HasBlockOutputError(d)) {
      for (size_t i = 0; i < d.block_error.labels.size(); ++i) {
        rows.push_back({d.block_error.labels[i], FormatNumber(d.block_error.values[i]),
                        FormatNumber(d.block_seconds.values[i])});
      }
      md += "## Blocks\n\n" + MdTable({"Block", "Output rel. MSE", "Seconds"}, rows);
    }
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
  if (!d.auto_precision_rounds.empty()) {
    md += "## Auto precision\n\n" + MdCell(d.auto_precision_summary) + "\n\n" +
          MdTable(d.auto_precision_header, d.auto_precision_rounds);
    if (!job.result().auto_precision().layers().empty()) {
      std::vector<std::vector<std::string>> rows;
      for (const auto& [candidate, layers] : d.auto_precision_layers)
        rows.push_back({candidate, std::to_string(layers.size()), absl::StrJoin(layers, ", ")});
      md += "### Chosen formats\n\n" + MdTable({"Candidate", "Layers", "Names"}, rows);
    }
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
