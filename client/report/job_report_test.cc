#include "client/report/job_report.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "client/report/svg_chart.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quantd::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Three blocks of a small model: block 2's o_proj kept float, block 3
// without a measured output error, a label a tenant chose to be hostile.
quantd::v1::Job SampleJob() {
  quantd::v1::Job job;
  job.set_name("jobs/abc");
  job.set_state(quantd::v1::SUCCEEDED);
  job.set_attempt(1);
  auto* spec = job.mutable_spec();
  spec->set_model_uri("file:///models/stories260K");
  spec->mutable_quantization()->set_scheme("w_int8_per_channel_sym");
  (*spec->mutable_labels())["team"] = "<script>alert(1)</script>|x";
  auto* m = job.mutable_result()->mutable_metrics();
  m->mutable_float_perplexity()->set_perplexity(5.0);
  m->mutable_quantized_perplexity()->set_perplexity(5.1);
  m->mutable_quantized_perplexity()->mutable_protocol()->set_windows(4);
  m->mutable_quantized_perplexity()->mutable_protocol()->set_n_ctx(256);
  m->mutable_quantized_perplexity()->mutable_protocol()->set_tokens(1020);
  m->set_kl_divergence_mean(0.0125);
  m->set_float_model_bytes(4000);
  m->set_quantized_model_bytes(1000);
  const double errors[] = {1e-4, 2e-3, std::nan("")};
  for (int b = 1; b <= 3; ++b) {
    auto* block = m->add_blocks();
    block->set_block(b);
    block->set_block_count(3);
    block->set_seconds(0.5 * b);
    if (!std::isnan(errors[b - 1])) block->set_output_rel_mse(errors[b - 1]);
    for (const char* role : {"self_attn.q_proj", "self_attn.o_proj", "mlp.down_proj"}) {
      auto* l = block->add_layers();
      l->set_name("model.layers." + std::to_string(b - 1) + "." + role);
      l->set_weight_sqnr_db(30 + b);
      if (b == 2 && std::string(role) == "self_attn.o_proj") {
        l->set_excluded(true);
        l->set_weight_sqnr_db(std::numeric_limits<double>::infinity());
      }
      if (std::string(role) == "mlp.down_proj") {
        l->set_input_min(-2.0 * b);
        l->set_input_max(3.0 * b);
      }
    }
  }
  auto* t = m->add_stage_timings();
  t->set_stage(quantd::v1::QUANTIZE);
  t->set_seconds(1.5);
  auto* a = job.mutable_result()->add_artifacts();
  a->set_format(quantd::v1::HF_QUARK);
  a->set_uri("file:///out/a");
  a->set_bytes(1044992);
  a->set_sha256("7689e1e7");
  a->set_accepted(true);
  return job;
}

// A TorchScript job's one block has no output error: no Blocks charts or
// table, the layers' heatmap still.
TEST(JobReportTest, BlocksWithoutOutputErrorDrawNoBlockCharts) {
  quantd::v1::Job job = SampleJob();
  for (auto& block : *job.mutable_result()->mutable_metrics()->mutable_blocks())
    block.clear_output_rel_mse();
  const std::string html = RenderJobReportHtml(job);
  EXPECT_THAT(html, Not(HasSubstr("block-output-error")));
  EXPECT_THAT(html, Not(HasSubstr("block-seconds")));
  EXPECT_THAT(html, HasSubstr("data-series=\"layer-sqnr\""));
  const std::string md = RenderJobReportMarkdown(job);
  EXPECT_THAT(md, Not(HasSubstr("## Blocks")));
  EXPECT_THAT(md, HasSubstr("## Weight SQNR (dB), layers by block"));
}

TEST(JobReportTest, HtmlIsSelfContainedAndEscapesTenantText) {
  const std::string html = RenderJobReportHtml(SampleJob());
  EXPECT_THAT(html, HasSubstr("Content-Security-Policy"));
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, HasSubstr("team=&lt;script&gt;alert(1)&lt;/script&gt;|x"));
  // Nothing to load: no src or href attribute anywhere, no URL in an
  // attribute but the SVG namespace.
  EXPECT_THAT(html, Not(HasSubstr("src=")));
  EXPECT_THAT(html, Not(HasSubstr("href=")));
  EXPECT_EQ(Count(html, "=\"http"), Count(html, "xmlns=\"http://www.w3.org/2000/svg\""));
}

