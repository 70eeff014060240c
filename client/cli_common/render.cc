#include "client/cli_common/render.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace quantd::cli_common {
namespace {

using google::protobuf::util::TimeUtil;

std::string Time(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "-";
  std::string s = TimeUtil::ToString(t);
  // Drop sub-second digits: "2026-11-22T10:00:00.123Z" -> "2026-11-22T10:00:00Z".
  if (auto dot = s.find('.'); dot != std::string::npos) s = s.substr(0, dot) + "Z";
  return s;
}

std::string Seconds(double s) {
  if (s < 60) return absl::StrFormat("%.1fs", s);
  return absl::StrFormat("%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
}

std::string Protocol(const quantd::v1::EvalProtocol& p) {
  std::string data = p.dataset_uri();
  if (auto slash = data.rfind('/'); slash != std::string::npos) data = data.substr(slash + 1);
  return absl::StrFormat("%s, n_ctx %d, %d windows, %d tokens", data, p.n_ctx(), p.windows(),
                         p.tokens());
}

}  // namespace

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.1f %s", v, units[u]);
}

namespace {

// The settings' own algorithms, as --algorithm names them.
std::string DescribeAlgorithms(const quantd::v1::QuantizationSettings& q) {
  using A = quantd::v1::AlgorithmConfig;
  static const std::pair<A::AlgorithmCase, const char*> kNames[] = {
      {A::kGptq, "gptq"},
      {A::kAwq, "awq"},
      {A::kSmoothQuant, "smoothquant"},
      {A::kAutoSmoothQuant, "autosmoothquant"},
      {A::kRotation, "rotation"}};
  std::string s;
  for (const A& a : q.algorithms())
    for (const auto& [kind, name] : kNames)
      if (a.algorithm_case() == kind) absl::StrAppend(&s, " + ", name);
  return s;
}

}  // namespace

std::string DescribeQuantization(const quantd::v1::JobSpec& spec) {
  const quantd::v1::QuantizationSettings& q = spec.quantization();
  if (q.source_case() == quantd::v1::QuantizationSettings::SOURCE_NOT_SET &&
      !spec.export_().gguf_type().empty())
    return "llama.cpp " + spec.export_().gguf_type() + DescribeAlgorithms(q);
  std::string s;
  if (q.source_case() == quantd::v1::QuantizationSettings::SOURCE_NOT_SET &&
      spec.has_auto_precision()) {
    const auto& candidates = spec.auto_precision().candidates();
    const bool per_group = std::any_of(candidates.begin(), candidates.end(), [](const auto& c) {
      return c.find("per_group") != std::string::npos;
    });
    s = absl::StrCat(
        "auto precision (", absl::StrJoin(candidates, ", "),
        q.has_group_size() && per_group ? absl::StrCat("; group ", q.group_size()) : "", ")",
        DescribeAlgorithms(q));
    if (q.fp8_kv_cache()) absl::StrAppend(&s, " + fp8 kv-cache");
    return s;
  }
  switch (q.source_case()) {
    case quantd::v1::QuantizationSettings::kScheme:
      s = q.scheme();
      if (q.has_group_size() && q.scheme().find("per_group") != std::string::npos)
        absl::StrAppend(&s, " (group ", q.group_size(), ")");
      break;
    case quantd::v1::QuantizationSettings::kConfig:
      s = "structured config";
      break;
    case quantd::v1::QuantizationSettings::kQuarkJson:
      s = "reference-toolkit JSON config";
      break;
    default:
      s = "-";
  }
  absl::StrAppend(&s, DescribeAlgorithms(q));
  if (q.fp8_kv_cache()) absl::StrAppend(&s, " + fp8 kv-cache");
  return s;
}

std::string RenderProgressBar(const quantd::v1::Progress& p, int width) {
  const double pct = std::clamp(p.percent(), 0.0, 100.0);
  const int filled = static_cast<int>(std::round(pct / 100.0 * width));
  std::string bar = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "]";
  std::string s = absl::StrFormat("%s %3.0f%% %s", bar, pct, quantd::v1::Stage_Name(p.stage()));
  if (p.block_count() > 0) absl::StrAppend(&s, " block ", p.block(), "/", p.block_count());
  if (!p.message().empty()) absl::StrAppend(&s, "  ", p.message());
  return s;
}

