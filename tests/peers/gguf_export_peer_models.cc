// Writes quantd's GGUF exports of the quantized stories260K model and what
// the engine computes for them, for the llama.cpp peer check
// (gguf_export_peer_check.mjs).
//
// For each GGUF type (F32, Q8_0, Q4_0, Q4_1, MXFP4) a job's quantization of
// stories260K is built in memory with the scheme whose codes are that block
// format (F32: int8 per-channel weights written as their values), exported
// with ExportGguf, and evaluated by the engine (QuantizedModelRunner): the
// block-wise perplexity of the first windows of the evaluation text
// (worker/eval/eval_windows.h protocol: [BOS] + n_ctx - 1 tokens per
// window), and for F32 the greedy continuation of a prompt. Group 32 does
// not divide the FFN width 172, so the per-group jobs leave down_proj in
// float (excluded), written as F32.
//
//   gguf_export_peer_models OUT_DIR  -> OUT_DIR/manifest.json, OUT_DIR/*/model.gguf
#include <ATen/ATen.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "worker/common/status.h"
#include "worker/eval/eval_windows.h"
#include "worker/eval/perplexity.h"
#include "worker/export/gguf/gguf.h"
#include "worker/export/hf/quark_config.h"
#include "worker/export/quantized_model_runner.h"
#include "worker/export/testing/in_memory_quantized_model.h"
#include "worker/io/tokenizer/load_tokenizer.h"

