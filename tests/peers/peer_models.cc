// Writes the models and expectations for the llama.cpp peer check.
//
// For each model: a GGUF file (written by quantd's exporter, or the official
// stories260K file), a fixed prompt of token ids, and the engine's
// next-token probabilities at every position (float64 softmax of the
// engine's logits). gguf_peer_check.mjs then runs the same ids through
// llama.cpp (node-llama-cpp) and compares.
//
//   peer_models OUT_DIR   -> OUT_DIR/manifest.json and OUT_DIR/*.gguf
#include <ATen/ATen.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/export/gguf/gguf_export.h"
#include "worker/io/gguf/gguf_file.h"
#include "worker/io/safetensors/safetensors_source.h"
#include "worker/io/tensor_map_source.h"
#include "worker/io/tokenizer/bpe_tokenizer.h"
#include "worker/io/tokenizer/byte_level.h"
#include "worker/io/tokenizer/gguf_tokenizer.h"
#include "worker/io/tokenizer/sentencepiece_model.h"
#include "worker/models/model_config.h"
#include "worker/models/registry.h"

namespace quantd {
namespace {

using nlohmann::json;

constexpr char kStoriesDir[] = "models/stories260K";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Engine next-token probabilities for `ids` under `config_json` + `weights`.
StatusOr<json> EngineProbabilities(const std::string& config_json,
                                   std::shared_ptr<const io::TensorSource> weights,
                                   const std::vector<int64_t>& ids) {
  QD_ASSIGN_OR_RETURN(models::ModelConfig config,
                      models::ParseModelConfig(config_json, "peer config.json"));
  QD_ASSIGN_OR_RETURN(auto model, models::LoadCausalLM(config, weights));
  at::Tensor input = at::tensor(ids, at::kLong).reshape({1, static_cast<int64_t>(ids.size())});
  QD_ASSIGN_OR_RETURN(at::Tensor logits, model->Forward(input));
  at::Tensor probs = at::softmax(logits.squeeze(0).to(at::kDouble), -1).contiguous();
  json rows = json::array();
  for (int64_t t = 0; t < probs.size(0); ++t) {
    const double* p = probs[t].data_ptr<double>();
    rows.push_back(std::vector<double>(p, p + probs.size(1)));
  }
  return rows;
}

void Put(io::TensorMapSource* s, const std::string& name, std::vector<int64_t> shape, double std,
         double mean = 0.0) {
  s->Put(name, at::randn(shape, at::kFloat) * std + mean);
}

// A byte-level vocabulary: the 256 byte tokens plus <|endoftext|>.
StatusOr<std::unique_ptr<io::BpeTokenizer>> ToyBpeTokenizer() {
  io::BpeVocab vocab;
  for (int b = 0; b < 256; ++b) vocab.tokens.push_back(io::BytesToByteLevel(std::string(1, b)));
  vocab.tokens.push_back("<|endoftext|>");
  vocab.control_tokens = {256};
  io::BpeOptions o;
  o.pretokenizer_pattern = io::kGpt2Pattern;
  o.bos_id = 256;
  o.eos_id = 256;
  return io::BpeTokenizer::Create(std::move(vocab), o);
}

struct PeerModel {
  std::string name;
  std::string gguf;
  std::vector<int64_t> ids;
  json probs;
};

Status WriteRandomGpt2(const std::string& out_dir, PeerModel* m) {
  const int64_t d = 64, layers = 2, vocab = 257, positions = 64;
  const std::string config = json{
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"n_embd", d},
      {"n_layer", layers},
      {"n_head", 4},
      {"n_positions", positions},
      {"n_inner", 4 * d},
      {"vocab_size", vocab},
      {"layer_norm_epsilon", 1e-5},
      {"activation_function", "gelu_new"},
      {"tie_word_embeddings",
       true}}.dump();
  auto w = std::make_shared<io::TensorMapSource>("random GPT-2");
  Put(w.get(), "transformer.wte.weight", {vocab, d}, 0.5);
  Put(w.get(), "transformer.wpe.weight", {positions, d}, 0.2);
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    Put(w.get(), p + "ln_1.weight", {d}, 0.1, 1.0);
    Put(w.get(), p + "ln_1.bias", {d}, 0.1);
    Put(w.get(), p + "attn.c_attn.weight", {d, 3 * d}, 0.15);
    Put(w.get(), p + "attn.c_attn.bias", {3 * d}, 0.05);
    Put(w.get(), p + "attn.c_proj.weight", {d, d}, 0.15);
    Put(w.get(), p + "attn.c_proj.bias", {d}, 0.05);
    Put(w.get(), p + "ln_2.weight", {d}, 0.1, 1.0);
    Put(w.get(), p + "ln_2.bias", {d}, 0.1);
    Put(w.get(), p + "mlp.c_fc.weight", {d, 4 * d}, 0.15);
    Put(w.get(), p + "mlp.c_fc.bias", {4 * d}, 0.05);
    Put(w.get(), p + "mlp.c_proj.weight", {4 * d, d}, 0.1);
    Put(w.get(), p + "mlp.c_proj.bias", {d}, 0.05);
  }
  Put(w.get(), "transformer.ln_f.weight", {d}, 0.1, 1.0);
  Put(w.get(), "transformer.ln_f.bias", {d}, 0.1);
  QD_ASSIGN_OR_RETURN(auto tok, ToyBpeTokenizer());
  gguf::GgufExportOptions options;
  options.weight_type = gguf::GgmlType::kF32;
  options.model_name = "random-gpt2";
  QD_ASSIGN_OR_RETURN(options.extra_metadata, io::TokenizerGgufMetadata(*tok));
  m->name = "random GPT-2 (F32)";
  m->gguf = out_dir + "/gpt2-random-f32.gguf";
  QD_RETURN_IF_ERROR(gguf::WriteGgufFromHf(config, *w, options, m->gguf));
  m->ids = {256, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 10, 65};
  QD_ASSIGN_OR_RETURN(m->probs, EngineProbabilities(config, w, m->ids));
  return OkStatus();
}