TEST(JobReportTest, HtmlDrawsEveryChartWithItsValues) {
  const std::string html = RenderJobReportHtml(SampleJob());
  for (const char* series : {"block-output-error", "block-seconds", "layer-sqnr",
                             "activation-ranges", "stage-seconds"}) {
    EXPECT_EQ(Count(html, std::string("data-series=\"") + series + "\""), 1u) << series;
  }
  // Two measured block errors (block 3 has none), three block times.
  EXPECT_THAT(html, HasSubstr("data-label=\"1\" data-value=\"0.0001\""));
  EXPECT_THAT(html, HasSubstr("data-label=\"2\" data-value=\"0.002\""));
  EXPECT_THAT(html, Not(HasSubstr("data-label=\"3\" data-value=\"nan\"")));
  // The heatmap: 3 roles x 3 blocks, the kept-float layer grey.
  EXPECT_EQ(Count(html, "<rect class=\"cell\""), 9u);
  EXPECT_THAT(html,
              HasSubstr("data-row=\"self_attn.o_proj\" data-column=\"2\" data-value=\"inf\""));
  EXPECT_THAT(html, HasSubstr("self_attn.o_proj, 2: float"));
  // Widest input range first.
  const size_t first = html.find("data-label=\"model.layers.2.mlp.down_proj\" data-min=\"-6\"");
  const size_t last = html.find("data-label=\"model.layers.0.mlp.down_proj\" data-min=\"-2\"");
  ASSERT_NE(first, std::string::npos);
  ASSERT_NE(last, std::string::npos);
  EXPECT_LT(first, last);
  EXPECT_THAT(html, HasSubstr("+2.00%"));  // 5.1 against 5.0
  EXPECT_THAT(html, HasSubstr("4.00x smaller"));
}

TEST(JobReportTest, MarkdownHasTheSameFacts) {
  const std::string md = RenderJobReportMarkdown(SampleJob());
  EXPECT_THAT(md, HasSubstr("# jobs/abc (SUCCEEDED)"));
  EXPECT_THAT(md, HasSubstr("| Quantized perplexity | 5.1 (+2.00%) |"));
  EXPECT_THAT(md, HasSubstr("| Labels | team=&lt;script>alert(1)&lt;/script>\\|x |"));
  EXPECT_THAT(md, HasSubstr("| 1 | 0.0001 | 0.5 |"));
  EXPECT_THAT(md, HasSubstr("| 3 | nan | 1.5 |"));
  EXPECT_THAT(md, HasSubstr("| self_attn.o_proj | 31 | float | 33 |"));
  EXPECT_THAT(md, HasSubstr("| model.layers.2.mlp.down_proj | -6 | 9 |"));
  EXPECT_THAT(md, HasSubstr("| quantize | 1.5 |"));
  EXPECT_THAT(md, HasSubstr("| HF_QUARK | file:///out/a | 1020.5 KiB | 7689e1e7 | yes |"));
}

// Sensitivity: each layer's block output SQNR per candidate, in dB.
TEST(JobReportTest, SensitivityIsAHeatmapOfLayersByCandidate) {
  quantd::v1::Job job = SampleJob();
  job.mutable_spec()->mutable_sensitivity()->add_candidates("w_int4_per_channel_sym");
  job.mutable_spec()->mutable_sensitivity()->add_candidates("w_int8_per_channel_sym");
  auto* layers = job.mutable_result()->mutable_metrics()->mutable_blocks(0)->mutable_layers();
  for (auto& l : *layers) {
    l.add_sensitivity_relative_mse(1e-3);
    l.add_sensitivity_relative_mse(1e-5);
  }
  const std::string html = RenderJobReportHtml(job);
  EXPECT_EQ(Count(html, "data-series=\"layer-sensitivity\""), 1u);
  EXPECT_THAT(html, HasSubstr("data-row=\"model.layers.0.mlp.down_proj\" "
                              "data-column=\"w_int4_per_channel_sym\" data-value=\"30\""));
  EXPECT_THAT(html, HasSubstr("data-row=\"model.layers.0.mlp.down_proj\" "
                              "data-column=\"w_int8_per_channel_sym\" data-value=\"50\""));
  const std::string md = RenderJobReportMarkdown(job);
  EXPECT_THAT(md,
              HasSubstr("| Layer | w_int4_per_channel_sym (dB) | w_int8_per_channel_sym (dB) |"));
  EXPECT_THAT(md, HasSubstr("| model.layers.0.self_attn.q_proj | 30 | 50 |"));
  // Without the spec's candidates there is no section.
  EXPECT_THAT(RenderJobReportHtml(SampleJob()), Not(HasSubstr("layer-sensitivity")));
}

