#include "worker/io/chat_template/chat_template.h"

#include "worker/common/cancellation.h"
#include "worker/io/chat_template/interpreter.h"
#include "worker/io/chat_template/parser.h"

namespace quantd::io {

struct ChatTemplate::Program {
  chat_template::Body body;
  ChatTemplateLimits limits;
};

namespace {
Status ToStatus(const chat_template::TemplateError& e) {
  if (e.code == StatusCode::kCancelled) return CancelledStatus("rendering a chat template");
  return Status(e.code, "chat template: " + e.message);
}
}  // namespace

StatusOr<ChatTemplate> ChatTemplate::Parse(std::string_view source,
                                           const ChatTemplateLimits& limits) {
  if (source.size() > limits.max_template_bytes)
    return ResourceExhaustedError("chat template: " + std::to_string(source.size()) +
                                  " bytes is over the " +
                                  std::to_string(limits.max_template_bytes) + "-byte limit");
  try {
    auto program = std::make_shared<Program>();
    program->body = chat_template::ParseTemplate(source, limits.max_depth);
    program->limits = limits;
    return ChatTemplate(std::move(program));
  } catch (const chat_template::TemplateError& e) {
    return ToStatus(e);
  }
}

StatusOr<std::string> ChatTemplate::Render(const nlohmann::json& context) const {
  return RenderImpl(context);
}

StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& context) const {
  return RenderImpl(context);
}

template <typename Json>
StatusOr<std::string> ChatTemplate::RenderImpl(const Json& context) const {
  if (!context.is_object())
    return InvalidArgumentError("chat template: the context must be a JSON object");
  try {
    chat_template::Value ctx = chat_template::Value::FromJson(context);
    chat_template::Renderer renderer(program_->limits, ctx.dict());
    return renderer.Render(program_->body);
  } catch (const chat_template::TemplateError& e) {
    return ToStatus(e);
  }
}

}  // namespace quantd::io
