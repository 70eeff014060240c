// Chat conversations (a dataset's chat_rows) rendered to text with the
// model's chat template, as transformers' apply_chat_template renders them
// for calibration: messages = the row, add_generation_prompt = false,
// bos_token / eos_token = the tokenizer's special-token texts.
#ifndef QUANTD_WORKER_IO_DATASET_CHAT_ROWS_H_
#define QUANTD_WORKER_IO_DATASET_CHAT_ROWS_H_

#include <string>

#include "worker/common/status.h"
#include "worker/io/dataset/dataset.h"

namespace quantd::io {

struct ChatRenderSettings {
  std::string chat_template;  // Jinja source (docs/chat_templates.md)
  std::string bos_token;      // text; may be empty
  std::string eos_token;
};

// Replaces d.chat_rows by their renderings in d.text_rows (rendered_chat
// set, chat_bos_text = bos_token). Nothing to do without chat rows.
// FAILED_PRECONDITION when there are chat rows and no template;
// INVALID_ARGUMENT naming the dataset and row for a template that does not
// parse or fails on a row (raise_exception's message included);
// RESOURCE_EXHAUSTED past the engine's limits.
Status RenderChatRows(Dataset& d, const ChatRenderSettings& settings);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_DATASET_CHAT_ROWS_H_
