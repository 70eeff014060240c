// The architecture registry: config.json "architectures" -> implementation.
//
// LoadCausalLM picks the block implementation for a ModelConfig; an
// architecture quantd does not implement is FAILED_PRECONDITION (reason
// UNSUPPORTED_ARCHITECTURE) listing the supported ones. OpenCausalLM is the
// common path for a Hugging Face directory (config.json + safetensors).
#ifndef QUANTD_WORKER_MODELS_REGISTRY_H_
#define QUANTD_WORKER_MODELS_REGISTRY_H_

#include <memory>
#include <string>

#include "worker/common/status.h"
#include "worker/io/tensor_source.h"
#include "worker/models/causal_lm.h"
#include "worker/models/model_config.h"
#include "worker/models/model_options.h"

namespace quantd::models {

StatusOr<std::unique_ptr<CausalLM>> LoadCausalLM(const ModelConfig& config,
                                                 std::shared_ptr<const io::TensorSource> weights,
                                                 const ModelOptions& options = {});

// The weights of a model directory: its model.gguf when it has one (a GGUF
// job's view, worker/io/gguf/gguf_model_dir.h), read with GgufTensorSource
// under Hugging Face names; otherwise its safetensors (one file or shards).
StatusOr<std::shared_ptr<const io::TensorSource>> OpenModelWeights(const std::string& dir);

// `dir` holds config.json and the weights OpenModelWeights reads.
// Errors: LoadModelConfig's, OpenModelWeights', LoadCausalLM's.
StatusOr<std::unique_ptr<CausalLM>> OpenCausalLM(const std::string& dir,
                                                 const ModelOptions& options = {});

}  // namespace quantd::models

#endif  // QUANTD_WORKER_MODELS_REGISTRY_H_
