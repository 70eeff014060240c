#include "worker/models/registry.h"

#include "worker/io/gguf/gguf_model_dir.h"
#include "worker/io/gguf/gguf_tensor_source.h"
#include "worker/io/safetensors/safetensors_source.h"
#include "worker/models/architectures.h"

namespace quantd::models {
namespace {

struct Registration {
  const char* architecture;
  StatusOr<std::unique_ptr<DecoderBlock>> (*load_block)(const ModelConfig&, int64_t,
                                                        const WeightLoader&);
};

// Keep in step with SupportedArchitectures() (model_config.cc); the registry
// test checks that every supported architecture is registered.
constexpr Registration kRegistry[] = {
    {"LlamaForCausalLM", &LoadLlamaBlock},  {"MistralForCausalLM", &LoadLlamaBlock},
    {"Qwen2ForCausalLM", &LoadLlamaBlock},  {"Qwen3ForCausalLM", &LoadLlamaBlock},
    {"MixtralForCausalLM", &LoadMoeBlock},  {"Qwen2MoeForCausalLM", &LoadMoeBlock},
    {"Qwen3MoeForCausalLM", &LoadMoeBlock}, {"Phi3ForCausalLM", &LoadPhi3Block},
    {"Gemma2ForCausalLM", &LoadGemmaBlock}, {"Gemma3ForCausalLM", &LoadGemmaBlock},
    {"GPT2LMHeadModel", &LoadGpt2Block},    {"OPTForCausalLM", &LoadOptBlock},
    {"OlmoeForCausalLM", &LoadMoeBlock},
};

}  // namespace

StatusOr<std::unique_ptr<CausalLM>> LoadCausalLM(const ModelConfig& config,
                                                 std::shared_ptr<const io::TensorSource> weights,
                                                 const ModelOptions& options) {
  for (const auto& r : kRegistry) {
    if (config.architecture == r.architecture) {
      return std::make_unique<CausalLM>(config, std::move(weights), options, r.load_block);
    }
  }
  std::string supported;
  for (const auto& r : kRegistry)
    supported += (supported.empty() ? "" : ", ") + std::string(r.architecture);
  return Status(StatusCode::kFailedPrecondition,
                "architecture \"" + config.architecture +
                    "\" is not supported; supported architectures: " + supported,
                "UNSUPPORTED_ARCHITECTURE");
}

StatusOr<std::shared_ptr<const io::TensorSource>> OpenModelWeights(const std::string& dir) {
  if (gguf::HasGgufModel(dir)) {
    QD_ASSIGN_OR_RETURN(auto source,
                        gguf::GgufTensorSource::Open(dir + "/" + gguf::kGgufModelFileName));
    return std::shared_ptr<const io::TensorSource>(std::move(source));
  }
  QD_ASSIGN_OR_RETURN(auto source, io::SafetensorsSource::Open(dir));
  return std::shared_ptr<const io::TensorSource>(std::move(source));
}

StatusOr<std::unique_ptr<CausalLM>> OpenCausalLM(const std::string& dir,
                                                 const ModelOptions& options) {
  QD_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
  QD_ASSIGN_OR_RETURN(auto weights, OpenModelWeights(dir));
  return LoadCausalLM(config, std::move(weights), options);
}

}  // namespace quantd::models
