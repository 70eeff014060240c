#include "client/cli_common/render.h"

#include <sstream>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace quantd::cli_common {
namespace {

using ::testing::ElementsAre;

template <typename T>
T Parse(const std::string& text) {
  T m;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &m)) << text;
  return m;
}

TEST(RenderTest, ProgressBar) {
  auto p = Parse<quantd::v1::Progress>("stage: QUANTIZE block: 3 block_count: 5 percent: 45");
  EXPECT_EQ(RenderProgressBar(p, 20), "[#########...........]  45% QUANTIZE block 3/5");
  auto done = Parse<quantd::v1::Progress>("stage: EXPORT percent: 100");
  EXPECT_EQ(RenderProgressBar(done, 4), "[####] 100% EXPORT");
}

TEST(RenderTest, MetricsShowRelativeChangeAndProtocol) {
  auto m = Parse<quantd::v1::Metrics>(R"pb(
    float_perplexity {
      perplexity: 6.98871
      protocol {
        dataset_uri: "file:///d/tinystories-sample.txt"
        n_ctx: 256
        windows: 395
        tokens: 100707
      }
    }
    quantized_perplexity { perplexity: 7.33 }
    float_model_bytes: 1048576
    quantized_model_bytes: 262144
  )pb");
  EXPECT_EQ(RenderMetrics(m),
            "perplexity float:     6.9887  (tinystories-sample.txt, n_ctx 256, 395 windows, "
            "100707 tokens)\n"
            "perplexity quantized: 7.3300  (+4.88%)\n"
            "model size:           1.0 MiB -> 256.0 KiB (0.25x)");
}

TEST(RenderTest, SensitivityNamesTheMostAndLeastSensitiveLayers) {
  quantd::v1::Job job;
  job.mutable_spec()->mutable_sensitivity()->add_candidates("w_int4_per_channel_sym");
  job.mutable_spec()->mutable_sensitivity()->add_candidates("w_int8_per_channel_sym");
  auto* b = job.mutable_result()->mutable_metrics()->add_blocks();
  const double errors[][2] = {{0.002, 1e-5}, {0.0076, 3e-5}, {0.001, 2e-5}};
  for (int i = 0; i < 3; ++i) {
    auto* l = b->add_layers();
    l->set_name("model.layers.0.l" + std::to_string(i));
    l->add_sensitivity_relative_mse(errors[i][0]);
    l->add_sensitivity_relative_mse(errors[i][1]);
  }
  EXPECT_THAT(RenderSensitivity(job),
              ElementsAre("sensitivity w_int4_per_channel_sym: 3 layers, block out rel-mse "
                          "0.0076 (model.layers.0.l1) to 0.001 (model.layers.0.l2)",
                          "sensitivity w_int8_per_channel_sym: 3 layers, block out rel-mse "
                          "3e-05 (model.layers.0.l1) to 1e-05 (model.layers.0.l0)"));
}

// A search of three rounds over two presets and float, with a 2% budget:
// round 1 (every layer int4) misses it, round 2 meets it and is chosen,
// round 3 is larger and less accurate than round 2 (off the frontier).
quantd::v1::Job AutoPrecisionJob() {
  auto job = Parse<quantd::v1::Job>(R"pb(
    spec {
      evaluation { max_perplexity_increase: 0.02 }
      quantization { group_size: 32 }
      auto_precision {
        candidates: [ "w_uint4_per_group_asym", "w_int8_per_channel_sym", "float" ]
        max_rounds: 3
      }
    }
    result {
      auto_precision {
        candidates: [ "w_uint4_per_group_asym", "w_int8_per_channel_sym", "float" ]
        rounds {
          round: 1
          weight_bytes: 1153434
          bits_per_weight: 4.25
          predicted_perplexity_increase: 0.024
          perplexity: 7.2103
          perplexity_increase: 0.03171
          pareto: true
          layers_per_candidate: [ 35, 0, 0 ]
        }
        rounds {
          round: 2
          weight_bytes: 1389560
          bits_per_weight: 5.12
          predicted_perplexity_increase: 0.019
          perplexity: 7.1173
          perplexity_increase: 0.0184
          meets_budget: true
          pareto: true
          layers_per_candidate: [ 28, 7, 0 ]
        }
        rounds {
          round: 3
          weight_bytes: 1493172
          bits_per_weight: 5.5
          predicted_perplexity_increase: 0.015
          perplexity: 7.1301
          perplexity_increase: 0.0202
          layers_per_candidate: [ 25, 9, 1 ]
        }
        chosen_round: 2
        budget_met: true
        float_perplexity: 6.9887
        layers { layer: "model.layers.0.mlp.down_proj" candidate: "w_int8_per_channel_sym" }
      }
    }
  )pb");
  return job;
}