// Auto precision: three measured rounds over two presets and float, round 2
// chosen, rounds 1 and 2 on the Pareto frontier, a 2% perplexity budget.
quantd::v1::Job AutoPrecisionJob() {
  quantd::v1::Job job = SampleJob();
  auto* spec = job.mutable_spec();
  spec->mutable_quantization()->clear_scheme();
  spec->mutable_evaluation()->set_max_perplexity_increase(0.02);
  for (const char* c : {"w_uint4_per_group_asym", "w_int8_per_channel_sym", "float"}) {
    spec->mutable_auto_precision()->add_candidates(c);
    job.mutable_result()->mutable_auto_precision()->add_candidates(c);
  }
  auto* r = job.mutable_result()->mutable_auto_precision();
  struct Round {
    double bits, ppl;
    bool meets, pareto;
    std::vector<int> layers;
  };
  const Round rounds[] = {{4.25, 5.2, false, true, {9, 0, 0}},
                          {5.0, 5.08, true, true, {6, 2, 1}},
                          {5.5, 5.09, true, false, {5, 3, 1}}};
  for (int i = 0; i < 3; ++i) {
    auto* round = r->add_rounds();
    round->set_round(i + 1);
    round->set_bits_per_weight(rounds[i].bits);
    round->set_weight_bytes(static_cast<int64_t>(rounds[i].bits * 1000));
    round->set_perplexity(rounds[i].ppl);
    round->set_perplexity_increase(rounds[i].ppl / 5.0 - 1);
    round->set_predicted_perplexity_increase(0.01 * (3 - i));
    round->set_meets_budget(rounds[i].meets);
    round->set_pareto(rounds[i].pareto);
    for (int n : rounds[i].layers) round->add_layers_per_candidate(n);
  }
  r->set_chosen_round(2);
  r->set_budget_met(true);
  r->set_float_perplexity(5.0);
  const char* chosen[][2] = {{"model.layers.0.self_attn.q_proj", "w_uint4_per_group_asym"},
                             {"model.layers.0.mlp.down_proj", "w_int8_per_channel_sym"},
                             {"model.layers.1.mlp.down_proj", "w_int8_per_channel_sym"},
                             {"model.layers.2.mlp.down_proj", "float"}};
  for (const auto& [layer, candidate] : chosen) {
    auto* l = r->add_layers();
    l->set_layer(layer);
    l->set_candidate(candidate);
  }
  return job;
}

TEST(JobReportTest, AutoPrecisionIsAParetoChartOfTheRounds) {
  const quantd::v1::Job job = AutoPrecisionJob();
  const std::string html = RenderJobReportHtml(job);
  EXPECT_EQ(Count(html, "data-series=\"auto-precision-rounds\""), 1u);
  EXPECT_EQ(Count(html, "<circle class=\"point"), 3u);
  EXPECT_EQ(Count(html, "<circle class=\"point pareto\""), 2u);
  EXPECT_THAT(html, HasSubstr("<circle class=\"point pareto\" data-round=\"2\" "
                              "data-bits-per-weight=\"5\" data-value=\"5.08\" "
                              "data-meets-budget=\"true\""));
  EXPECT_THAT(html, HasSubstr("<circle class=\"point\" data-round=\"3\" "
                              "data-bits-per-weight=\"5.5\" data-value=\"5.09\""));
  // The frontier through rounds 1 and 2, smallest first; round 2 ringed.
  EXPECT_EQ(Count(html, "data-series=\"pareto-frontier\""), 1u);
  EXPECT_THAT(html, HasSubstr("data-series=\"pareto-frontier\" data-rounds=\"1 2\""));
  EXPECT_EQ(Count(html, "data-series=\"chosen\""), 1u);
  EXPECT_THAT(html, HasSubstr("<circle class=\"chosen\" data-series=\"chosen\" "
                              "data-round=\"2\" data-bits-per-weight=\"5\" data-value=\"5.08\""));
  // The float perplexity and the budget, 5 * 1.02.
  EXPECT_THAT(html, HasSubstr("data-series=\"float-perplexity\" data-value=\"5\""));
  EXPECT_THAT(html, HasSubstr("data-series=\"budget\" data-value=\"5.1\""));
  EXPECT_THAT(html, HasSubstr("<p>auto precision: budget met in round 2 of 3 (ppl +1.60%, "
                              "5.00 bits/weight); candidates w_uint4_per_group_asym, "
                              "w_int8_per_channel_sym, float</p>"));
  EXPECT_THAT(html, HasSubstr("<td>2 (chosen)</td><td>5.000</td>"));
  EXPECT_THAT(html, HasSubstr(">bits per weight (searched linears)</text>"));
  EXPECT_THAT(html, Not(HasSubstr("data-cost=")));
  EXPECT_THAT(html, HasSubstr("<td>w_int8_per_channel_sym</td><td>2</td><td><code>"
                              "model.layers.0.mlp.down_proj, model.layers.1.mlp.down_proj"
                              "</code></td>"));
  EXPECT_THAT(html, HasSubstr("<td>auto precision (w_uint4_per_group_asym, "
                              "w_int8_per_channel_sym, float)</td>"));

  // Without a perplexity budget (a KL one), no budget line.
  quantd::v1::Job kl_only = job;
  kl_only.mutable_spec()->mutable_evaluation()->clear_max_perplexity_increase();
  kl_only.mutable_spec()->mutable_evaluation()->set_max_kl_divergence(0.01);
  EXPECT_THAT(RenderJobReportHtml(kl_only), Not(HasSubstr("data-series=\"budget\"")));
  // Without rounds, no section.
  EXPECT_THAT(RenderJobReportHtml(SampleJob()), Not(HasSubstr("auto-precision")));
  EXPECT_THAT(RenderJobReportMarkdown(SampleJob()), Not(HasSubstr("Auto precision")));
}

