// Which parameters of a quantized checkpoint a job keeps: the same grid
// under another spelling (intN / uintN, defaulted axes, another observer)
// keeps them; another grid, algorithms, or a format that cannot hold
// permuted groups quantizes afresh, with the reason.
#include "worker/pipeline/stored_quantization.h"

#include <gtest/gtest.h>

namespace quantd::pipeline {
namespace {

using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

QuantSpec Int4Group(DataType dtype, bool symmetric) {
  QuantSpec s;
  s.dtype = dtype;
  s.qscheme = QScheme::kPerGroup;
  s.group_size = 32;
  s.symmetric = symmetric;
  return s;
}

quant::QParams Params(std::vector<int> zero_points) {
  quant::QParams qp;
  const int64_t n = static_cast<int64_t>(zero_points.size());
  qp.scale = at::full({1, n}, 0.25f);
  qp.zero_point = at::tensor(zero_points, at::kInt).reshape({1, n});
  return qp;
}

TEST(SameGridQParams, IdenticalSpecsKeepTheParameters) {
  const QuantSpec s = Int4Group(DataType::kInt4, false);
  auto kept = SameGridQParams(s, Params({-3, 5}), s);
  ASSERT_TRUE(kept.has_value());
  EXPECT_TRUE(kept->zero_point.equal(Params({-3, 5}).zero_point));
}

TEST(SameGridQParams, CalibrationOnlyFieldsAndDefaultAxesDoNotMatter) {
  QuantSpec stored = Int4Group(DataType::kInt4, true);
  QuantSpec plan = stored;
  plan.observer = quant::ObserverType::kMse;
  plan.ch_axis = 1;  // the input axis of a Linear weight, spelled out
  EXPECT_TRUE(SameGridQParams(stored, Params({0, 0}), plan).has_value());
}

TEST(SameGridQParams, SignedStorageOfAnUnsignedGridShiftsTheZeroPoint) {
  // compressed-tensors stores uint4 asymmetric as int4 with zp - 8.
  auto kept = SameGridQParams(Int4Group(DataType::kInt4, false), Params({-8, 3}),
                              Int4Group(DataType::kUInt4, false));
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->zero_point[0][0].item<int>(), 0);
  EXPECT_EQ(kept->zero_point[0][1].item<int>(), 11);
  // uint4 symmetric is int4 symmetric: zero point 0 becomes the midpoint 8.
  auto sym = SameGridQParams(Int4Group(DataType::kInt4, true), Params({0, 0}),
                             Int4Group(DataType::kUInt4, true));
  ASSERT_TRUE(sym.has_value());
  EXPECT_EQ(sym->zero_point[0][1].item<int>(), 8);
}

TEST(SameGridQParams, AnotherGridIsRefused) {
  const QuantSpec stored = Int4Group(DataType::kInt4, false);
  QuantSpec group64 = stored;
  group64.group_size = 64;
  EXPECT_FALSE(SameGridQParams(stored, Params({0, 1}), group64).has_value());
  QuantSpec int8 = stored;
  int8.dtype = DataType::kInt8;
  EXPECT_FALSE(SameGridQParams(stored, Params({0, 1}), int8).has_value());
  // A symmetric plan cannot take a zero point off its midpoint.
  EXPECT_FALSE(SameGridQParams(stored, Params({0, 1}), Int4Group(DataType::kInt4, true)));
  QuantSpec floor = stored;
  floor.round_method = quant::RoundMethod::kFloor;
  EXPECT_FALSE(SameGridQParams(stored, Params({0, 1}), floor).has_value());
}

// A two-layer checkpoint: q_proj int4 per group with a static input scale,
// k_proj with permuted groups.
class FakeStored final : public exporter::QuantizedModel {
 public:
  FakeStored() {
    exporter::QuantizedLayer q;
    q.name = "q_proj";
    q.weight = Int4Group(DataType::kInt4, false);
    QuantSpec in;
    in.dtype = DataType::kFp8E4M3;
    quant::QParams in_qp;
    in_qp.scale = at::full({}, 0.5f);
    q.input = exporter::ActivationQuantizer{in, in_qp};
    exporter::QuantizedLayer k = q;
    k.name = "k_proj";
    k.input.reset();
    layers_ = {q, k};
  }
  const std::string& model_dir() const override { return dir_; }
  const models::ModelConfig& config() const override { return config_; }
  const io::TensorSource& original() const override { std::abort(); }
  StatusOr<at::Tensor> Load(const std::string&) const override { return at::Tensor(); }
  const std::vector<exporter::QuantizedLayer>& layers() const override { return layers_; }
  const exporter::QuantizedLayer* FindLayer(const std::string& m) const override {
    for (const auto& l : layers_)
      if (l.name == m) return &l;
    return nullptr;
  }
  StatusOr<quant::QParams> WeightQParams(const std::string&) const override {
    return Params({-2, 4});
  }
  StatusOr<at::Tensor> WeightGroupIndex(const std::string& m) const override {
    if (m != "k_proj") return at::Tensor();
    return at::tensor({1, 0, 1, 0}, at::kInt);
  }
  const config::QuantConfig& quant_config() const override { return quant_config_; }

