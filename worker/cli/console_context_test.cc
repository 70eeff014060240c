#include "worker/cli/console_context.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace quantd::cli {
namespace {

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string line; std::getline(ss, line);) out.push_back(line);
  return out;
}

quantd::v1::Progress Prog(quantd::v1::Stage stage, int block, double pct) {
  quantd::v1::Progress p;
  p.set_stage(stage);
  p.set_block(block);
  p.set_block_count(5);
  p.set_percent(pct);
  return p;
}

TEST(ConsoleJobContextTest, TextModePrintsOneProgressLinePerStageAndBlockLikeQuantctl) {
  std::ostringstream out, err;
  ConsoleJobContext ctx({"jobs/x", false, false}, out, err, nullptr);
  ctx.ReportState(quantd::v1::RUNNING);
  ctx.SetProgress(Prog(quantd::v1::QUANTIZE, 1, 10));
  ctx.SetProgress(Prog(quantd::v1::QUANTIZE, 1, 12));  // same block: no new line
  ctx.SetProgress(Prog(quantd::v1::QUANTIZE, 2, 30));
  quantd::v1::JobEvent log;
  log.mutable_log()->set_severity(quantd::v1::WARNING);
  log.mutable_log()->set_message("careful");
  ctx.Report(log);
  quantd::v1::JobEvent bm;
  bm.mutable_block_metrics()->set_block(2);
  bm.mutable_block_metrics()->set_output_rel_mse(1.5e-3);
  ctx.Report(bm);
  ctx.Finish();
  EXPECT_EQ(Lines(err.str()),
            (std::vector<std::string>{"[###...........................]  10% QUANTIZE block 1/5",
                                      "[#########.....................]  30% QUANTIZE block 2/5"}));
  EXPECT_EQ(Lines(out.str()), (std::vector<std::string>{"state: RUNNING", "warning: careful",
                                                        "block  2/5   out rel-mse 1.500e-03"}));
  EXPECT_EQ(ctx.last_progress().percent(), 30);
}

TEST(ConsoleJobContextTest, JsonModeWritesNumberedEventsOnePerLine) {
  std::ostringstream out, err;
  ConsoleJobContext ctx({"jobs/x", true, false}, out, err, nullptr);
  ctx.ReportState(quantd::v1::RUNNING);
  ctx.SetProgress(Prog(quantd::v1::LOAD, 0, 1));
  ctx.SetProgress(Prog(quantd::v1::LOAD, 0, 2));  // coalesced
  ctx.SetProgress(Prog(quantd::v1::EVALUATE, 0, 90));
  ctx.Finish();
  EXPECT_EQ(err.str(), "");
  auto lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 3u);
  std::vector<quantd::v1::JobEvent> events(3);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(lines[i], &events[i]).ok()) << lines[i];
    EXPECT_EQ(events[i].sequence(), static_cast<int64_t>(i + 1));
    EXPECT_EQ(events[i].job(), "jobs/x");
    EXPECT_GT(events[i].time().seconds(), 0);
  }
  EXPECT_EQ(events[0].state(), quantd::v1::RUNNING);
  EXPECT_EQ(events[1].progress().stage(), quantd::v1::LOAD);
  EXPECT_EQ(events[2].progress().stage(), quantd::v1::EVALUATE);
  EXPECT_EQ(events[2].progress().percent(), 90);
}

TEST(ConsoleJobContextTest, TerminalRedrawsInPlaceAndCancelFollowsTheFlag) {
  std::ostringstream out, err;
  std::atomic<bool> cancel{false};
  ConsoleJobContext ctx({"jobs/x", false, true}, out, err, &cancel);
  ctx.SetProgress(Prog(quantd::v1::QUANTIZE, 1, 0));
  ctx.SetProgress(Prog(quantd::v1::QUANTIZE, 1, 100));
  EXPECT_FALSE(ctx.CancelRequested());
  cancel.store(true);
  EXPECT_TRUE(ctx.CancelRequested());
  ctx.Finish();
  EXPECT_EQ(err.str(),
            "\r[..............................]   0% QUANTIZE block 1/5\033[K"
            "\r[##############################] 100% QUANTIZE block 1/5\033[K\n");
}

}  // namespace
}  // namespace quantd::cli