std::string RenderBlockMetrics(const quantd::v1::BlockMetrics& b, int block_count) {
  double min_sqnr = INFINITY, sum = 0;
  int n = 0;
  std::string worst;
  for (const auto& l : b.layers()) {
    if (l.excluded()) continue;
    sum += l.weight_sqnr_db();
    ++n;
    if (l.weight_sqnr_db() < min_sqnr) {
      min_sqnr = l.weight_sqnr_db();
      worst = l.name();
      if (auto dot = worst.rfind('.'); dot != std::string::npos) worst = worst.substr(dot + 1);
    }
  }
  std::string row = absl::StrFormat("block %2d/%-2d", b.block(), block_count);
  // Absent without calibration data; a negative value is the sentinel that
  // older workers sent for "not measured".
  if (b.has_output_rel_mse() && b.output_rel_mse() >= 0)
    absl::StrAppend(&row, absl::StrFormat("  out rel-mse %9.3e", b.output_rel_mse()));
  if (n > 0)
    absl::StrAppend(
        &row, absl::StrFormat("  sqnr mean %5.1f dB  min %5.1f dB (%s)", sum / n, min_sqnr, worst));
  // A mixture-of-experts block: the spread of routed calibration tokens,
  // and the experts below the floor (kept in float or rounded to nearest).
  if (b.experts_size() > 0) {
    int64_t lo = INT64_MAX, hi = 0;
    std::vector<std::string> starved;
    for (const auto& e : b.experts()) {
      lo = std::min<int64_t>(lo, e.calibration_tokens());
      hi = std::max<int64_t>(hi, e.calibration_tokens());
      if (e.below_floor()) starved.push_back(absl::StrCat(e.expert(), e.kept_float() ? "f" : ""));
    }
    absl::StrAppend(&row, absl::StrFormat("  experts %d: %d-%d tokens", b.experts_size(), lo, hi));
    if (!starved.empty()) {
      const size_t shown = std::min<size_t>(starved.size(), 4);
      absl::StrAppend(&row, ", below floor ",
                      absl::StrJoin(starved.begin(), starved.begin() + shown, " "),
                      starved.size() > shown ? " ..." : "");
    }
  }
  // On a GPU, the allocator's peaks during the block: live tensors, and all
  // it held (before the time, which stays last on the line).
  if (b.device_peak_reserved_bytes() > 0)
    absl::StrAppend(&row, absl::StrFormat("  gpu %.1f GiB (%.1f held)",
                                          b.device_peak_allocated_bytes() / 1073741824.0,
                                          b.device_peak_reserved_bytes() / 1073741824.0));
  // Wall time, with the part block algorithms (GPTQ, AWQ, ...) took.
  if (b.seconds() > 0) {
    absl::StrAppend(&row, absl::StrFormat(b.seconds() < 10 ? "  %.2f s" : "  %.1f s", b.seconds()));
    if (b.algorithm_seconds() >= 0.05)
      absl::StrAppend(&row, absl::StrFormat(" (%.1f algo)", b.algorithm_seconds()));
  }
  return row;
}

