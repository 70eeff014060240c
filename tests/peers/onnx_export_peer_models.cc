// Writes quantd's ONNX QDQ exports of the quantized stories260K model and the
// engine's fake-quantized logits for them, for the onnxruntime peer check
// (onnx_peer_check.mjs).
//
// Models: int8 W8A8 static (per-channel int8 weights, static per-tensor int8
// inputs; opset 13), FP8 W8A8 static with an FP8 KV cache (opset 19), and
// uint4 per-group(4) weight-only (blocked DequantizeLinear, opset 21). The
// engine runs each with QuantizedModelRunner on two windows of the
// evaluation text; the logits go to <name>.logits (float32, little-endian,
// [2, T, vocab]).
//
// Static activation quantizers make the comparison discontinuous: a value
// within ~1e-6 of a rounding boundary gets a different code when two float
// GEMMs sum in different orders, and that token's later layers differ by a
// quantization step. Which values land there depends on the GEMM kernels
// onnxruntime and LibTorch pick for the CPU (an earlier machine flipped the
// int8 model's layer-3 down_proj input at token 17, x / scale = 2.4999986,
// and 16 of 96 positions then missed 1e-3). On this project's machine
// (2026-11-26) none flips: relative L2 error 5.7e-8, every position within
// 3.0e-7 of the largest logit. So the bound is the 1e-3 relative, on
// the whole logits tensor, and per position on all but 10% of them (a flip
// on another CPU), with every position within 2e-2.
//
//   onnx_export_peer_models OUT_DIR  -> OUT_DIR/manifest.json, OUT_DIR/<name>/model.onnx
#include <ATen/ATen.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "worker/common/status.h"
#include "worker/export/onnx_qdq.h"
#include "worker/export/quantized_model_runner.h"
#include "worker/export/quark_config.h"
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
constexpr int64_t kSeq = 48;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

QuantSpec Spec(DataType t, QScheme q = QScheme::kPerTensor, std::optional<int> group = {},
               bool symmetric = true) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = q;
  s.group_size = group;
  s.symmetric = symmetric;
  return s;
}

struct PeerCase {
  std::string name;
  exporter::QuarkLayerSpecs global;
  std::optional<QuantSpec> kv_cache;
  // Per token position: max |onnxruntime - engine| / max |engine| over the
  // vocabulary; at least `min_share` of the positions within `tolerance`,
  // all within `max_tolerance`.
  double tolerance;
  double min_share;
  double max_tolerance;
  bool may_lack_kernel;  // onnxruntime may not implement the ops on CPU
};

StatusOr<json> RunCase(const PeerCase& c, const at::Tensor& calibration, const at::Tensor& ids,
                       const std::string& out_dir) {
  json cfg = {{"quant_method", "quark"},
              {"global_quant_config", exporter::QuarkLayerJson(c.global)},
              {"exclude", {"lm_head"}}};
  if (c.kv_cache) {
    exporter::QuarkLayerSpecs kv = c.global;
    kv.output = c.kv_cache;
    cfg["layer_quant_config"] = {{"*k_proj", exporter::QuarkLayerJson(kv)},
                                 {"*v_proj", exporter::QuarkLayerJson(kv)}};
  }
  exporter::testing::InMemoryQuantizeOptions qo;
  qo.model_dir = kModel;
  qo.quant_config_json = cfg.dump();
  qo.calibration_ids = calibration;
  QD_ASSIGN_OR_RETURN(auto model, exporter::testing::InMemoryQuantizedModel::Create(qo));
  exporter::OnnxQdqExportOptions eo;
  eo.output_dir = out_dir + "/" + c.name;
  eo.overwrite = true;
  QD_ASSIGN_OR_RETURN(exporter::OnnxQdqExportResult exported, exporter::ExportOnnxQdq(*model, eo));
  QD_ASSIGN_OR_RETURN(auto runner, exporter::QuantizedModelRunner::Create(*model));
  QD_ASSIGN_OR_RETURN(at::Tensor logits, runner->Forward(ids));
  logits = logits.to(at::kFloat).contiguous();
  const std::string logits_path = out_dir + "/" + c.name + ".logits";
  std::ofstream(logits_path, std::ios::binary)
      .write(static_cast<const char*>(logits.data_ptr()), logits.numel() * 4);
  return json{{"name", c.name},
              {"onnx", eo.output_dir + "/model.onnx"},
              {"opset", exported.opset},
              {"logits", logits_path},
              {"shape", logits.sizes().vec()},
              {"tolerance", c.tolerance},
              {"min_share", c.min_share},
              {"max_tolerance", c.max_tolerance},
              {"may_lack_kernel", c.may_lack_kernel}};
}

