#include "worker/pipeline/block_persistence.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/pipeline/resume_state.h"

namespace quantd::pipeline {
namespace {

namespace fs = std::filesystem;

class LogObserver : public JobObserver {
 public:
  void OnLog(LogLevel, const std::string& m) override { logs.push_back(m); }
  std::vector<std::string> logs;
};

std::vector<std::string> Names(const NamedTensors& t) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : t) names.push_back(name);
  return names;
}

TEST(BlockPersistenceTest, ScratchNames) {
  EXPECT_EQ(BlockFileName(3), "block_00003");
  EXPECT_EQ(BlockFileName(12345), "block_12345");
  EXPECT_EQ(ActivationKey("model.layers.0.mlp.up_proj", "input_scale"),
            "__quantd__/model.layers.0.mlp.up_proj.input_scale");
}

TEST(BlockPersistenceTest, QuantizedWeightEntriesAndSize) {
  quant::QuantSpec spec;
  spec.dtype = quant::DataType::kInt8;
  spec.qscheme = quant::QScheme::kPerChannel;
  spec.ch_axis = 0;
  spec.symmetric = true;
  const at::Tensor weight = at::ones({4, 8});
  quant::QParams qp;
  qp.scale = at::full({4, 1}, 0.5f);
  qp.zero_point = at::full({4, 1}, 2, at::kInt);
  NamedTensors out;
  // int8 per channel: 32 one-byte codes and 4 float32 scales, for 128 float bytes.
  EXPECT_EQ(RecordQuantizedWeight("m", weight, spec, qp, /*with_weight=*/true, 128, out),
            32 + 16 - 128);
  EXPECT_EQ(Names(out), (std::vector<std::string>{"m.weight", "__quantd__/m.weight_scale",
                                                  "__quantd__/m.weight_zero_point"}));
  EXPECT_EQ(out[2].second.scalar_type(), at::kFloat) << "zero points are stored as float32";
  EXPECT_TRUE(at::equal(out[2].second, at::full({4, 1}, 2.0f)));

  NamedTensors no_weight;
  qp.zero_point = at::Tensor();
  RecordQuantizedWeight("m", weight, spec, qp, /*with_weight=*/false, 128, no_weight);
  EXPECT_EQ(Names(no_weight), std::vector<std::string>{"__quantd__/m.weight_scale"});
}

class ScratchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::path(::testing::TempDir()) / ("persist_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ScratchTest, ActivationParamsRoundTripWithTheirZeroPointTypes) {
  ActivationParams params;
  params.inputs["a"] = {at::full({1}, 0.5f), at::full({1}, 1.5f)};
  params.inputs["b"] = {at::full({1}, 0.25f), at::full({1}, 3, at::kInt)};
  params.outputs["b"] = {at::full({1}, 0.125f), at::Tensor()};
  NamedTensors entries;
  for (const char* m : {"a", "b", "c"}) AddActivationParams(m, params, entries);
  EXPECT_EQ(Names(entries),
            (std::vector<std::string>{"__quantd__/a.input_scale", "__quantd__/a.input_zero_point",
                                      "__quantd__/b.input_scale", "__quantd__/b.input_zero_point",
                                      "__quantd__/b.output_scale"}));
  auto scratch = ScratchStore::Create(dir_);
  ASSERT_TRUE(scratch.ok()) << scratch.status();
  ASSERT_TRUE((*scratch)->Put(BlockFileName(0), entries).ok());

  quant::QuantSpec float_zp;  // asymmetric with a float32 zero point
  float_zp.dtype = quant::DataType::kUInt8;
  float_zp.symmetric = false;
  float_zp.zero_point_type = quant::ZeroPointType::kFloat32;
  quant::QuantSpec int_zp = float_zp;
  int_zp.zero_point_type = quant::ZeroPointType::kInt32;
  std::map<std::string, LayerPlan> plans;
  plans["a"].input = float_zp;
  plans["b"].input = int_zp;
  plans["b"].output = int_zp;
  plans["c"].input = int_zp;
  ActivationParams restored;
  ASSERT_TRUE(RestoreActivationParams(**scratch, plans, restored).ok());
  ASSERT_EQ(restored.inputs.size(), 2u);
  ASSERT_EQ(restored.outputs.size(), 1u);
  EXPECT_TRUE(at::equal(restored.inputs["a"].scale, at::full({1}, 0.5f)));
  EXPECT_EQ(restored.inputs["a"].zero_point.scalar_type(), at::kFloat);
  EXPECT_FLOAT_EQ(restored.inputs["a"].zero_point.item<float>(), 1.5f);
  EXPECT_EQ(restored.inputs["b"].zero_point.scalar_type(), at::kInt);
  EXPECT_EQ(restored.inputs["b"].zero_point.item<int>(), 3);
  EXPECT_FLOAT_EQ(restored.outputs["b"].scale.item<float>(), 0.125f);
  EXPECT_FALSE(restored.outputs["b"].zero_point.defined());
}