std::string RenderMetrics(const quantd::v1::Metrics& m) {
  std::vector<std::string> lines;
  if (m.has_float_perplexity())
    lines.push_back(absl::StrFormat("perplexity float:     %.4f  (%s)",
                                    m.float_perplexity().perplexity(),
                                    Protocol(m.float_perplexity().protocol())));
  if (m.has_quantized_perplexity()) {
    std::string line =
        absl::StrFormat("perplexity quantized: %.4f", m.quantized_perplexity().perplexity());
    if (m.has_float_perplexity() && m.float_perplexity().perplexity() > 0)
      absl::StrAppend(
          &line, absl::StrFormat("  (%+.2f%%)", 100.0 * (m.quantized_perplexity().perplexity() /
                                                             m.float_perplexity().perplexity() -
                                                         1.0)));
    lines.push_back(line);
  }
  if (m.has_kl_divergence_mean())
    lines.push_back(absl::StrFormat("kl divergence:        mean %.5f  p99 %.5f",
                                    m.kl_divergence_mean(), m.kl_divergence_p99()));
  if (m.has_float_top1_accuracy() && m.has_quantized_top1_accuracy())
    lines.push_back(absl::StrFormat(
        "top-1 accuracy:       %.2f%% float, %.2f%% quantized (%+.2f points, %d samples)",
        100.0 * m.float_top1_accuracy(), 100.0 * m.quantized_top1_accuracy(),
        100.0 * (m.quantized_top1_accuracy() - m.float_top1_accuracy()), m.evaluation_samples()));
  if (m.has_top1_agreement())
    lines.push_back(absl::StrFormat("top-1 agreement:      %.2f%%", 100.0 * m.top1_agreement()));
  if (m.has_output_sqnr_db())
    lines.push_back(absl::StrFormat("output vs float:      SQNR %.2f dB, relative MSE %.3g",
                                    m.output_sqnr_db(), m.output_relative_mse()));
  if (m.has_float_target_mse() && m.has_quantized_target_mse())
    lines.push_back(absl::StrFormat("target MSE:           %.5g float, %.5g quantized",
                                    m.float_target_mse(), m.quantized_target_mse()));
  for (const auto& b : m.buckets()) {
    std::string line = absl::StrFormat("  bucket %-3d          SQNR %.2f dB, relative MSE %.3g",
                                       b.bucket(), b.output_sqnr_db(), b.output_relative_mse());
    if (b.has_float_target_mse() && b.has_quantized_target_mse())
      absl::StrAppend(&line, absl::StrFormat(", target MSE %.5g -> %.5g", b.float_target_mse(),
                                             b.quantized_target_mse()));
    absl::StrAppend(&line, absl::StrFormat(" (%d samples)", b.samples()));
    lines.push_back(line);
  }
  if (m.has_training()) {
    const auto& t = m.training();
    std::string line = absl::StrFormat("training:             %d steps, %s loss %.5g -> %.5g",
                                       t.steps(), t.loss(), t.first_loss(), t.final_loss());
    if (t.resumed_after_step() > 0)
      absl::StrAppend(&line, absl::StrFormat(" (resumed after step %d)", t.resumed_after_step()));
    lines.push_back(line);
  }
  if (m.float_model_bytes() > 0 && m.quantized_model_bytes() > 0)
    lines.push_back(
        absl::StrFormat("model size:           %s -> %s (%.2fx)", HumanBytes(m.float_model_bytes()),
                        HumanBytes(m.quantized_model_bytes()),
                        static_cast<double>(m.quantized_model_bytes()) / m.float_model_bytes()));
  if (m.stage_timings_size() > 0) {
    std::vector<std::string> parts;
    for (const auto& t : m.stage_timings())
      parts.push_back(absl::StrCat(absl::AsciiStrToLower(quantd::v1::Stage_Name(t.stage())), " ",
                                   Seconds(t.seconds())));
    lines.push_back("stage times:          " + absl::StrJoin(parts, ", "));
  }
  return absl::StrJoin(lines, "\n");
}

std::vector<std::string> RenderSensitivity(const quantd::v1::Job& job) {
  const auto& candidates = job.spec().sensitivity().candidates();
  std::vector<std::string> lines;
  for (int c = 0; c < candidates.size(); ++c) {
    std::string most, least;
    double hi = -1, lo = INFINITY;
    int layers = 0;
    for (const auto& b : job.result().metrics().blocks()) {
      for (const auto& l : b.layers()) {
        if (l.sensitivity_relative_mse_size() != candidates.size()) continue;
        const double e = l.sensitivity_relative_mse(c);
        ++layers;
        if (e > hi) hi = e, most = l.name();
        if (e < lo) lo = e, least = l.name();
      }
    }
    if (layers == 0) continue;
    lines.push_back(
        absl::StrFormat("sensitivity %s: %d layers, block out rel-mse %.3g (%s) to %.3g (%s)",
                        candidates[c], layers, hi, most, lo, least));
  }
  return lines;
}