TEST(RenderTest, AutoPrecisionShowsTheRoundsAndTheChoice) {
  const quantd::v1::Job job = AutoPrecisionJob();
  EXPECT_THAT(
      RenderAutoPrecision(job),
      ElementsAre(
          "auto precision: budget met in round 2 of 3 (ppl +1.84%, 5.12 bits/weight); "
          "candidates w_uint4_per_group_asym, w_int8_per_channel_sym, float",
          "  float ppl 6.9887; budget ppl +2.00% (7.1285)",
          "      round  bits/w  weight bytes  ppl     ppl +%  predicted  budget  "
          "layers per candidate",
          "   p  1      4.25    1.1 MiB       7.2103  +3.17%  +2.40%     missed  35 / 0 / 0",
          "  *p  2      5.12    1.3 MiB       7.1173  +1.84%  +1.90%     met     28 / 7 / 0",
          "      3      5.50    1.4 MiB       7.1301  +2.02%  +1.50%     missed  25 / 9 / 1",
          "  (* chosen, p on the Pareto frontier of size and perplexity)"));
  // `quantctl get` prints it after the metrics, and names the search as the
  // quantization.
  const std::string text = RenderJob(job);
  EXPECT_NE(text.find("quantize:   auto precision (w_uint4_per_group_asym, "
                      "w_int8_per_channel_sym, float; group 32)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nauto precision: budget met in round 2 of 3"), std::string::npos) << text;
  // Without rounds (a job that has not searched yet, or another job), nothing.
  EXPECT_TRUE(RenderAutoPrecision(quantd::v1::Job()).empty());
  EXPECT_EQ(DescribeAutoPrecision(quantd::v1::Job()), "");
}

TEST(RenderTest, AutoPrecisionSaysWhenTheBudgetWasNotMet) {
  quantd::v1::Job job = AutoPrecisionJob();
  auto* r = job.mutable_result()->mutable_auto_precision();
  for (auto& round : *r->mutable_rounds()) round.set_meets_budget(false);
  r->set_budget_met(false);
  r->set_chosen_round(2);
  r->set_from_cache(true);
  job.mutable_spec()->mutable_evaluation()->clear_max_perplexity_increase();
  job.mutable_spec()->mutable_evaluation()->set_max_kl_divergence(0.01);
  r->mutable_rounds(1)->set_kl_divergence_mean(0.0123);
  r->mutable_rounds(1)->clear_predicted_perplexity_increase();
  r->mutable_rounds(1)->set_predicted_kl_divergence(0.009);
  const std::vector<std::string> lines = RenderAutoPrecision(job);
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0],
            "auto precision: budget NOT met: the best found is round 2 of 3 (ppl +1.84%, KL "
            "0.01230, 5.12 bits/weight); candidates w_uint4_per_group_asym, "
            "w_int8_per_channel_sym, float (sensitivities from the cache)");
  EXPECT_EQ(lines[1], "  float ppl 6.9887; budget mean KL 0.01000");
  // Columns for what some round has, "-" where a round lacks it.
  EXPECT_EQ(lines[2],
            "      round  bits/w  weight bytes  ppl     ppl +%  predicted  KL       predicted KL  "
            "budget  layers per candidate");
  EXPECT_EQ(lines[4],
            "  *p  2      5.12    1.3 MiB       7.1173  +1.84%  -          0.01230  0.00900       "
            "missed  28 / 7 / 0");
  EXPECT_EQ(lines[5],
            "      3      5.50    1.4 MiB       7.1301  +2.02%  +1.50%     -        -             "
            "missed  25 / 9 / 1");
}

