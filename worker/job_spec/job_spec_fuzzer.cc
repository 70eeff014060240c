// Fuzzes the engine's CheckJobSpec, which quantd runs on every CreateJob:
// the input's first line holds tab-separated exclude patterns
// (spec.quantization.exclude, globs or "re:" regexes), the rest is the
// spec's quark_json, and the model is a fixed config.json on disk, so the
// patterns are also matched against its layers. Whatever the bytes, the
// check returns OK, INVALID_ARGUMENT or UNIMPLEMENTED: no crash, no stack
// overflow, no hang (libFuzzer's -timeout).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <unistd.h>

#include "quantd/v1/job.pb.h"
#include "worker/job_spec/resolve_job.h"

namespace {

std::string* model_uri = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // stories260K's shape: 5 blocks, 35 linear layers.
  char dir[] = "/tmp/job_spec_fuzzXXXXXX";
  if (mkdtemp(dir) == nullptr) std::abort();
  std::ofstream(std::string(dir) + "/config.json")
      << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
             "intermediate_size": 172, "num_hidden_layers": 5, "num_attention_heads": 8,
             "num_key_value_heads": 4, "vocab_size": 512, "rms_norm_eps": 1e-05,
             "hidden_act": "silu", "tie_word_embeddings": true})";
  model_uri = new std::string("file://" + std::string(dir));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string_view excludes = input.substr(0, newline);
  quantd::v1::JobSpec spec;
  spec.set_model_uri(*model_uri);
  auto* q = spec.mutable_quantization();
  if (newline != std::string_view::npos) {
    q->set_quark_json(std::string(input.substr(newline + 1)));
  } else {
    q->set_scheme("w_int8_per_tensor_sym");
  }
  size_t start = 0;
  while (start <= excludes.size() && q->exclude_size() < 2000) {
    const size_t tab = excludes.find('\t', start);
    const size_t end = tab == std::string_view::npos ? excludes.size() : tab;
    if (end > start) q->add_exclude(std::string(excludes.substr(start, end - start)));
    start = end + 1;
  }
  std::vector<std::string> warnings;
  const quantd::Status s = quantd::job_spec::CheckJobSpec(spec, &warnings);
  switch (s.code()) {
    case quantd::StatusCode::kOk:
    case quantd::StatusCode::kInvalidArgument:
    case quantd::StatusCode::kUnimplemented:
      break;
    default:
      __builtin_trap();
  }
  return 0;
}