namespace {

const quantd::v1::AutoPrecisionRound* ChosenRound(const quantd::v1::AutoPrecisionResult& r) {
  for (const auto& round : r.rounds())
    if (round.round() == r.chosen_round()) return &round;
  return nullptr;
}

std::string PercentChange(double ratio_minus_one) {
  return absl::StrFormat("%+.2f%%", 100.0 * ratio_minus_one);
}

// A round's cost under the user's table (spec.auto_precision.cost_per_weight),
// in the table's units.
std::string Cost(double cost) { return absl::StrFormat("%.4g", cost); }

// Columns padded to their widest cell, two spaces apart (the last one not
// padded).
std::vector<std::string> AlignColumns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size());
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::vector<std::string> out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    out.push_back(line);
  }
  return out;
}

}  // namespace

bool IsClassifierSearch(const quantd::v1::AutoPrecisionResult& r) {
  return r.has_float_top1_accuracy() ||
         std::any_of(r.rounds().begin(), r.rounds().end(),
                     [](const auto& round) { return round.has_accuracy_drop(); });
}

std::string PointsChange(double accuracy_drop) {
  // 0.0 - x: no "-0.00" for a drop of exactly 0.
  return absl::StrFormat("%+.2f", 0.0 - 100.0 * accuracy_drop);
}

std::vector<std::vector<std::string>> RoundsTable(const quantd::v1::AutoPrecisionResult& r,
                                                  const std::vector<RoundColumn>& columns,
                                                  const std::string& missing) {
  std::vector<std::vector<std::string>> rows = {{}};
  for (const auto& round : r.rounds()) rows.emplace_back();
  for (const RoundColumn& column : columns) {
    std::vector<std::string> cells;
    for (const auto& round : r.rounds()) cells.push_back(column.cell(round));
    if (std::all_of(cells.begin(), cells.end(), [](const auto& c) { return c.empty(); })) continue;
    rows[0].push_back(column.header);
    for (size_t i = 0; i < cells.size(); ++i)
      rows[i + 1].push_back(cells[i].empty() ? missing : cells[i]);
  }
  return rows;
}

std::string DescribeAutoPrecision(const quantd::v1::Job& job) {
  const quantd::v1::AutoPrecisionResult& r = job.result().auto_precision();
  if (r.rounds_size() == 0) return "";
  std::string line = "auto precision: ";
  absl::StrAppend(
      &line, r.budget_met() ? "budget met in round " : "budget NOT met: the best found is round ",
      r.chosen_round(), " of ", r.rounds_size());
  if (const quantd::v1::AutoPrecisionRound* c = ChosenRound(r)) {
    std::vector<std::string> facts = {IsClassifierSearch(r)
                                          ? "top-1 " + PointsChange(c->accuracy_drop()) + " points"
                                          : "ppl " + PercentChange(c->perplexity_increase())};
    if (c->has_kl_divergence_mean())
      facts.push_back(absl::StrFormat("KL %.5f", c->kl_divergence_mean()));
    if (c->has_cost()) facts.push_back("cost " + Cost(c->cost()));
    facts.push_back(absl::StrFormat("%.2f bits/weight", c->bits_per_weight()));
    absl::StrAppend(&line, " (", absl::StrJoin(facts, ", "), ")");
  }
  const auto& candidates =
      r.candidates().empty() ? job.spec().auto_precision().candidates() : r.candidates();
  absl::StrAppend(&line, "; candidates ", absl::StrJoin(candidates, ", "));
  if (r.from_cache()) absl::StrAppend(&line, " (sensitivities from the cache)");
  return line;
}