int Main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: onnx_export_peer_models OUT_DIR\n";
    return 2;
  }
  const std::string out_dir = argv[1];
  auto tok = io::LoadTokenizerFromDir(kModel);
  if (!tok.ok()) {
    std::cerr << tok.status() << "\n";
    return 1;
  }
  const std::vector<int32_t> text = (*tok)->Encode(ReadFile(kText));
  // Evaluation: two windows of [BOS] + text from the start; calibration:
  // four windows from the end.
  at::Tensor ids = at::empty({2, kSeq}, at::kLong);
  at::Tensor calibration = at::empty({4, 64}, at::kLong);
  for (int64_t b = 0; b < 2; ++b) {
    ids[b][0] = (*tok)->bos_id();
    for (int64_t t = 1; t < kSeq; ++t) ids[b][t] = text[b * kSeq + t];
  }
  for (int64_t b = 0; b < 4; ++b)
    for (int64_t t = 0; t < 64; ++t) calibration[b][t] = text[text.size() - 1 - b * 64 - t];

  std::vector<PeerCase> cases(3);
  cases[0].name = "int8_w8a8_static";
  cases[0].global.weight = Spec(DataType::kInt8, QScheme::kPerChannel);
  cases[0].global.weight->ch_axis = 0;
  cases[0].global.input = Spec(DataType::kInt8);
  cases[0].tolerance = 1e-3;
  cases[0].min_share = 0.9;
  cases[0].max_tolerance = 2e-2;
  cases[0].may_lack_kernel = false;
  cases[1].name = "fp8_w8a8_static_kv";
  cases[1].global.weight = Spec(DataType::kFp8E4M3);
  cases[1].global.input = Spec(DataType::kFp8E4M3);
  cases[1].kv_cache = Spec(DataType::kFp8E4M3);
  cases[1].tolerance = 1e-3;
  cases[1].min_share = 1.0;
  cases[1].max_tolerance = 1e-3;
  cases[1].may_lack_kernel = true;
  cases[2].name = "uint4_g4_w4a16";
  cases[2].global.weight = Spec(DataType::kUInt4, QScheme::kPerGroup, 4, /*symmetric=*/false);
  cases[2].tolerance = 1e-3;
  cases[2].min_share = 1.0;
  cases[2].max_tolerance = 1e-3;
  cases[2].may_lack_kernel = false;

  json manifest = {{"ids", json::array()}, {"models", json::array()}};
  for (int64_t b = 0; b < 2; ++b) {
    std::vector<int64_t> row(ids[b].data_ptr<int64_t>(), ids[b].data_ptr<int64_t>() + kSeq);
    manifest["ids"].push_back(row);
  }
  for (const PeerCase& c : cases) {
    auto entry = RunCase(c, calibration, ids, out_dir);
    if (!entry.ok()) {
      std::cerr << "onnx_export_peer_models: " << c.name << ": " << entry.status() << "\n";
      return 1;
    }
    manifest["models"].push_back(*entry);
  }
  std::ofstream(out_dir + "/manifest.json") << manifest.dump();
  std::cout << "onnx_export_peer_models: wrote " << cases.size() << " models\n";
  return 0;
}

}  // namespace
}  // namespace quantd

int main(int argc, char** argv) { return quantd::Main(argc, argv); }