TEST(JobReportTest, AutoPrecisionInMarkdownIsTheRoundsAndTheChosenFormats) {
  const std::string md = RenderJobReportMarkdown(AutoPrecisionJob());
  EXPECT_THAT(md, HasSubstr("## Auto precision\n\nauto precision: budget met in round 2 of 3 "
                            "(ppl +1.60%, 5.00 bits/weight); candidates w_uint4_per_group_asym, "
                            "w_int8_per_channel_sym, float\n\n"));
  EXPECT_THAT(md, HasSubstr("| Round | Bits/weight | Weight bytes | Perplexity | Ppl change | "
                            "Predicted ppl change | Budget | Pareto | Layers per candidate |"));
  EXPECT_THAT(md, HasSubstr("| 1 | 4.250 | 4.2 KiB | 5.2000 | +4.00% | +3.00% | missed | yes | "
                            "9 / 0 / 0 |"));
  EXPECT_THAT(md, HasSubstr("| 2 (chosen) | 5.000 | 4.9 KiB | 5.0800 | +1.60% | +2.00% | met | "
                            "yes | 6 / 2 / 1 |"));
  EXPECT_THAT(md, HasSubstr("| 3 | 5.500 | 5.4 KiB | 5.0900 | +1.80% | +1.00% | met | no | "
                            "5 / 3 / 1 |"));
  // A measured KL divergence gets its column.
  quantd::v1::Job kl = AutoPrecisionJob();
  kl.mutable_result()->mutable_auto_precision()->mutable_rounds(0)->set_kl_divergence_mean(0.0125);
  EXPECT_THAT(RenderJobReportMarkdown(kl),
              HasSubstr("| 1 | 4.250 | 4.2 KiB | 5.2000 | +4.00% | +3.00% | 0.0125 | missed |"));
  EXPECT_THAT(md, HasSubstr("### Chosen formats\n\n| Candidate | Layers | Names |\n"
                            "| --- | --- | --- |\n"
                            "| w_uint4_per_group_asym | 1 | model.layers.0.self_attn.q_proj |\n"
                            "| w_int8_per_channel_sym | 2 | model.layers.0.mlp.down_proj, "
                            "model.layers.1.mlp.down_proj |\n"
                            "| float | 1 | model.layers.2.mlp.down_proj |\n"));
}