std::vector<std::string> RenderAutoPrecision(const quantd::v1::Job& job) {
  const quantd::v1::AutoPrecisionResult& r = job.result().auto_precision();
  if (r.rounds_size() == 0) return {};
  std::vector<std::string> lines = {DescribeAutoPrecision(job)};
  const bool top1 = IsClassifierSearch(r);

  // The float perplexity or top-1 accuracy and the budget (the evaluation's
  // gate).
  const auto& ev = job.spec().evaluation();
  std::vector<std::string> budget;
  if (ev.has_max_perplexity_increase()) {
    std::string b = "ppl " + PercentChange(ev.max_perplexity_increase());
    if (r.float_perplexity() > 0)
      absl::StrAppend(&b, absl::StrFormat(" (%.4f)", r.float_perplexity() *
                                                         (1 + ev.max_perplexity_increase())));
    budget.push_back(b);
  }
  if (ev.has_max_kl_divergence())
    budget.push_back(absl::StrFormat("mean KL %.5f", ev.max_kl_divergence()));
  if (ev.has_max_accuracy_drop())
    budget.push_back(PointsChange(ev.max_accuracy_drop()) + " points");
  std::vector<std::string> facts;
  if (r.has_float_top1_accuracy())
    facts.push_back(absl::StrFormat("float top-1 %.2f%%", 100.0 * r.float_top1_accuracy()));
  if (r.float_perplexity() > 0)
    facts.push_back(absl::StrFormat("float ppl %.4f", r.float_perplexity()));
  if (!budget.empty()) facts.push_back("budget " + absl::StrJoin(budget, ", "));
  if (!facts.empty()) lines.push_back("  " + absl::StrJoin(facts, "; "));

  // The accuracy columns: top-1 for a classifier, else perplexity; then
  // what some round has.
  using Round = quantd::v1::AutoPrecisionRound;
  std::vector<RoundColumn> columns = {
      {"",
       [&](const Round& round) {
         return absl::StrCat(round.round() == r.chosen_round() ? "*" : " ",
                             round.pareto() ? "p" : " ");
       }},
      {"round", [](const Round& round) { return absl::StrCat(round.round()); }},
      {"bits/w",
       [](const Round& round) { return absl::StrFormat("%.2f", round.bits_per_weight()); }},
      {"weight bytes", [](const Round& round) { return HumanBytes(round.weight_bytes()); }},
      {"cost", [](const Round& round) { return round.has_cost() ? Cost(round.cost()) : ""; }}};
  if (top1) {
    columns.push_back({"top-1", [](const Round& round) {
                         return round.has_top1_accuracy()
                                    ? absl::StrFormat("%.2f%%", 100.0 * round.top1_accuracy())
                                    : "";
                       }});
    columns.push_back({"points", [](const Round& round) {
                         return round.has_accuracy_drop() ? PointsChange(round.accuracy_drop())
                                                          : "";
                       }});
    columns.push_back({"predicted", [](const Round& round) {
                         return round.has_predicted_accuracy_drop()
                                    ? PointsChange(round.predicted_accuracy_drop())
                                    : "";
                       }});
  } else {
    columns.push_back(
        {"ppl", [](const Round& round) { return absl::StrFormat("%.4f", round.perplexity()); }});
    columns.push_back(
        {"ppl +%", [](const Round& round) { return PercentChange(round.perplexity_increase()); }});
    columns.push_back({"predicted", [](const Round& round) {
                         return round.has_predicted_perplexity_increase()
                                    ? PercentChange(round.predicted_perplexity_increase())
                                    : "";
                       }});
  }
  columns.push_back({"KL", [](const Round& round) {
                       return round.has_kl_divergence_mean()
                                  ? absl::StrFormat("%.5f", round.kl_divergence_mean())
                                  : "";
                     }});
  columns.push_back({"predicted KL", [](const Round& round) {
                       return round.has_predicted_kl_divergence()
                                  ? absl::StrFormat("%.5f", round.predicted_kl_divergence())
                                  : "";
                     }});
  columns.push_back(
      {"budget", [](const Round& round) { return round.meets_budget() ? "met" : "missed"; }});
  columns.push_back({"layers per candidate", [](const Round& round) {
                       return absl::StrJoin(round.layers_per_candidate(), " / ");
                     }});
  for (const std::string& line : AlignColumns(RoundsTable(r, columns, "-")))
    lines.push_back("  " + line);
  lines.push_back(absl::StrCat("  (* chosen, p on the Pareto frontier of ",
                               std::all_of(r.rounds().begin(), r.rounds().end(),
                                           [](const Round& round) { return round.has_cost(); })
                                   ? "cost"
                                   : "size",
                               " and ", top1 ? "top-1 accuracy" : "perplexity", ")"));
  return lines;
}

