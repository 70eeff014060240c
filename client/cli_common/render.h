// What quantctl and quantd-quantize print of a job: text summaries, list
// tables, the live progress bar, per-block metric rows, and the proto3 JSON
// of -o json. Pure functions of the protos, so they are tested without a
// server or an engine.
#ifndef QUANTD_CLIENT_CLI_COMMON_RENDER_H_
#define QUANTD_CLIENT_CLI_COMMON_RENDER_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "google/protobuf/message.h"
#include "quantd/v1/job.pb.h"

namespace quantd::cli_common {

// Multi-line human summary of a job (state, spec, metrics, artifacts, error).
std::string RenderJob(const quantd::v1::Job& job);
// One line per job with a header row.
std::string RenderJobTable(const std::vector<quantd::v1::Job>& jobs);
// "[#########...........]  45% QUANTIZE block 3/5" (width counts the bar only).
std::string RenderProgressBar(const quantd::v1::Progress& p, int width = 30);
// One compact row of per-block metrics: block, output rel-MSE (only when it
// was measured: a job without calibration data has none), min/mean weight
// SQNR and the worst layer.
std::string RenderBlockMetrics(const quantd::v1::BlockMetrics& b, int block_count);
// Final metrics block printed when a watched job ends.
std::string RenderMetrics(const quantd::v1::Metrics& m);
// Per spec.sensitivity candidate: its most and least sensitive layers.
std::vector<std::string> RenderSensitivity(const quantd::v1::Job& job);
// result.auto_precision (spec.auto_precision's search), empty without
// rounds: a line on what it chose ("auto precision: budget met in round 2
// of 3 (ppl +1.84%, 5.12 bits/weight); candidates ...", for a classifier
// "(top-1 -0.50 points, ...)", with the round's cost when the spec gave a
// cost table), the float perplexity or top-1 accuracy and the budget, then
// one row per measured round, the chosen round marked '*' and those on the
// Pareto frontier 'p'.
std::vector<std::string> RenderAutoPrecision(const quantd::v1::Job& job);
// That first line alone, "" without rounds (the job report's summary).
std::string DescribeAutoPrecision(const quantd::v1::Job& job);
// Whether the search is a classifier's (a TorchScript model, budget
// evaluation.max_accuracy_drop): its rounds measure top-1 accuracy, and
// their perplexity fields are 0.
bool IsClassifierSearch(const quantd::v1::AutoPrecisionResult& r);
// A top-1 accuracy drop (a fraction) as the change in points: 0.005 is
// "-0.50".
std::string PointsChange(double accuracy_drop);
// A column of a table of the search's rounds: its header, and a round's
// cell ("" where the round has no such value).
struct RoundColumn {
  std::string header;
  std::function<std::string(const quantd::v1::AutoPrecisionRound&)> cell;
};
// The header row, then one row per round; a column no round has a value
// for is left out, and `missing` stands in for the value a round lacks.
std::vector<std::vector<std::string>> RoundsTable(const quantd::v1::AutoPrecisionResult& r,
                                                  const std::vector<RoundColumn>& columns,
                                                  const std::string& missing);
// The quantization the spec asks for, e.g. "w_int4_per_group_sym (group 32)",
// "llama.cpp Q4_K_M" for a llama.cpp recipe (export.gguf_type) alone, or
// "auto precision (w_uint4_per_group_asym, float; group 32)" for a search.
std::string DescribeQuantization(const quantd::v1::JobSpec& spec);
std::string HumanBytes(int64_t bytes);

// The live progress display of `quantctl watch` and quantd-quantize, on
// stderr. In place (one line redrawn with \r) only when stdout and stderr
// are both terminals: were stdout a pipe (`| tee log`), its lines would be
// written into the middle of the bar. Otherwise one plain line per stage or
// block. EndLine() ends a bar drawn in place; call it before printing
// anything else and when the job ends.
class ProgressDisplay {
 public:
  ProgressDisplay(std::ostream& err, bool in_place) : err_(err), in_place_(in_place) {}
  void Show(const quantd::v1::Progress& p);
  void EndLine();
  bool in_place() const { return in_place_; }

 private:
  std::ostream& err_;
  bool in_place_;
  bool line_open_ = false;
  bool any_ = false;
  quantd::v1::Progress shown_;
};

// proto3 JSON of a message: indented when `pretty`, else on one line (one
// event per line in a stream).
std::string ToJson(const google::protobuf::Message& m, bool pretty = true);

// Whether this process's stdout and stderr are both terminals.
bool StdoutAndStderrAreTerminals();

}  // namespace quantd::cli_common

#endif  // QUANTD_CLIENT_CLI_COMMON_RENDER_H_
