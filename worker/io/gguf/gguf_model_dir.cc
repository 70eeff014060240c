#include "worker/io/gguf/gguf_model_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "worker/io/gguf/gguf_file.h"
#include "worker/io/gguf/hf_mapping.h"
#include "worker/io/tokenizer/gguf_tokenizer.h"
#include "worker/io/tokenizer/hf_tokenizer_files.h"

namespace quantd::gguf {
namespace {

// A new file in the engine's own view directory: never through a link,
// never over an existing entry.
Status WriteNewFile(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return FailedPreconditionError("cannot create " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      close(fd);
      return FailedPreconditionError("cannot write " + path + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0)
    return FailedPreconditionError("cannot write " + path + ": " + std::strerror(errno));
  return OkStatus();
}

}  // namespace

bool HasGgufModel(const std::string& dir) {
  struct stat st;
  return stat((dir + "/" + kGgufModelFileName).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool LooksLikeGguf(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  char magic[4] = {};
  const bool gguf = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                    pread(fd, magic, sizeof(magic), 0) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
  close(fd);
  return gguf;
}

Status WriteGgufModelDir(const std::string& dir) {
  QD_ASSIGN_OR_RETURN(const GgufFile file, ReadGgufFile(dir + "/" + kGgufModelFileName));
  // llama.cpp's gguf-split names its parts <name>-0000i-of-0000n.gguf and
  // counts them here; one part lacks most tensors.
  QD_ASSIGN_OR_RETURN(int64_t parts, file.GetIntOr("split.count", 1));
  if (parts > 1) {
    return UnimplementedError("the GGUF is one part of " + std::to_string(parts) +
                              " (split.count); merge the parts into one file first "
                              "(llama-gguf-split --merge)");
  }
  QD_ASSIGN_OR_RETURN(std::string config, BuildHfConfigJson(file));
  std::optional<std::string> chat_template;
  if (file.Find("tokenizer.chat_template") != nullptr) {
    QD_ASSIGN_OR_RETURN(chat_template, file.GetString("tokenizer.chat_template"));
    if (chat_template->size() > kMaxChatTemplateBytes) {
      return InvalidArgumentError(file.where() + ": tokenizer.chat_template is over 1 MiB");
    }
  }
  QD_ASSIGN_OR_RETURN(auto tokenizer, io::LoadTokenizerFromGguf(file));
  QD_ASSIGN_OR_RETURN(auto tokenizer_files, io::HfTokenizerFiles(*tokenizer));
  for (auto& [name, text] : tokenizer_files) {
    if (name != "tokenizer_config.json") continue;
    // Older Transformers read the template here; newer ones the .jinja.
    nlohmann::json c = nlohmann::json::parse(text);
    if (chat_template) c["chat_template"] = *chat_template;
    QD_ASSIGN_OR_RETURN(int64_t pad, file.GetIntOr("tokenizer.ggml.padding_token_id", -1));
    if (pad >= 0 && pad < tokenizer->vocab_size()) {
      QD_ASSIGN_OR_RETURN(std::vector<std::string> tokens,
                          file.GetStringArray("tokenizer.ggml.tokens"));
      if (pad < static_cast<int64_t>(tokens.size())) c["pad_token"] = tokens[pad];
    }
    text = c.dump(2) + "\n";
  }
  QD_RETURN_IF_ERROR(WriteNewFile(dir + "/config.json", config));
  for (const auto& [name, text] : tokenizer_files) {
    QD_RETURN_IF_ERROR(WriteNewFile(dir + "/" + name, text));
  }
  if (chat_template) {
    QD_RETURN_IF_ERROR(WriteNewFile(dir + "/chat_template.jinja", *chat_template));
  }
  return OkStatus();
}

}  // namespace quantd::gguf