std::string RenderJob(const quantd::v1::Job& job) {
  std::vector<std::string> lines;
  lines.push_back("name:       " + job.name());
  std::string state = quantd::v1::JobState_Name(job.state());
  if (job.attempt() > 0) absl::StrAppend(&state, " (attempt ", job.attempt(), ")");
  if (!job.worker().empty()) absl::StrAppend(&state, " on ", job.worker());
  lines.push_back("state:      " + state);
  std::string model = job.spec().model_uri();
  if (!job.result().resolved_revision().empty())
    absl::StrAppend(&model, " (commit ", job.result().resolved_revision(), ")");
  lines.push_back("model:      " + model);
  // Hub datasets name the commit they ran on (other sources have none).
  if (!job.result().calibration_dataset_revision().empty())
    lines.push_back("calib data: " + job.spec().calibration().dataset_uri() + " (commit " +
                    job.result().calibration_dataset_revision() + ")");
  if (!job.result().evaluation_dataset_revision().empty())
    lines.push_back("eval data:  " + job.spec().evaluation().dataset_uri() + " (commit " +
                    job.result().evaluation_dataset_revision() + ")");
  lines.push_back("quantize:   " + DescribeQuantization(job.spec()));
  if (job.state() == quantd::v1::RUNNING || job.state() == quantd::v1::CANCELLING)
    lines.push_back("progress:   " + RenderProgressBar(job.progress(), 20));
  lines.push_back("created:    " + Time(job.create_time()));
  if (job.has_end_time() && job.has_start_time())
    lines.push_back(
        "ran for:    " +
        Seconds(TimeUtil::DurationToMilliseconds(job.end_time() - job.start_time()) / 1e3));
  if (!job.spec().labels().empty()) {
    std::vector<std::string> labels;
    for (const auto& [k, v] : job.spec().labels()) labels.push_back(k + "=" + v);
    std::sort(labels.begin(), labels.end());
    lines.push_back("labels:     " + absl::StrJoin(labels, ","));
  }
  std::string metrics = RenderMetrics(job.result().metrics());
  if (!metrics.empty()) lines.push_back(metrics);
  for (const std::string& line : RenderSensitivity(job)) lines.push_back(line);
  for (const std::string& line : RenderAutoPrecision(job)) lines.push_back(line);
  for (const auto& a : job.result().artifacts()) {
    lines.push_back(absl::StrFormat(
        "artifact:   %s %s (%s, sha256 %s)%s%s", quantd::v1::ExportFormat_Name(a.format()),
        a.uri(), HumanBytes(a.bytes()), a.sha256().substr(0, 16),
        a.consumers().empty() ? "" : " loads in: " + absl::StrJoin(a.consumers(), ", "),
        a.accepted() ? "" : " NOT ACCEPTED"));
  }
  if (job.has_error() && job.error().code() != 0)
    lines.push_back("error:      " + job.error().message());
  return absl::StrJoin(lines, "\n") + "\n";
}

void ProgressDisplay::Show(const quantd::v1::Progress& p) {
  if (in_place_) {
    err_ << "\r" << RenderProgressBar(p) << "\033[K" << std::flush;
    line_open_ = true;
  } else if (!any_ || p.stage() != shown_.stage() || p.block() != shown_.block()) {
    err_ << RenderProgressBar(p) << std::endl;
  }
  any_ = true;
  shown_ = p;
}

void ProgressDisplay::EndLine() {
  if (line_open_) err_ << "\n" << std::flush;
  line_open_ = false;
}

std::string ToJson(const google::protobuf::Message& m, bool pretty) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opt;
  opt.add_whitespace = pretty;
  (void)google::protobuf::util::MessageToJsonString(m, &out, opt);
  if (!pretty) out.erase(std::remove(out.begin(), out.end(), '\n'), out.end());
  return out;
}

bool StdoutAndStderrAreTerminals() { return isatty(STDOUT_FILENO) && isatty(STDERR_FILENO); }

std::string RenderJobTable(const std::vector<quantd::v1::Job>& jobs) {
  std::string out = absl::StrFormat("%-30s %-11s %-26s %-9s %s\n", "NAME", "STATE", "QUANTIZATION",
                                    "PROGRESS", "CREATED");
  for (const auto& j : jobs) {
    std::string progress = "-";
    if (j.state() == quantd::v1::RUNNING || j.state() == quantd::v1::CANCELLING)
      progress = absl::StrFormat("%.0f%%", j.progress().percent());
    out += absl::StrFormat("%-30s %-11s %-26s %-9s %s\n", j.name(),
                           quantd::v1::JobState_Name(j.state()), DescribeQuantization(j.spec()),
                           progress, Time(j.create_time()));
  }
  return out;
}

}  // namespace quantd::cli_common