Status WriteRandomLlama(const std::string& out_dir, PeerModel* m) {
  const int64_t d = 64, layers = 2, heads = 4, kv_heads = 2, ffn = 160, vocab = 512;
  const int64_t head_dim = d / heads;
  const std::string config = json{
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_size", d},
      {"intermediate_size", ffn},
      {"num_hidden_layers", layers},
      {"num_attention_heads", heads},
      {"num_key_value_heads", kv_heads},
      {"vocab_size", vocab},
      {"max_position_embeddings", 256},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", 10000.0},
      {"hidden_act", "silu"},
      {"tie_word_embeddings", false},
      {"bos_token_id", 1},
      {"eos_token_id", 2}}.dump();
  auto w = std::make_shared<io::TensorMapSource>("random Llama");
  Put(w.get(), "model.embed_tokens.weight", {vocab, d}, 0.5);
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    Put(w.get(), p + "input_layernorm.weight", {d}, 0.1, 1.0);
    Put(w.get(), p + "self_attn.q_proj.weight", {heads * head_dim, d}, 0.2);
    Put(w.get(), p + "self_attn.k_proj.weight", {kv_heads * head_dim, d}, 0.2);
    Put(w.get(), p + "self_attn.v_proj.weight", {kv_heads * head_dim, d}, 0.2);
    Put(w.get(), p + "self_attn.o_proj.weight", {d, heads * head_dim}, 0.15);
    Put(w.get(), p + "post_attention_layernorm.weight", {d}, 0.1, 1.0);
    Put(w.get(), p + "mlp.gate_proj.weight", {ffn, d}, 0.15);
    Put(w.get(), p + "mlp.up_proj.weight", {ffn, d}, 0.15);
    Put(w.get(), p + "mlp.down_proj.weight", {d, ffn}, 0.1);
  }
  Put(w.get(), "model.norm.weight", {d}, 0.1, 1.0);
  Put(w.get(), "lm_head.weight", {vocab, d}, 0.4);
  // stories260K's SentencePiece vocabulary (512 pieces) as the tokenizer.
  QD_ASSIGN_OR_RETURN(auto native,
                      io::LoadNativeSentencePiece(std::string(kStoriesDir) + "/tokenizer.model"));
  gguf::GgufExportOptions options;
  options.weight_type = gguf::GgmlType::kF32;
  options.model_name = "random-llama-gqa";
  QD_ASSIGN_OR_RETURN(options.extra_metadata, io::TokenizerGgufMetadata(*native));
  m->name = "random Llama, GQA 4/2, untied head (F32)";
  m->gguf = out_dir + "/llama-random-f32.gguf";
  QD_RETURN_IF_ERROR(gguf::WriteGgufFromHf(config, *w, options, m->gguf));
  m->ids = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 13};
  QD_ASSIGN_OR_RETURN(m->probs, EngineProbabilities(config, w, m->ids));
  return OkStatus();
}

