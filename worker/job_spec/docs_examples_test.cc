// Keeps docs/quant.md true: its presets table must match the presets, its
// reference-JSON examples must parse and round-trip, and its structured
// config examples must resolve.
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "worker/job_spec/config_proto.h"
#include "worker/config/presets.h"
#include "worker/config/quark_json.h"

namespace quantd::config {
namespace {

std::string ReadDoc() {
  std::ifstream in("docs/quant.md");
  EXPECT_TRUE(in.good()) << "docs/quant.md is not in the runfiles";
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The bodies of the fenced blocks of language `lang`.
std::vector<std::string> Blocks(const std::string& doc, const std::string& lang) {
  std::vector<std::string> out;
  const std::string open = "```" + lang + "\n";
  for (size_t at = doc.find(open); at != std::string::npos; at = doc.find(open, at + 1)) {
    const size_t begin = at + open.size();
    const size_t end = doc.find("```", begin);
    if (end == std::string::npos) break;
    out.push_back(doc.substr(begin, end - begin));
  }
  return out;
}

TEST(DocsExamplesTest, ReferenceJsonExamplesParseAndRoundTrip) {
  const std::vector<std::string> examples = Blocks(ReadDoc(), "json");
  ASSERT_EQ(examples.size(), 3u);
  for (const std::string& text : examples) {
    auto c = ParseQuarkJson(text);
    ASSERT_TRUE(c.ok()) << c.status() << "\n" << text;
    EXPECT_EQ(nlohmann::ordered_json::parse(WriteQuarkJson(*c)),
              nlohmann::ordered_json::parse(text))
        << text;
  }
  // The FP8-KV example puts FP8 on the k / v projection outputs only.
  auto fp8 = ParseQuarkJson(examples[0]);
  ASSERT_TRUE(fp8.ok());
  EXPECT_TRUE(ResolveLayer(*fp8, "model.layers.0.self_attn.k_proj", "Linear")
                  .config.output_tensors.has_value());
  EXPECT_FALSE(
      ResolveLayer(*fp8, "model.layers.0.mlp.up_proj", "Linear").config.output_tensors.has_value());
  // The MXFP4 example leaves whole blocks in float.
  auto mx = ParseQuarkJson(examples[1]);
  ASSERT_TRUE(mx.ok());
  EXPECT_FALSE(ResolveLayer(*mx, "model.layers.1.mlp.up_proj", "Linear").quantized);
  EXPECT_TRUE(ResolveLayer(*mx, "model.layers.2.mlp.up_proj", "Linear").quantized);
}

TEST(DocsExamplesTest, StructuredConfigExampleMatchesTheJsonOne) {
  const std::string doc = ReadDoc();
  const std::vector<std::string> examples = Blocks(doc, "textproto");
  ASSERT_EQ(examples.size(), 1u);
  quantd::v1::QuantizationSettings s;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(examples[0], &s)) << examples[0];
  auto c = ResolveQuantizationSettings(s);
  ASSERT_TRUE(c.ok()) << c.status();
  auto json = ParseQuarkJson(Blocks(doc, "json")[2]);
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(c->global_quant_config, json->global_quant_config);
  EXPECT_EQ(c->layer_quant_config, json->layer_quant_config);
  EXPECT_EQ(c->exclude, (std::vector<std::string>{"lm_head", "model.layers.0"}));
  EXPECT_EQ(c->kv_cache_quant_config.size(), 2u);
}

TEST(DocsExamplesTest, PresetsTableListsEveryPresetWithItsMeaning) {
  const std::string doc = ReadDoc();
  std::set<std::string> listed;
  std::istringstream lines(doc);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `w_", 0) != 0) continue;
    const size_t name_end = line.find('`', 3);
    const std::string name = line.substr(3, name_end - 3);
    const size_t meaning_begin = line.find('`', name_end + 1) + 1;
    const size_t meaning_end = line.find('`', meaning_begin);
    EXPECT_EQ(line.substr(meaning_begin, meaning_end - meaning_begin), DescribePreset(name))
        << name;
    listed.insert(name);
  }
  const std::vector<std::string> names = PresetNames();
  EXPECT_EQ(listed, std::set<std::string>(names.begin(), names.end()));
}

}  // namespace
}  // namespace quantd::config