namespace quantd {
namespace {

using nlohmann::json;
using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

constexpr char kModel[] = "models/stories260K";
constexpr char kText[] = "tests/data/tinystories-sample.txt";
constexpr int64_t kNctx = 128;
constexpr int64_t kWindows = 4;
constexpr int kGreedyTokens = 40;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

QuantSpec Weight(DataType t, QScheme q, std::optional<int> group, bool symmetric) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = q;
  s.group_size = group;
  s.symmetric = symmetric;
  s.scale_type = quant::ScaleType::kFloat16;  // ggml blocks store fp16 scales
  return s;
}

QuantSpec Mxfp4Weight() {
  QuantSpec s;
  s.dtype = DataType::kMxFp4;
  s.qscheme = QScheme::kPerGroup;
  s.ch_axis = -1;
  s.group_size = 32;
  return s;
}

struct PeerCase {
  std::string name;
  gguf::GgmlType type;
  QuantSpec weight;
  std::vector<std::string> exclude;
  bool greedy = false;
};

StatusOr<std::vector<int64_t>> Greedy(const exporter::QuantizedModelRunner& runner,
                                      std::vector<int64_t> ids, int n) {
  std::vector<int64_t> out;
  for (int i = 0; i < n; ++i) {
    at::Tensor input = at::tensor(ids, at::kLong).reshape({1, static_cast<int64_t>(ids.size())});
    QD_ASSIGN_OR_RETURN(at::Tensor logits, runner.Forward(input));
    const int64_t next = logits[0][-1].argmax().item<int64_t>();
    out.push_back(next);
    ids.push_back(next);
  }
  return out;
}

StatusOr<json> RunCase(const PeerCase& c, const eval::EvalWindows& windows,
                       const std::string& out_dir) {
  exporter::QuarkLayerSpecs global;
  global.weight = c.weight;
  const json cfg = {{"quant_method", "quark"},
                    {"global_quant_config", exporter::QuarkLayerJson(global)},
                    {"exclude", c.exclude}};
  exporter::testing::InMemoryQuantizeOptions qo;
  qo.model_dir = kModel;
  qo.quant_config_json = cfg.dump();
  QD_ASSIGN_OR_RETURN(auto model, exporter::testing::InMemoryQuantizedModel::Create(qo));

  exporter::GgufModelExportOptions eo;
  eo.output_dir = out_dir + "/" + c.name;
  eo.overwrite = true;
  eo.model_name = "stories260K-" + c.name;
  eo.weight_type = c.type;
  // Weights the job kept in float, and rows that are not whole blocks (the
  // FFN width 172), keep their exact values.
  eo.float_type = gguf::GgmlType::kF32;
  eo.fallback_type = gguf::GgmlType::kF32;
  QD_ASSIGN_OR_RETURN(exporter::GgufExportResult exported, exporter::ExportGguf(*model, eo));

  QD_ASSIGN_OR_RETURN(auto runner, exporter::QuantizedModelRunner::Create(*model));
  eval::EvalOptions opt;
  opt.batch_size = kWindows;
  QD_ASSIGN_OR_RETURN(eval::PerplexityResult ppl,
                      eval::EvaluatePerplexity(runner->Blockwise(), windows, opt));
  json entry = {{"name", c.name + " (" + quant::DescribeSpec(c.weight) + ")"},
                {"gguf", eo.output_dir + "/model.gguf"},
                {"engine_ppl", ppl.ppl},
                {"tokens", ppl.tokens},
                {"exact_code_tensors", exported.exact_code_tensors},
                {"notes", exported.notes}};
  if (c.greedy) {
    const std::vector<int64_t> prompt = {1, 403, 407, 261, 378};
    QD_ASSIGN_OR_RETURN(std::vector<int64_t> tokens, Greedy(*runner, prompt, kGreedyTokens));
    entry["greedy"] = {{"prompt", prompt}, {"tokens", tokens}};
  }
  return entry;
}

int Main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: gguf_export_peer_models OUT_DIR\n";
    return 2;
  }
  const std::string out_dir = argv[1];
  auto tok = io::LoadTokenizerFromDir(kModel);
  if (!tok.ok()) {
    std::cerr << tok.status() << "\n";
    return 1;
  }
  auto windows =
      eval::MakeEvalWindows((*tok)->Encode(ReadFile(kText)), (*tok)->bos_id(), {kNctx, kWindows});
  if (!windows.ok()) {
    std::cerr << windows.status() << "\n";
    return 1;
  }
  std::vector<PeerCase> cases = {
      {"f32",
       gguf::GgmlType::kF32,
       Weight(DataType::kInt8, QScheme::kPerChannel, std::nullopt, true),
       {"lm_head"},
       true},
      {"q8_0",
       gguf::GgmlType::kQ8_0,
       Weight(DataType::kInt8, QScheme::kPerGroup, 32, true),
       {"lm_head", "*down_proj"}},
      {"q4_0",
       gguf::GgmlType::kQ4_0,
       Weight(DataType::kInt4, QScheme::kPerGroup, 32, true),
       {"lm_head", "*down_proj"}},
      {"q4_1",
       gguf::GgmlType::kQ4_1,
       Weight(DataType::kUInt4, QScheme::kPerGroup, 32, false),
       {"lm_head", "*down_proj"}},
      // The w_mxfp4 preset's weights; down_proj's 172-wide rows are written
      // as their F32 values (not whole blocks).
      {"mxfp4", gguf::GgmlType::kMXFP4, Mxfp4Weight(), {"lm_head"}},
  };
  json manifest = {{"windows", json::array()}, {"models", json::array()}};
  for (const auto& w : windows->windows) manifest["windows"].push_back(w);
  for (const PeerCase& c : cases) {
    auto entry = RunCase(c, *windows, out_dir);
    if (!entry.ok()) {
      std::cerr << "gguf_export_peer_models: " << c.name << ": " << entry.status() << "\n";
      return 1;
    }
    manifest["models"].push_back(*entry);
    std::cout << c.name << ": engine ppl " << (*entry)["engine_ppl"].get<double>() << "\n";
  }
  std::ofstream(out_dir + "/manifest.json") << manifest.dump();
  return 0;
}

}  // namespace
}  // namespace quantd

int main(int argc, char** argv) { return quantd::Main(argc, argv); }