// Three blocks, each a file of one tensor, with a checkpoint after each
// when the pacer lets it.
class CheckpointTest : public ScratchTest {
 protected:
  void RunBlocks(BlockCheckpointer& checkpoint, ScratchStore& scratch) {
    std::vector<BlockReport> reports;
    for (int done = 1; done <= 3; ++done) {
      const NamedTensors file = {{"w" + std::to_string(done - 1), at::full({2}, float(done))}};
      ASSERT_TRUE(scratch.PutAsync(BlockFileName(done - 1), file).ok());
      BlockReport br;
      br.block = done;
      br.block_count = 3;
      reports.push_back(br);
      ASSERT_TRUE(
          checkpoint.AfterBlock(done, 3, Hidden(done), /*bytes_delta=*/-100 * done, reports).ok());
      after_block.push_back(ReadResumeState(dir_)->blocks_done);
    }
  }
  static at::Tensor Hidden(int done) { return at::full({1, 2, 4}, float(10 * done)); }
  bool HiddenOnDisk(int block) const {
    return fs::exists(fs::path(dir_) / (HiddenFileName(block) + ".safetensors"));
  }
  std::vector<int> after_block;  // blocks_done on disk after each block
};

TEST_F(CheckpointTest, CostlyCheckpointsWaitAndTheLastBlockIsAlwaysCheckpointed) {
  auto scratch = ScratchStore::Create(dir_);
  ASSERT_TRUE(scratch.ok());
  LogObserver obs;
  // Every checkpoint counts as costly, the next one due after 1e9 times its cost.
  BlockCheckpointer checkpoint(**scratch, dir_, "fp", CheckpointPacer(0, 1e9), obs);
  RunBlocks(checkpoint, **scratch);
  EXPECT_EQ(after_block, (std::vector<int>{1, 1, 3}));
  EXPECT_FALSE(HiddenOnDisk(1)) << "dropped by the next checkpoint";
  EXPECT_FALSE(HiddenOnDisk(2)) << "never written";
  EXPECT_TRUE(HiddenOnDisk(3));
  ASSERT_EQ(obs.logs.size(), 1u);
  EXPECT_EQ(obs.logs[0].rfind("checkpoint after block 1/3 took ", 0), 0u) << obs.logs[0];
}

TEST_F(CheckpointTest, ANewAttemptResumesWhereTheLastCheckpointLeftOff) {
  {
    auto scratch = ScratchStore::Create(dir_);
    ASSERT_TRUE(scratch.ok());
    LogObserver obs;
    BlockCheckpointer checkpoint(**scratch, dir_, "fp", CheckpointPacer(), obs);
    RunBlocks(checkpoint, **scratch);
    EXPECT_EQ(after_block, (std::vector<int>{1, 2, 3})) << "cheap: after every block";
    EXPECT_TRUE(obs.logs.empty());
  }
  auto scratch = ScratchStore::Create(dir_);
  ASSERT_TRUE(scratch.ok());
  LogObserver obs;
  BlockCheckpointer checkpoint(**scratch, dir_, "fp", CheckpointPacer(), obs);
  ResumePoint r = checkpoint.Resume(3, {});
  EXPECT_EQ(r.start, 3);
  EXPECT_EQ(r.bytes_delta, -300);
  ASSERT_EQ(r.blocks.size(), 3u);
  EXPECT_EQ(r.blocks[2].block, 3);
  ASSERT_TRUE(r.hidden.defined());
  EXPECT_TRUE(at::equal(r.hidden, Hidden(3)));
  ASSERT_NE((*scratch)->Find("w1"), nullptr) << "the block files are served again";
  EXPECT_TRUE(at::equal(*(*scratch)->Load("w1"), at::full({2}, 2.0f)));
  ASSERT_EQ(obs.logs.size(), 1u);
  EXPECT_EQ(obs.logs[0],
            "resumed after the last block (3/3): blocks 1-3 restored from the checkpoint of an "
            "earlier attempt");
}

TEST_F(CheckpointTest, ACheckpointOfOtherOptionsOrADamagedOneStartsOver) {
  {
    auto scratch = ScratchStore::Create(dir_);
    ASSERT_TRUE(scratch.ok());
    LogObserver obs;
    BlockCheckpointer checkpoint(**scratch, dir_, "fp", CheckpointPacer(), obs);
    RunBlocks(checkpoint, **scratch);
  }
  auto scratch = ScratchStore::Create(dir_);
  ASSERT_TRUE(scratch.ok());
  LogObserver obs;
  EXPECT_EQ(BlockCheckpointer(**scratch, dir_, "other", CheckpointPacer(), obs).Resume(3, {}).start,
            0);
  EXPECT_EQ(BlockCheckpointer(**scratch, dir_, "fp", CheckpointPacer(), obs).Resume(2, {}).start, 0)
      << "more blocks done than the model has";
  fs::remove(fs::path(dir_) / (BlockFileName(1) + ".safetensors"));
  ResumePoint damaged =
      BlockCheckpointer(**scratch, dir_, "fp", CheckpointPacer(), obs).Resume(3, {});
  EXPECT_EQ(damaged.start, 0);
  EXPECT_FALSE(damaged.hidden.defined());
  ASSERT_EQ(obs.logs.size(), 3u);
  EXPECT_EQ(obs.logs[0],
            "the scratch directory holds a checkpoint of other options; starting over");
  EXPECT_EQ(obs.logs[1], obs.logs[0]);
  EXPECT_EQ(obs.logs[2].rfind("cannot resume from the checkpoint (NOT_FOUND: scratch file ", 0), 0u)
      << obs.logs[2];
}

}  // namespace
}  // namespace quantd::pipeline
