#include "worker/pipeline/activation_placement.h"

#include <algorithm>
#include <cstdio>

namespace quantd::pipeline {
namespace {

std::string GiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return buf;
}

}  // namespace

int64_t BlockWorkingSetBytes(const models::ModelConfig& c, const models::ModelOptions& options) {
  // In double: a tenant's config may name dimensions whose products overflow
  // int64 (the loader bounds each one, not their products).
  const double h = static_cast<double>(c.hidden_size);
  const double hd = c.head_dim > 0 ? static_cast<double>(c.head_dim)
                                   : (c.num_attention_heads > 0 ? h / c.num_attention_heads : h);
  const double q_width = static_cast<double>(c.num_attention_heads) * hd;
  const double kv_width = static_cast<double>(std::max<int64_t>(c.num_key_value_heads, 1)) * hd;
  const double attention = 2 * h * q_width + 2 * h * kv_width;
  // A dense MLP as three projections (GPT-2's and OPT's two are counted as
  // three: an estimate errs high); a mixture of experts as all its experts,
  // its shared expert and its router.
  double mlp = 3 * h * static_cast<double>(c.intermediate_size);
  double widest_mlp = static_cast<double>(c.intermediate_size);
  if (c.num_experts > 0) {
    const double expert = static_cast<double>(c.moe_intermediate_size > 0 ? c.moe_intermediate_size
                                                                          : c.intermediate_size);
    const double shared = static_cast<double>(c.shared_expert_intermediate_size);
    const double experts = static_cast<double>(c.num_experts);
    mlp = experts * 3 * h * expert + 3 * h * shared + h * experts;
    widest_mlp = std::max({expert, shared, widest_mlp});
  }
  const double weights = 4 * (attention + mlp + 2 * h);
  const double widest_input = std::max({h, q_width, widest_mlp});
  const double chunk =
      static_cast<double>(options.max_tokens_per_chunk) * std::max(widest_mlp, 3 * h) * 4 * 3;
  const double attention_tile = static_cast<double>(options.max_attention_elements) * 4 * 2;
  const double gptq = weights + 4 * widest_input * widest_input * 4;
  const double total = 2 * weights + chunk + attention_tile + gptq;
  constexpr double kMax = static_cast<double>(int64_t{1} << 62);
  return static_cast<int64_t>(std::min(total, kMax));
}

ActivationPlacement PlaceActivations(ActivationOffload mode, int64_t bytes,
                                     int64_t working_set_bytes, const c10::Device& device,
                                     const std::optional<DeviceMemory>& memory) {
  ActivationPlacement p;
  const std::string what = "activations " + GiB(bytes);
  if (device.is_cpu()) {
    p.reason = what + " in host memory (the job runs on the CPU)";
    return p;
  }
  const std::string dev = device.str();
  if (mode == ActivationOffload::kHost) {
    p.on_host = true;
    p.reason = what + " kept in host memory and streamed to " + dev + " (activation offload: host)";
    return p;
  }
  if (mode == ActivationOffload::kDevice) {
    p.reason = what + " kept on " + dev + " (activation offload: device)";
    return p;
  }
  if (!memory) {
    p.reason = what + " kept on " + dev + " (its free memory is unknown)";
    return p;
  }
  const int64_t free_bytes = memory->total_bytes - memory->used_bytes;
  // Each term is below 2^62 (BlockWorkingSetBytes; activations are tensors'
  // bytes), so their sum does not overflow.
  p.on_host = bytes + working_set_bytes > free_bytes / 4 * 3;
  p.reason = what + (p.on_host ? " kept in host memory and streamed to " : " kept on ") + dev +
             ": with a block's working set of about " + GiB(working_set_bytes) +
             (p.on_host ? " they need more than " : " they need at most ") +
             "three quarters of the " + GiB(free_bytes) + " free there";
  return p;
}

at::Tensor ToHost(const at::Tensor& x) {
  if (!x.defined() || x.device().is_cpu()) return x;
  at::Tensor host = at::empty(x.sizes(), x.options().device(at::kCPU).pinned_memory(true));
  host.copy_(x);
  return host;
}

}  // namespace quantd::pipeline
