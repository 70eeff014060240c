#include "worker/export/hf/hf_fake_quant.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "worker/common/sha256.h"
#include "worker/io/safetensors/safetensors_source.h"

namespace quantd::exporter {
namespace {

namespace fs = std::filesystem;
constexpr char kModel[] = "models/stories260K";
constexpr char kQProj[] = "model.layers.0.self_attn.q_proj.weight";

class HfFakeQuantTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = fs::path(::testing::TempDir()) / ("hf_export_" + std::to_string(::getpid()));
    fs::remove_all(out_);
    auto src = io::SafetensorsSource::Open(std::string(kModel) + "/model.safetensors");
    ASSERT_TRUE(src.ok()) << src.status();
    source_ = std::move(src).value();
  }
  void TearDown() override { fs::remove_all(out_); }

  HfFakeQuantExportOptions Options() {
    HfFakeQuantExportOptions o;
    o.model_dir = kModel;
    o.output_dir = out_.string();
    o.quantization_config = {{"quant_method", "quark"}, {"global_quant_config", nlohmann::json::object()}};
    return o;
  }

  // Replaces q_proj of block 0 by its negation; every other tensor passes through.
  TensorProvider NegateQProj() {
    return [this](const std::string& name) -> StatusOr<at::Tensor> {
      QD_ASSIGN_OR_RETURN(at::Tensor t, source_->Load(name));
      return name == kQProj ? -t : t;
    };
  }

  fs::path out_;
  std::unique_ptr<io::SafetensorsSource> source_;
};

TEST_F(HfFakeQuantTest, WritesSameNamesDtypesWithProvidedValues) {
  int last_done = 0, total = 0;
  auto art = ExportHfFakeQuantized(*source_, NegateQProj(), Options(), [&](int d, int t) {
    last_done = d;
    total = t;
  });
  ASSERT_TRUE(art.ok()) << art.status();
  EXPECT_EQ(last_done, total);
  EXPECT_EQ(total, static_cast<int>(source_->Names().size()));

  auto back = io::SafetensorsSource::Open((out_ / "model.safetensors").string());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->Names(), source_->Names());
  for (const auto& name : source_->Names()) {
    EXPECT_EQ((*back)->Find(name)->dtype, source_->Find(name)->dtype) << name;
    at::Tensor got = *(*back)->Load(name);
    at::Tensor want = *source_->Load(name);
    if (name == kQProj) want = -want;
    EXPECT_TRUE(at::equal(got, want)) << name;
  }
  // Digests are real: they match the files on disk.
  EXPECT_EQ(art->sha256, *Sha256File((out_ / "model.safetensors").string()));
  std::vector<std::string> files;
  for (const auto& f : art->files) files.push_back(f.path);
  EXPECT_EQ(files, (std::vector<std::string>{"NOTICE.md", "config.json", "model.safetensors",
                                             "tokenizer.model"}));
  int64_t sum = 0;
  for (const auto& f : art->files) sum += f.bytes;
  EXPECT_EQ(art->bytes, sum);

  std::ifstream in(out_ / "config.json");
  auto cfg = nlohmann::json::parse(in);
  EXPECT_EQ(cfg["quantization_config"]["quant_method"], "quark");
  EXPECT_EQ(cfg["hidden_size"], 64);
  // No staging directory is left behind.
  for (const auto& e : fs::directory_iterator(out_.parent_path()))
    EXPECT_EQ(e.path().filename().string().find(out_.filename().string() + ".partial"),
              std::string::npos);
}

TEST_F(HfFakeQuantTest, ExistingOutputNeedsOverwrite) {
  ASSERT_TRUE(ExportHfFakeQuantized(*source_, NegateQProj(), Options()).ok());
  auto again = ExportHfFakeQuantized(*source_, NegateQProj(), Options());
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.status().reason(), "OUTPUT_EXISTS");
  auto opt = Options();
  opt.overwrite = true;
  opt.quantization_config = {{"quant_method", "quark"}, {"version", "2"}};
  ASSERT_TRUE(ExportHfFakeQuantized(*source_, NegateQProj(), opt).ok());
  std::ifstream in(out_ / "config.json");
  EXPECT_EQ(nlohmann::json::parse(in)["quantization_config"]["version"], "2");
}

// Names in a job's config come from tenants and need not be valid UTF-8:
// config.json gets U+FFFD in their place instead of the export throwing.
TEST_F(HfFakeQuantTest, NamesThatAreNotUtf8AreWrittenNotThrown) {
  auto opt = Options();
  opt.quantization_config["exclude"] = {std::string("model.layers.0\xda*")};
  ASSERT_TRUE(ExportHfFakeQuantized(*source_, NegateQProj(), opt).ok());
  std::ifstream in(out_ / "config.json");
  EXPECT_EQ(nlohmann::json::parse(in)["quantization_config"]["exclude"][0],
            "model.layers.0\xef\xbf\xbd*");
}

TEST_F(HfFakeQuantTest, FailureLeavesNothingBehind) {
  int calls = 0;
  TensorProvider failing = [&](const std::string& name) -> StatusOr<at::Tensor> {
    if (++calls == 5) return CancelledError("cancelled at a block boundary");
    return source_->Load(name);
  };
  auto art = ExportHfFakeQuantized(*source_, failing, Options());
  EXPECT_EQ(art.status().code(), StatusCode::kCancelled);
  EXPECT_FALSE(fs::exists(out_));
  for (const auto& e : fs::directory_iterator(out_.parent_path()))
    EXPECT_EQ(e.path().filename().string().find(out_.filename().string()), std::string::npos)
        << e.path();
}

TEST_F(HfFakeQuantTest, ShapeChangeIsAnError) {
  TensorProvider reshaped = [&](const std::string& name) -> StatusOr<at::Tensor> {
    QD_ASSIGN_OR_RETURN(at::Tensor t, source_->Load(name));
    return name == kQProj ? t.flatten() : t;
  };
  auto art = ExportHfFakeQuantized(*source_, reshaped, Options());
  EXPECT_EQ(art.status().code(), StatusCode::kInternal);
  EXPECT_NE(art.status().message().find(kQProj), std::string::npos);
}

}  // namespace
}  // namespace quantd::exporter
