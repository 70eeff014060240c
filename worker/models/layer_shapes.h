// The layers of a model, named and shaped from config.json alone.
//
// One table per architecture family says which linear layers, norms and
// embeddings a model has, their Hugging Face module names, shapes and the
// true-sequential order in which quantization algorithms visit them. The
// server uses it to validate a request (e.g. a group size that must divide
// in_features) at submit time without loading weights; the torch model code
// builds its blocks from the same table, so the two cannot disagree.
// Torch-free.
#ifndef QUANTD_WORKER_MODELS_LAYER_SHAPES_H_
#define QUANTD_WORKER_MODELS_LAYER_SHAPES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/models/model_config.h"

namespace quantd::models {

struct LinearLayerInfo {
  // Module name, e.g. "model.layers.0.self_attn.q_proj"; tensors are
  // name + ".weight" / ".bias".
  std::string name;
  // Module type as layer_type_quant_config keys it. GPT-2's Conv1D layers
  // are presented as "Linear" with a [out, in] weight.
  std::string type = "Linear";
  int64_t out_features = 0;
  int64_t in_features = 0;
  bool has_bias = false;
  // GPT-2 Conv1D stores its weight as [in, out]; export must transpose back.
  bool transposed_in_checkpoint = false;
  // Decoder block index, or -1 for lm_head and OPT's projections.
  int64_t block = -1;
};

// Linear layers that read the same input and run in parallel, in the order
// true-sequential algorithms (GPTQ, AWQ) visit them.
struct LinearGroup {
  std::vector<std::string> linears;  // module names
  // The norm or linear whose output is this group's input and can absorb a
  // per-input-channel scale (SmoothQuant/AWQ folding); empty when none can
  // (e.g. a GELU sits in between, or a post-LN OPT block).
  std::string prev_op;
  // A mixture-of-experts group: each linear sees only the tokens routed to
  // its expert (the router and a shared expert see all of them), so
  // statistics are per module (the linears of one expert share theirs)
  // rather than one for the group. prev_op's statistics are the first
  // linear's, which sees every token.
  bool routed = false;
};

// kGemmaRmsNorm: Gemma's RMSNorm, which scales by (1 + weight) in float32.
enum class NormKind { kRmsNorm, kLayerNorm, kGemmaRmsNorm };

struct NormInfo {
  std::string name;  // module name, e.g. "model.layers.0.input_layernorm"
  NormKind kind = NormKind::kRmsNorm;
  int64_t dim = 0;
  bool has_bias = false;  // LayerNorm
};

struct EmbeddingInfo {
  std::string name;  // module name, e.g. "model.embed_tokens"
  int64_t num_embeddings = 0;
  int64_t embedding_dim = 0;
};

// Names of the model-level modules. Empty strings mark absent ones.
struct ModelLayout {
  EmbeddingInfo token_embedding;
  EmbeddingInfo position_embedding;  // GPT-2 wpe, OPT embed_positions
  int64_t position_offset = 0;       // OPT: 2
  LinearLayerInfo project_in;        // OPT word_embed_proj_dim != hidden_size
  LinearLayerInfo project_out;
  NormInfo final_norm;
  LinearLayerInfo lm_head;
  // Some checkpoints omit the model prefix ("h.0.attn..." for GPT-2,
  // "decoder.layers..." for OPT); loaders try `alias` when `canonical` is
  // absent.
  std::string canonical_prefix;
  std::string alias_prefix;
};

struct BlockLayout {
  std::string prefix;                    // "model.layers.3."
  std::vector<LinearLayerInfo> linears;  // execution order
  std::vector<LinearGroup> groups;       // true-sequential groups
  std::vector<NormInfo> norms;
};

ModelLayout GetModelLayout(const ModelConfig& config);
BlockLayout GetBlockLayout(const ModelConfig& config, int64_t block);

// The parts of a mixture-of-experts MLP by module name, in the block's
// linears() order: the router, then (Qwen2-MoE) the shared expert's gate
// scalar and its gate / up / down projections, then every expert's gate /
// up / down (Mixtral's w1 / w3 / w2).
struct MoeLayout {
  std::string router;
  std::string shared_expert_gate;  // empty when none
  struct Mlp {
    std::string gate, up, down;
  };
  Mlp shared_expert;  // empty names when none
  std::vector<Mlp> experts;
};
// Empty names and no experts for a dense layer.
MoeLayout GetMoeLayout(const ModelConfig& config, int64_t block);

// Every linear layer of the model: all blocks in order, then the model-level
// ones (project_in/out, lm_head).
std::vector<LinearLayerInfo> ListLinearLayers(const ModelConfig& config);
// Token (and position) embeddings.
std::vector<EmbeddingInfo> ListEmbeddings(const ModelConfig& config);

// Convenience for the server: parses config.json text and lists its linears.
// Errors are ParseModelConfig's.
StatusOr<std::vector<LinearLayerInfo>> ListLinearLayersFromConfigJson(const std::string& json_text,
                                                                      const std::string& source);

}  // namespace quantd::models

#endif  // QUANTD_WORKER_MODELS_LAYER_SHAPES_H_