// A classifier's search (a TorchScript model, a one-point top-1 budget)
// with a cost table: the rounds carry top-1 accuracy and cost, no
// perplexity.
quantd::v1::Job ClassifierAutoPrecisionJob() {
  quantd::v1::Job job = AutoPrecisionJob();
  auto* spec = job.mutable_spec();
  spec->set_model_uri("file:///models/digits_cnn/model.pt");
  spec->mutable_evaluation()->clear_max_perplexity_increase();
  spec->mutable_evaluation()->set_max_accuracy_drop(0.01);
  auto& table = *spec->mutable_auto_precision()->mutable_cost_per_weight();
  table["w_uint4_per_group_asym"] = 0.25;
  table["w_int8_per_channel_sym"] = 0.4;
  table["float"] = 1;
  auto* r = job.mutable_result()->mutable_auto_precision();
  r->set_float_perplexity(0);
  r->set_float_top1_accuracy(0.98);
  const double drops[] = {0.02, 0.005, 0.0075}, costs[] = {1000, 1500, 1800};
  for (int i = 0; i < 3; ++i) {
    auto* round = r->mutable_rounds(i);
    round->set_perplexity(0);
    round->set_perplexity_increase(0);
    round->clear_predicted_perplexity_increase();
    round->set_accuracy_drop(drops[i]);
    round->set_top1_accuracy(0.98 - drops[i]);
    if (i > 0) round->set_predicted_accuracy_drop(drops[i] - 0.001);
    round->set_cost(costs[i]);
  }
  return job;
}

TEST(JobReportTest, AClassifiersSearchChartsTopOneDropByCost) {
  const std::string html = RenderJobReportHtml(ClassifierAutoPrecisionJob());
  EXPECT_EQ(Count(html, "data-series=\"auto-precision-rounds\""), 1u);
  EXPECT_EQ(Count(html, "<circle class=\"point"), 3u);
  // x the cost, y the drop in points; the values as data attributes.
  EXPECT_THAT(html, HasSubstr(">cost (user table)</text>"));
  EXPECT_THAT(html, HasSubstr(">top-1 accuracy drop (points)</text>"));
  EXPECT_THAT(html, HasSubstr("Auto precision: top-1 accuracy drop by cost, one point per "
                              "measured round"));
  EXPECT_THAT(html, HasSubstr("<circle class=\"point pareto\" data-round=\"2\" "
                              "data-bits-per-weight=\"5\" data-cost=\"1500\" data-value=\"0.5\" "
                              "data-meets-budget=\"true\""));
  EXPECT_THAT(html, HasSubstr("<circle class=\"chosen\" data-series=\"chosen\" data-round=\"2\" "
                              "data-bits-per-weight=\"5\" data-cost=\"1500\" data-value=\"0.5\""));
  EXPECT_THAT(html, HasSubstr("data-series=\"pareto-frontier\" data-rounds=\"1 2\""));
  EXPECT_THAT(html, HasSubstr("round 2: 5.000 bits/weight, cost 1500, top-1 97.50% "
                              "(-0.50 points), budget met, Pareto, chosen"));
  // The float model at 0, the budget at one point; no perplexity line.
  EXPECT_THAT(html, HasSubstr("data-series=\"float-accuracy\" data-value=\"0\""));
  EXPECT_THAT(html, HasSubstr(">float 98.00%</text>"));
  EXPECT_THAT(html, HasSubstr("data-series=\"budget\" data-value=\"1\""));
  EXPECT_THAT(html, HasSubstr(">budget 1.00 points</text>"));
  EXPECT_THAT(html, Not(HasSubstr("float-perplexity")));
  EXPECT_THAT(html, HasSubstr("<p>auto precision: budget met in round 2 of 3 (top-1 -0.50 "
                              "points, cost 1500, 5.00 bits/weight); candidates "
                              "w_uint4_per_group_asym, w_int8_per_channel_sym, float</p>"));

  const std::string md = RenderJobReportMarkdown(ClassifierAutoPrecisionJob());
  EXPECT_THAT(
      md, HasSubstr("| Round | Bits/weight | Weight bytes | Cost | Top-1 accuracy | "
                    "Top-1 change (points) | Predicted top-1 change (points) | Budget | Pareto | "
                    "Layers per candidate |"));
  EXPECT_THAT(md, HasSubstr("| 1 | 4.250 | 4.2 KiB | 1000 | 96.00% | -2.00 |  | missed | "
                            "yes | 9 / 0 / 0 |"));
  EXPECT_THAT(md, HasSubstr("| 2 (chosen) | 5.000 | 4.9 KiB | 1500 | 97.50% | -0.50 | -0.40 | "
                            "met | yes | 6 / 2 / 1 |"));
  EXPECT_THAT(md, Not(HasSubstr("Perplexity |")));
  // The job's own top-1 accuracy in the Accuracy section.
  quantd::v1::Job measured = ClassifierAutoPrecisionJob();
  auto* m = measured.mutable_result()->mutable_metrics();
  m->set_evaluation_samples(360);
  m->set_float_top1_accuracy(0.98);
  m->set_quantized_top1_accuracy(0.975);
  EXPECT_THAT(RenderJobReportMarkdown(measured),
              HasSubstr("| Top-1 accuracy | 98.00% float, 97.50% quantized (-0.50 points, 360 "
                        "samples) |"));

  // A round without a cost (a table edited by hand): x falls back to bits
  // per weight, the table keeps the costs it has.
  quantd::v1::Job partial = ClassifierAutoPrecisionJob();
  partial.mutable_result()->mutable_auto_precision()->mutable_rounds(0)->clear_cost();
  const std::string partial_html = RenderJobReportHtml(partial);
  EXPECT_THAT(partial_html, HasSubstr(">bits per weight (searched linears)</text>"));
  EXPECT_THAT(partial_html, Not(HasSubstr("data-cost=")));
  EXPECT_THAT(RenderJobReportMarkdown(partial),
              HasSubstr("| 1 | 4.250 | 4.2 KiB |  | 96.00% | -2.00 |"));
}

