// Renders Hugging Face chat templates (tokenizer_config.json's
// `chat_template`) the way transformers does with jinja2: a sandboxed
// engine for the subset of Jinja that chat templates use, byte-identical
// to jinja2 on it, bounded against hostile templates. What is supported
// and refused: docs/chat_templates.md.
#ifndef QUANTD_WORKER_IO_CHAT_TEMPLATE_CHAT_TEMPLATE_H_
#define QUANTD_WORKER_IO_CHAT_TEMPLATE_CHAT_TEMPLATE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "worker/common/status.h"

namespace quantd::io {

namespace chat_template {
struct Stmt;
}

struct ChatTemplateLimits {
  size_t max_template_bytes = 1 << 20;
  size_t max_output_bytes = 16 << 20;  // also bounds every string built
  uint64_t max_steps = 50'000'000;     // statements, expressions, iterations, copied items
  int max_depth = 64;                  // nesting of blocks/expressions/macro calls
};

class ChatTemplate {
 public:
  // INVALID_ARGUMENT with line:column for syntax errors and unsupported
  // constructs; RESOURCE_EXHAUSTED past max_template_bytes or max_depth.
  static StatusOr<ChatTemplate> Parse(std::string_view source,
                                      const ChatTemplateLimits& limits = {});

  // context: a JSON object (messages, add_generation_prompt, bos_token,
  // tools, ...). raise_exception(msg) -> INVALID_ARGUMENT carrying msg; a
  // limit -> RESOURCE_EXHAUSTED; a type error -> INVALID_ARGUMENT naming the
  // line; CANCELLED when the thread's CancellationScope asks.
  // Dicts iterate in nlohmann::json's order, sorted by key.
  StatusOr<std::string> Render(const nlohmann::json& context) const;
  // Dicts keep the document's key order, as transformers' json.load does,
  // so that `tools | tojson` prints keys as the tool schema has them.
  StatusOr<std::string> Render(const nlohmann::ordered_json& context) const;

 private:
  struct Program;
  template <typename Json>
  StatusOr<std::string> RenderImpl(const Json& context) const;
  ChatTemplate(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_CHAT_TEMPLATE_CHAT_TEMPLATE_H_