// A classifier's search (digits CNN: three convolutions and two linears,
// 22800 weights) within one point of top-1 accuracy, with a cost table (ns
// per weight): round 1 misses the budget, round 2 meets it, round 3 meets it
// for less and is chosen.
quantd::v1::Job ClassifierAutoPrecisionJob() {
  return Parse<quantd::v1::Job>(R"pb(
    spec {
      model_uri: "file:///models/digits_cnn/model.pt"
      evaluation { max_accuracy_drop: 0.01 }
      auto_precision {
        candidates: [ "w_uint4_per_group_asym", "w_int8_per_channel_sym", "float" ]
        max_rounds: 3
        cost_per_weight { key: "w_uint4_per_group_asym" value: 0.25 }
        cost_per_weight { key: "w_int8_per_channel_sym" value: 0.4 }
        cost_per_weight { key: "float" value: 1 }
      }
    }
    result {
      auto_precision {
        candidates: [ "w_uint4_per_group_asym", "w_int8_per_channel_sym", "float" ]
        rounds {
          round: 1
          weight_bytes: 18480
          bits_per_weight: 6.4842
          cost: 6412.8
          top1_accuracy: 0.963889
          accuracy_drop: 0.016667
          pareto: true
          layers_per_candidate: [ 3, 2, 0 ]
        }
        rounds {
          round: 2
          weight_bytes: 23216
          bits_per_weight: 8.1460
          cost: 9024
          predicted_accuracy_drop: 0.0035
          top1_accuracy: 0.977778
          accuracy_drop: 0.002778
          meets_budget: true
          pareto: true
          layers_per_candidate: [ 1, 4, 0 ]
        }
        rounds {
          round: 3
          weight_bytes: 20784
          bits_per_weight: 7.2926
          cost: 7641.6
          predicted_accuracy_drop: 0.0061
          top1_accuracy: 0.975
          accuracy_drop: 0.005556
          meets_budget: true
          pareto: true
          layers_per_candidate: [ 2, 3, 0 ]
        }
        chosen_round: 3
        budget_met: true
        float_top1_accuracy: 0.980556
      }
    }
  )pb");
}

// Top-1 accuracy, its change in points and the predicted change instead of
// the perplexity columns; the rounds' cost under the table.
TEST(RenderTest, AutoPrecisionOfAClassifierShowsTopOneAndCost) {
  EXPECT_THAT(
      RenderAutoPrecision(ClassifierAutoPrecisionJob()),
      ElementsAre(
          "auto precision: budget met in round 3 of 3 (top-1 -0.56 points, cost 7642, "
          "7.29 bits/weight); candidates w_uint4_per_group_asym, w_int8_per_channel_sym, float",
          "  float top-1 98.06%; budget -1.00 points",
          "      round  bits/w  weight bytes  cost  top-1   points  predicted  budget  "
          "layers per candidate",
          "   p  1      6.48    18.0 KiB      6413  96.39%  -1.67   -          missed  3 / 2 / 0",
          "   p  2      8.15    22.7 KiB      9024  97.78%  -0.28   -0.35      met     1 / 4 / 0",
          "  *p  3      7.29    20.3 KiB      7642  97.50%  -0.56   -0.61      met     2 / 3 / 0",
          "  (* chosen, p on the Pareto frontier of cost and top-1 accuracy)"));
  // Without the table: no cost, and the frontier is of size.
  quantd::v1::Job bytes = ClassifierAutoPrecisionJob();
  for (auto& round : *bytes.mutable_result()->mutable_auto_precision()->mutable_rounds())
    round.clear_cost();
  const std::vector<std::string> lines = RenderAutoPrecision(bytes);
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0],
            "auto precision: budget met in round 3 of 3 (top-1 -0.56 points, 7.29 bits/weight); "
            "candidates w_uint4_per_group_asym, w_int8_per_channel_sym, float");
  EXPECT_EQ(lines[2],
            "      round  bits/w  weight bytes  top-1   points  predicted  budget  "
            "layers per candidate");
  EXPECT_EQ(lines[6], "  (* chosen, p on the Pareto frontier of size and top-1 accuracy)");
}

// A language model's search with a cost table: the perplexity columns and
// the cost.
TEST(RenderTest, AutoPrecisionWithACostTableShowsTheCost) {
  quantd::v1::Job job = AutoPrecisionJob();
  const double costs[] = {1.25e6, 1.5e6, 1.625e6};
  for (int i = 0; i < 3; ++i)
    job.mutable_result()->mutable_auto_precision()->mutable_rounds(i)->set_cost(costs[i]);
  const std::vector<std::string> lines = RenderAutoPrecision(job);
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0],
            "auto precision: budget met in round 2 of 3 (ppl +1.84%, cost 1.5e+06, "
            "5.12 bits/weight); candidates w_uint4_per_group_asym, w_int8_per_channel_sym, float");
  EXPECT_EQ(lines[2],
            "      round  bits/w  weight bytes  cost       ppl     ppl +%  predicted  budget  "
            "layers per candidate");
  EXPECT_EQ(lines[4],
            "  *p  2      5.12    1.3 MiB       1.5e+06    7.1173  +1.84%  +1.90%     met     "
            "28 / 7 / 0");
  EXPECT_EQ(lines[6], "  (* chosen, p on the Pareto frontier of cost and perplexity)");
}

