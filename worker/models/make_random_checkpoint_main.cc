// make_random_checkpoint: writes a random-weight Llama-shaped checkpoint.
//
//   make_random_checkpoint --out=/tmp/llama7b-4blocks --layers=4
//       [--hidden=4096 --intermediate=11008 --heads=32 --kv_heads=32
//        --vocab=32000 --dtype=bf16|f16|f32 --shard_mb=2048 --seed=1 --tied
//        --arch=llama|qwen3|phi3|gemma2|gemma3|mixtral|qwen2_moe|qwen3_moe|olmoe
//        --head_dim=N --partial_rotary_factor=F --sliding_window=N
//        --experts=N --experts_per_tok=K --moe_intermediate=N]
//
// Prints one JSON line: {"dir":..., "bytes":..., "shards":...}.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "worker/models/random_checkpoint.h"

namespace {

bool Flag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  quantd::models::RandomCheckpointOptions o;
  std::string out, v;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (Flag(a, "--out", &v)) {
      out = v;
    } else if (Flag(a, "--layers", &v)) {
      o.num_hidden_layers = std::atoll(v.c_str());
    } else if (Flag(a, "--hidden", &v)) {
      o.hidden_size = std::atoll(v.c_str());
    } else if (Flag(a, "--intermediate", &v)) {
      o.intermediate_size = std::atoll(v.c_str());
    } else if (Flag(a, "--heads", &v)) {
      o.num_attention_heads = std::atoll(v.c_str());
    } else if (Flag(a, "--kv_heads", &v)) {
      o.num_key_value_heads = std::atoll(v.c_str());
    } else if (Flag(a, "--vocab", &v)) {
      o.vocab_size = std::atoll(v.c_str());
    } else if (Flag(a, "--shard_mb", &v)) {
      o.max_shard_bytes = std::strtoull(v.c_str(), nullptr, 10) << 20;
    } else if (Flag(a, "--seed", &v)) {
      o.seed = std::strtoull(v.c_str(), nullptr, 10);
    } else if (Flag(a, "--dtype", &v)) {
      if (v == "bf16") {
        o.dtype = quantd::io::SafetensorsDtype::kBF16;
      } else if (v == "f16") {
        o.dtype = quantd::io::SafetensorsDtype::kF16;
      } else if (v == "f32") {
        o.dtype = quantd::io::SafetensorsDtype::kF32;
      } else {
        std::fprintf(stderr, "--dtype must be bf16, f16 or f32\n");
        return 2;
      }
    } else if (Flag(a, "--arch", &v)) {
      o.architecture = v;
    } else if (Flag(a, "--head_dim", &v)) {
      o.head_dim = std::atoll(v.c_str());
    } else if (Flag(a, "--partial_rotary_factor", &v)) {
      o.partial_rotary_factor = std::atof(v.c_str());
    } else if (Flag(a, "--sliding_window", &v)) {
      o.sliding_window = std::atoll(v.c_str());
    } else if (Flag(a, "--experts", &v)) {
      o.num_experts = std::atoll(v.c_str());
    } else if (Flag(a, "--experts_per_tok", &v)) {
      o.num_experts_per_tok = std::atoll(v.c_str());
    } else if (Flag(a, "--moe_intermediate", &v)) {
      o.moe_intermediate_size = std::atoll(v.c_str());
    } else if (std::strcmp(a, "--tied") == 0) {
      o.tie_word_embeddings = true;
    } else {
      std::fprintf(stderr,
                   "unknown argument %s (see the header of make_random_checkpoint_main.cc)\n", a);
      return 2;
    }
  }
  if (out.empty() || o.num_hidden_layers < 1 || o.hidden_size < 1 || o.num_attention_heads < 1 ||
      o.num_key_value_heads < 1 || o.intermediate_size < 1 || o.vocab_size < 1) {
    std::fprintf(stderr, "--out is required and every size must be positive\n");
    return 2;
  }
  auto info = quantd::models::WriteRandomLlamaCheckpoint(out, o);
  if (!info.ok()) {
    std::fprintf(stderr, "%s\n", info.status().ToString().c_str());
    return 1;
  }
  std::printf("{\"dir\": \"%s\", \"bytes\": %llu, \"shards\": %d}\n", out.c_str(),
              static_cast<unsigned long long>(info->total_bytes), info->shards);
  return 0;
}