// A language model's search with a cost table: perplexity by cost.
TEST(JobReportTest, ACostTablePutsTheCostOnTheXAxis) {
  quantd::v1::Job job = AutoPrecisionJob();
  const double costs[] = {2e6, 2.5e6, 3e6};
  for (int i = 0; i < 3; ++i)
    job.mutable_result()->mutable_auto_precision()->mutable_rounds(i)->set_cost(costs[i]);
  const std::string html = RenderJobReportHtml(job);
  EXPECT_THAT(html, HasSubstr(">cost (user table)</text>"));
  EXPECT_THAT(html, HasSubstr("Auto precision: perplexity by cost, one point per measured round"));
  EXPECT_THAT(html, HasSubstr("<circle class=\"point pareto\" data-round=\"2\" "
                              "data-bits-per-weight=\"5\" data-cost=\"2.5e+06\" "
                              "data-value=\"5.08\""));
  EXPECT_THAT(html, HasSubstr("data-series=\"float-perplexity\" data-value=\"5\""));
  EXPECT_THAT(html, HasSubstr("data-series=\"budget\" data-value=\"5.1\""));
  EXPECT_THAT(RenderJobReportMarkdown(job),
              HasSubstr("| 2 (chosen) | 5.000 | 4.9 KiB | 2.5e+06 | 5.0800 | +1.60% | +2.00% | "
                        "met | yes | 6 / 2 / 1 |"));
}

TEST(JobReportTest, AJobWithoutMetricsStillRenders) {
  quantd::v1::Job job;
  job.set_name("jobs/q");
  job.set_state(quantd::v1::FAILED);
  job.mutable_error()->set_code(3);
  job.mutable_error()->set_message("bad <input>");
  const std::string html = RenderJobReportHtml(job);
  EXPECT_THAT(html, HasSubstr("code 3: bad &lt;input&gt;"));
  EXPECT_THAT(html, Not(HasSubstr("<svg")));
  EXPECT_THAT(RenderJobReportMarkdown(job), HasSubstr("## Error\n\ncode 3: bad &lt;input>"));
}

TEST(JobReportTest, LayerRoles) {
  EXPECT_EQ(LayerRole("model.layers.3.self_attn.q_proj"), "self_attn.q_proj");
  EXPECT_EQ(LayerRole("model.layers.1.mlp.experts.7.w1"), "mlp.experts.7.w1");
  EXPECT_EQ(LayerRole("transformer.h.11.attn.c_attn"), "attn.c_attn");
  EXPECT_EQ(LayerRole("lm_head"), "lm_head");
  EXPECT_EQ(LayerRole("model.layers.12"), "model.layers.12");
}

TEST(SvgChartTest, LogScaleAndNumbers) {
  EXPECT_EQ(FormatNumber(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(FormatNumber(0.000123456), "0.0001235");
  BarChart c{"s", "t", "", {"a", "b"}, {1e-6, 1e-2}, /*log_scale=*/true};
  const std::string svg = DrawBarChart(c);
  EXPECT_THAT(svg, HasSubstr(">1e-6<"));
  EXPECT_THAT(svg, HasSubstr(">1e-2<"));
  EXPECT_EQ(Count(svg, "<rect class=\"bar\""), 2u);
  // A zero or negative value has no place on a log axis: no bar.
  c.values = {0, 1e-2};
  EXPECT_EQ(Count(DrawBarChart(c), "<rect class=\"bar\""), 1u);
}

}  // namespace
}  // namespace quantd::report