TEST(RenderTest, BlockRowNamesWorstLayer) {
  auto b = Parse<quantd::v1::BlockMetrics>(R"pb(
    block: 2
    output_rel_mse: 0.00123
    layers { name: "model.layers.1.self_attn.q_proj" weight_sqnr_db: 20.0 }
    layers { name: "model.layers.1.mlp.down_proj" weight_sqnr_db: 14.0 }
    layers { name: "model.layers.1.mlp.up_proj" excluded: true }
  )pb");
  EXPECT_EQ(RenderBlockMetrics(b, 5),
            "block  2/5   out rel-mse 1.230e-03  sqnr mean  17.0 dB  min  14.0 dB (down_proj)");
  b.set_seconds(12.34);
  EXPECT_EQ(RenderBlockMetrics(b, 5),
            "block  2/5   out rel-mse 1.230e-03  sqnr mean  17.0 dB  min  14.0 dB (down_proj)"
            "  12.3 s");
  b.set_algorithm_seconds(9.06);
  EXPECT_EQ(RenderBlockMetrics(b, 5),
            "block  2/5   out rel-mse 1.230e-03  sqnr mean  17.0 dB  min  14.0 dB (down_proj)"
            "  12.3 s (9.1 algo)");
  // A GPU block: the allocator's peaks go before the time, which stays last.
  b.set_device_peak_allocated_bytes(int64_t{15} << 30);
  b.set_device_peak_reserved_bytes((int64_t{33} << 30) / 2);
  EXPECT_EQ(RenderBlockMetrics(b, 5),
            "block  2/5   out rel-mse 1.230e-03  sqnr mean  17.0 dB  min  14.0 dB (down_proj)"
            "  gpu 15.0 GiB (16.5 held)  12.3 s (9.1 algo)");
  b.clear_device_peak_allocated_bytes();
  b.clear_device_peak_reserved_bytes();
  b.set_seconds(0.043);
  b.clear_algorithm_seconds();
  EXPECT_EQ(RenderBlockMetrics(b, 5),
            "block  2/5   out rel-mse 1.230e-03  sqnr mean  17.0 dB  min  14.0 dB (down_proj)"
            "  0.04 s");
}

// A mixture-of-experts block: the spread of routed tokens and the experts
// below the floor ("f": kept in float).
TEST(RenderTest, BlockRowSummarisesTheExperts) {
  auto b = Parse<quantd::v1::BlockMetrics>(R"pb(
    block: 1
    experts { expert: 0 calibration_tokens: 700 }
    experts { expert: 1 calibration_tokens: 5 below_floor: true }
    experts { expert: 2 calibration_tokens: 1343 }
    experts { expert: 3 calibration_tokens: 0 below_floor: true kept_float: true }
  )pb");
  EXPECT_EQ(RenderBlockMetrics(b, 2), "block  1/2   experts 4: 0-1343 tokens, below floor 1 3f");
  for (auto& e : *b.mutable_experts()) e.set_below_floor(false);
  EXPECT_EQ(RenderBlockMetrics(b, 2), "block  1/2   experts 4: 0-1343 tokens");
}

// A block without calibration data has no output error: the row leaves it
// out instead of printing a sentinel as a measurement (issue 25: "out
// rel-mse -1.000e+00").
TEST(RenderTest, BlockRowWithoutMeasuredErrorLeavesItOut) {
  auto b = Parse<quantd::v1::BlockMetrics>(R"pb(
    block: 1
    seconds: 0.05
    layers { name: "model.layers.0.self_attn.v_proj" weight_sqnr_db: 18.6 }
    layers { name: "model.layers.0.mlp.up_proj" weight_sqnr_db: 20.8 }
  )pb");
  EXPECT_EQ(RenderBlockMetrics(b, 5),
            "block  1/5   sqnr mean  19.7 dB  min  18.6 dB (v_proj)  0.05 s");
  // What older workers sent for "not measured".
  b.set_output_rel_mse(-1);
  EXPECT_EQ(RenderBlockMetrics(b, 5),
            "block  1/5   sqnr mean  19.7 dB  min  18.6 dB (v_proj)  0.05 s");
  // A measured zero (the block came out exact) is a measurement.
  b.set_output_rel_mse(0);
  EXPECT_EQ(RenderBlockMetrics(b, 5),
            "block  1/5   out rel-mse 0.000e+00  sqnr mean  19.7 dB  min  18.6 dB (v_proj)  0.05 s");
}

