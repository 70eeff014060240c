// Hugging Face <-> llama.cpp conventions for the architectures GGUF carries.
//
// GGUF names tensors "blk.3.attn_q.weight"; Hugging Face checkpoints name the
// same weight "model.layers.3.self_attn.q_proj.weight". llama.cpp also stores
// Llama's q/k rows in an interleaved RoPE order, GPT-2's Conv1D weights
// transposed, and the hyperparameters as "<arch>.*" metadata instead of
// config.json. This file holds those conventions in one place, for the GGUF
// reader (to present a GGUF as a Hugging Face checkpoint) and the writer (the
// reverse). Torch-free.
#ifndef QUANTD_WORKER_IO_GGUF_HF_MAPPING_H_
#define QUANTD_WORKER_IO_GGUF_HF_MAPPING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/gguf/gguf_file.h"

namespace quantd::gguf {

// How one tensor differs between the two layouts.
enum class LayoutChange {
  kNone,
  // llama.cpp's interleaved RoPE row order (rows of head h: pairs (i, i+d/2)
  // adjacent) vs Hugging Face's rotate-half order; `heads` says how many
  // heads the rows split into (num_attention_heads for q, num_key_value_heads
  // for k).
  kRopeQuery,
  kRopeKey,
  // GPT-2 Conv1D weights are [in, out] in Hugging Face and [out, in] in GGUF.
  kTranspose,
  // Gemma's RMSNorm weights: Hugging Face stores w and scales by (1 + w);
  // llama.cpp stores 1 + w (float32) and scales by it.
  kPlusOne,
};

struct TensorNameMapping {
  std::string name;  // the other convention's name
  LayoutChange change = LayoutChange::kNone;
  // Mixture of experts, Hugging Face to GGUF only: the tensor is expert
  // `expert` of the GGUF tensor `name` (blk.N.ffn_{gate,up,down}_exps),
  // which stacks every expert's along its slowest axis; -1 otherwise.
  int64_t expert = -1;
  // The GGUF tensor drops the leading size-1 axis (Qwen2-MoE's
  // shared_expert_gate, [1, hidden] -> ne [hidden]).
  bool squeeze = false;
};

// Architectures (general.architecture) whose tensor names are mapped.
bool IsMappedArchitecture(std::string_view arch);

// "blk.0.attn_q.weight" -> "model.layers.0.self_attn.q_proj.weight" (llama,
// qwen2, qwen3, phi3, gemma2, gemma3) or "transformer.h.0.attn.c_attn.weight" (gpt2); nullopt for a
// tensor with no Hugging Face counterpart (e.g. llama.cpp's rope_freqs).
std::optional<TensorNameMapping> GgufToHfTensorName(std::string_view arch,
                                                    std::string_view gguf_name);
// The reverse; nullopt for a name the architecture does not have. The
// mixture-of-experts architectures (llama with Mixtral's
// block_sparse_moe, qwen2moe, qwen3moe) map each expert's weight to its
// slice of the stacked tensor (TensorNameMapping::expert).
std::optional<TensorNameMapping> HfToGgufTensorName(std::string_view arch,
                                                    std::string_view hf_name);

// llama.cpp marks layer il sliding when il % period < period - 1 (period 0:
// every layer; llama_hparams::set_swa_pattern). The period that gives
// exactly `sliding` (one flag per layer; 1 when none slides), or nullopt
// when no period does.
std::optional<int64_t> LlamaCppSlidingPeriod(const std::vector<bool>& sliding);

// The config.json a Hugging Face checkpoint of this model would have, built
// from the GGUF metadata ("llama.embedding_length" -> "hidden_size", ...).
// `tied` says whether the file lacks an output.weight. UNIMPLEMENTED for an
// architecture not listed in IsMappedArchitecture; INVALID_ARGUMENT naming a
// missing or mistyped hyperparameter.
StatusOr<std::string> BuildHfConfigJson(const GgufFile& file);

}  // namespace quantd::gguf

#endif  // QUANTD_WORKER_IO_GGUF_HF_MAPPING_H_
