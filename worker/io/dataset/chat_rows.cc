#include "worker/io/dataset/chat_rows.h"

#include "worker/common/cancellation.h"
#include "worker/io/chat_template/chat_template.h"

namespace quantd::io {

Status RenderChatRows(Dataset& d, const ChatRenderSettings& settings) {
  if (d.chat_rows.empty()) return OkStatus();
  if (settings.chat_template.empty()) {
    return FailedPreconditionError(
        "dataset " + d.name +
        " holds chat messages and the model has no chat template (chat_template.jinja or "
        "tokenizer_config.json's chat_template) to render them with");
  }
  auto parsed = ChatTemplate::Parse(settings.chat_template);
  if (!parsed.ok()) {
    return Status(parsed.status())
        .Prepend("the model's chat template, rendering dataset " + d.name + ": ");
  }
  nlohmann::json context = {{"add_generation_prompt", false},
                            {"bos_token", settings.bos_token},
                            {"eos_token", settings.eos_token}};
  std::vector<std::string> rendered;
  rendered.reserve(d.chat_rows.size());
  for (size_t i = 0; i < d.chat_rows.size(); ++i) {
    if (StopRequested()) return CancelledStatus("rendering dataset " + d.name);
    context["messages"] = std::move(d.chat_rows[i]);
    auto text = parsed->Render(context);
    if (!text.ok()) {
      return Status(text.status())
          .Prepend("dataset " + d.name + " conversation " + std::to_string(i) +
                   ": the model's chat template: ");
    }
    rendered.push_back(*std::move(text));
  }
  d.chat_rows.clear();
  d.text_rows = std::move(rendered);
  d.rendered_chat = true;
  d.chat_bos_text = settings.bos_token;
  return OkStatus();
}

}  // namespace quantd::io
