// Which importer a model directory gets: none for a float checkpoint, a
// refusal naming any quant_method quantd does not read, and a bounded read
// of a hostile config.json.
#include "worker/export/quantized_checkpoint.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace quantd::exporter {
namespace {

namespace fs = std::filesystem;

class QuantizedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / "quantized_checkpoint";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ifstream in("models/stories260K/config.json");
    std::stringstream text;
    text << in.rdbuf();
    config_ = text.str();
  }
  void WriteConfig(const std::string& quantization_config) {
    const size_t brace = config_.find('{');
    std::ofstream(dir_ / "config.json", std::ios::trunc)
        << config_.substr(0, brace + 1) << "\"quantization_config\": " << quantization_config
        << "," << config_.substr(brace + 1);
  }
  fs::path dir_;
  std::string config_;
};

TEST_F(QuantizedCheckpointTest, AFloatModelHasNoImporter) {
  std::ofstream(dir_ / "config.json") << config_;
  auto m = OpenQuantizedCheckpoint(dir_.string());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(*m, nullptr);
  WriteConfig("null");
  m = OpenQuantizedCheckpoint(dir_.string());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(*m, nullptr);
  // quantd's hf export: quark config, values stored as floats.
  WriteConfig(R"({"quant_method": "quark", "global_quant_config": {},
                  "export": {"weight_format": "fake_quantized", "pack_method": "reorder"}})");
  m = OpenQuantizedCheckpoint(dir_.string());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(*m, nullptr);
}

TEST_F(QuantizedCheckpointTest, AnotherQuantMethodIsNamed) {
  for (const char* qc : {R"({"quant_method": "gptq", "bits": 4})", R"({"bits": 4})", "[1]"}) {
    SCOPED_TRACE(qc);
    WriteConfig(qc);
    auto m = OpenQuantizedCheckpoint(dir_.string());
    EXPECT_EQ(m.status().code(), StatusCode::kFailedPrecondition) << m.status();
    EXPECT_EQ(m.status().reason(), "UNSUPPORTED_CHECKPOINT");
    EXPECT_NE(m.status().message().find("config.json: quantization_config.quant_method"),
              std::string::npos)
        << m.status();
  }
}

TEST_F(QuantizedCheckpointTest, ReadsQuarkAndCompressedTensorsWithTheirImporters) {
  // The importers' own errors come back: here the safetensors are missing.
  WriteConfig(R"({"quant_method": "compressed-tensors", "quantization_status": "compressed",
                  "config_groups": {"g": {"targets": ["Linear"],
                                          "weights": {"num_bits": 8, "type": "int"}}}})");
  EXPECT_EQ(OpenQuantizedCheckpoint(dir_.string()).status().code(), StatusCode::kNotFound);
  WriteConfig(R"({"quant_method": "quark", "global_quant_config": {},
                  "export": {"weight_format": "real_quantized", "pack_method": "reorder"}})");
  EXPECT_EQ(OpenQuantizedCheckpoint(dir_.string()).status().code(), StatusCode::kNotFound);
}

TEST_F(QuantizedCheckpointTest, AHugeConfigIsRefusedWithoutReadingItWhole) {
  {
    std::ofstream out(dir_ / "config.json");
    out << "{\"pad\": \"";
    const std::string chunk(1 << 20, 'x');
    for (int i = 0; i < 64; ++i) out << chunk;  // 64 MiB
    out << "\"}";
  }
  auto m = OpenQuantizedCheckpoint(dir_.string());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << m.status();
  fs::remove_all(dir_);
}

}  // namespace
}  // namespace quantd::exporter