Status WriteStories(const std::string& out_dir, std::vector<PeerModel>* models) {
  const std::string config = ReadFile(std::string(kStoriesDir) + "/config.json");
  QD_ASSIGN_OR_RETURN(auto st,
                      io::SafetensorsSource::Open(std::string(kStoriesDir) + "/model.safetensors"));
  std::shared_ptr<const io::TensorSource> weights(std::move(st));
  const std::vector<int64_t> ids = {1,   403, 407, 261, 378, 432, 383, 286,  261, 376,
                                    298, 315, 421, 395, 317, 426, 13,  1858, 2,   350};
  std::vector<int64_t> prompt(ids.begin(), ids.begin() + 16);
  QD_ASSIGN_OR_RETURN(json probs, EngineProbabilities(config, weights, prompt));
  PeerModel official{"stories260K official GGUF (F32)",
                     std::string(kStoriesDir) + "/stories260K-f32.gguf", prompt, probs};
  // The same model exported by quantd from its safetensors copy.
  QD_ASSIGN_OR_RETURN(auto gguf_tok, io::LoadTokenizerFromGgufPath(official.gguf));
  gguf::GgufExportOptions options;
  options.weight_type = gguf::GgmlType::kF32;
  options.model_name = "stories260K";
  QD_ASSIGN_OR_RETURN(options.extra_metadata, io::TokenizerGgufMetadata(*gguf_tok));
  PeerModel exported{"stories260K exported by quantd (F32)",
                     out_dir + "/stories260K-quantd-f32.gguf", prompt, probs};
  QD_RETURN_IF_ERROR(gguf::WriteGgufFromHf(config, *weights, options, exported.gguf));
  models->push_back(std::move(official));
  models->push_back(std::move(exported));
  return OkStatus();
}

int Main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: peer_models OUT_DIR\n";
    return 2;
  }
  const std::string out_dir = argv[1];
  at::manual_seed(20260101);
  std::vector<PeerModel> models;
  Status s = WriteStories(out_dir, &models);
  PeerModel gpt2, llama;
  if (s.ok()) s = WriteRandomGpt2(out_dir, &gpt2);
  if (s.ok()) s = WriteRandomLlama(out_dir, &llama);
  if (!s.ok()) {
    std::cerr << "peer_models: " << s << "\n";
    return 1;
  }
  models.push_back(std::move(gpt2));
  models.push_back(std::move(llama));
  json manifest = json::array();
  for (const auto& m : models) {
    manifest.push_back({{"name", m.name}, {"gguf", m.gguf}, {"ids", m.ids}, {"probs", m.probs}});
  }
  std::ofstream(out_dir + "/manifest.json") << manifest.dump();
  std::cout << "peer_models: wrote " << models.size() << " models to " << out_dir << "\n";
  return 0;
}

}  // namespace
}  // namespace quantd

int main(int argc, char** argv) { return quantd::Main(argc, argv); }
