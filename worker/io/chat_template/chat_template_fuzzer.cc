// Fuzzes ChatTemplate::Parse and Render over a small conversation: any
// input is a rendering or an INVALID_ARGUMENT / RESOURCE_EXHAUSTED Status,
// never a crash, and small limits keep each run short.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "worker/io/chat_template/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::json* const kContext = new nlohmann::json(nlohmann::json::parse(R"({
    "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true,
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"a": [1, 2.5, null]}}}],
    "messages": [
      {"role": "system", "content": "sys"},
      {"role": "user", "content": [{"type": "text", "text": "hi é"}]},
      {"role": "assistant", "content": "<think>x</think>ok", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]},
      {"role": "tool", "content": "42"},
      {"role": "user", "content": "bye"}]})"));
  quantd::io::ChatTemplateLimits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = 1 << 20;
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  auto t = quantd::io::ChatTemplate::Parse(source, limits);
  auto ok_code = [](quantd::StatusCode c) {
    return c == quantd::StatusCode::kInvalidArgument || c == quantd::StatusCode::kResourceExhausted;
  };
  if (!t.ok()) {
    if (!ok_code(t.status().code())) __builtin_trap();
    return 0;
  }
  auto out = t->Render(*kContext);
  if (!out.ok() && !ok_code(out.status().code())) __builtin_trap();
  if (out.ok() && out->size() > limits.max_output_bytes) __builtin_trap();
  return 0;
}