 private:
  std::string dir_ = "/stored";
  models::ModelConfig config_;
  std::vector<exporter::QuantizedLayer> layers_;
  config::QuantConfig quant_config_;
};

std::map<std::string, LayerPlan> SamePlans() {
  LayerPlan p;
  p.weight = Int4Group(DataType::kUInt4, false);
  QuantSpec in;
  in.dtype = DataType::kFp8E4M3;
  p.input = in;
  return {{"q_proj", p}, {"k_proj", p}};
}

TEST(MatchStoredQuantization, KeepsWeightsInputScalesAndGroupIndex) {
  FakeStored stored;
  auto m = MatchStoredQuantization(stored, SamePlans(), {});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_NE(m->Find("q_proj"), nullptr);
  const StoredLayerParams& q = *m->Find("q_proj");
  ASSERT_TRUE(q.weight.has_value());
  EXPECT_EQ(q.weight->zero_point[0][0].item<int>(), 6);  // -2 + 8: uint4
  ASSERT_TRUE(q.input.has_value());
  EXPECT_EQ(q.input->scale.item<float>(), 0.5f);
  ASSERT_NE(m->Find("k_proj"), nullptr);
  EXPECT_EQ(m->Find("k_proj")->weight_group_index.numel(), 4);
  EXPECT_TRUE(m->requantized.empty());
}

TEST(MatchStoredQuantization, SaysWhyAWeightIsQuantizedAfresh) {
  FakeStored stored;
  StoredMatchOptions o;
  o.contiguous_groups_only = true;
  auto plans = SamePlans();
  plans["q_proj"].weight->group_size = 64;
  auto m = MatchStoredQuantization(stored, plans, o);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->Find("k_proj"), nullptr);
  ASSERT_EQ(m->requantized.size(), 2u);
  EXPECT_NE(m->requantized[0].find("stored int4 per_group(32) asym, the job quantizes uint4 "
                                   "per_group(64) asym"),
            std::string::npos)
      << m->requantized[0];
  EXPECT_NE(m->requantized[1].find("permuted columns"), std::string::npos) << m->requantized[1];
  // The input scale of q_proj is still the stored one: its spec is the same.
  ASSERT_NE(m->Find("q_proj"), nullptr);
  EXPECT_TRUE(m->Find("q_proj")->input.has_value());
  EXPECT_FALSE(m->Find("q_proj")->weight.has_value());

  // A weight the job does not quantize is left in float, named apart.
  auto float_plans = SamePlans();
  float_plans["k_proj"].weight.reset();
  auto left = MatchStoredQuantization(stored, float_plans, {});
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(left->left_float, std::vector<std::string>{"k_proj"});
  EXPECT_TRUE(left->requantized.empty());

  o.weights_change = true;
  auto none = MatchStoredQuantization(stored, SamePlans(), o);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->layers.empty());
  EXPECT_NE(none->requantized[0].find("algorithms change the weights"), std::string::npos);
}

}  // namespace
}  // namespace quantd::pipeline