// On a terminal the bar is redrawn in place and its line is ended before
// anything else is printed and at the end; otherwise (stdout or stderr not
// a terminal) one plain line per stage or block, never a carriage return.
TEST(RenderTest, ProgressDisplayInPlaceEndsItsLineAndPlainLinesOtherwise) {
  auto p1 = Parse<quantd::v1::Progress>("stage: QUANTIZE block: 1 block_count: 5 percent: 10");
  auto p1b = Parse<quantd::v1::Progress>("stage: QUANTIZE block: 1 block_count: 5 percent: 12");
  auto p2 = Parse<quantd::v1::Progress>("stage: EXPORT percent: 100");
  std::ostringstream tty;
  ProgressDisplay live(tty, true);
  live.Show(p1);
  live.Show(p1b);
  live.EndLine();
  live.EndLine();  // nothing open: no empty line
  live.Show(p2);
  live.EndLine();
  EXPECT_EQ(tty.str(),
            "\r[###...........................]  10% QUANTIZE block 1/5\033[K"
            "\r[####..........................]  12% QUANTIZE block 1/5\033[K\n"
            "\r[##############################] 100% EXPORT\033[K\n");
  std::ostringstream pipe;
  ProgressDisplay plain(pipe, false);
  plain.Show(p1);
  plain.Show(p1b);  // same stage and block: no new line
  plain.EndLine();
  plain.Show(p2);
  plain.EndLine();
  EXPECT_EQ(pipe.str(),
            "[###...........................]  10% QUANTIZE block 1/5\n"
            "[##############################] 100% EXPORT\n");
}

TEST(RenderTest, JobSummary) {
  auto job = Parse<quantd::v1::Job>(R"pb(
    name: "jobs/0001"
    state: FAILED
    attempt: 2
    worker: "host-local-0"
    spec {
      model_uri: "file:///m"
      quantization { scheme: "w_int4_per_group_sym" group_size: 32 }
      labels { key: "team" value: "nlp" }
    }
    error { code: 3 message: "group size 32 does not divide 172" }
  )pb");
  std::string s = RenderJob(job);
  EXPECT_NE(s.find("state:      FAILED (attempt 2) on host-local-0"), std::string::npos) << s;
  EXPECT_NE(s.find("quantize:   w_int4_per_group_sym (group 32)"), std::string::npos) << s;
  EXPECT_NE(s.find("labels:     team=nlp"), std::string::npos) << s;
  EXPECT_NE(s.find("error:      group size 32 does not divide 172"), std::string::npos) << s;
}

TEST(RenderTest, JobSummaryOfALlamaCppRecipe) {
  auto job = Parse<quantd::v1::Job>(R"pb(
    name: "jobs/0002"
    state: SUCCEEDED
    spec {
      model_uri: "file:///m"
      export { formats: GGUF gguf_type: "Q4_K_M" }
    }
  )pb");
  EXPECT_NE(RenderJob(job).find("quantize:   llama.cpp Q4_K_M\n"), std::string::npos)
      << RenderJob(job);
  job.mutable_spec()->mutable_quantization()->add_algorithms()->mutable_gptq();
  EXPECT_NE(RenderJob(job).find("quantize:   llama.cpp Q4_K_M + gptq\n"), std::string::npos)
      << RenderJob(job);
  // A Hub model shows the commit it ran on.
  job.mutable_spec()->set_model_uri("hf://org/m");
  job.mutable_result()->set_resolved_revision("f9c3b0db68d1b34d02ef5eccacd7af26f119c8cc");
  EXPECT_NE(RenderJob(job).find(
                "model:      hf://org/m (commit f9c3b0db68d1b34d02ef5eccacd7af26f119c8cc)\n"),
            std::string::npos)
      << RenderJob(job);
  // So does a Hub dataset, under the model.
  job.mutable_spec()->mutable_calibration()->set_dataset_uri(
      "hf://datasets/org/chat?split=train_sft");
  job.mutable_result()->set_calibration_dataset_revision(std::string(40, 'a'));
  EXPECT_NE(RenderJob(job).find("\ncalib data: hf://datasets/org/chat?split=train_sft (commit " +
                                std::string(40, 'a') + ")\nquantize:"),
            std::string::npos)
      << RenderJob(job);
}

TEST(RenderTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(512), "512 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(3LL << 30), "3.0 GiB");
}

}  // namespace
}  // namespace quantd::cli_common
