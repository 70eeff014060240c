#include "worker/io/dataset/dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "worker/common/bounded_json.h"
#include "worker/common/cancellation.h"
#include "worker/io/dataset/decompress.h"
#include "worker/io/dataset/parquet_reader.h"

namespace quantd::io {
namespace {

using nlohmann::json;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Status Malformed(const std::string& name, const std::string& what) {
  return InvalidArgumentError("dataset " + name + ": " + what);
}

// A JSON array of integers in [0, 2^31) as token ids.
StatusOr<std::vector<int32_t>> IdArray(const json& v, const std::string& where) {
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const auto& e : v) {
    if (!e.is_number_integer() && !e.is_number_unsigned()) {
      return InvalidArgumentError(where + ": token ids must be integers, got " + e.dump());
    }
    const int64_t id = e.get<int64_t>();
    if (id < 0 || id > INT32_MAX) {
      return InvalidArgumentError(where + ": token id " + std::to_string(id) + " is out of range");
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// One row's value: a string (text), an array of token ids, or an array of
// chat messages (objects with a "role").
Status AddValue(const json& value, const std::string& where, const std::string& field, Dataset& d) {
  enum Kind { kText, kIds, kChat };
  Kind kind;
  // A missing value (Parquet's null) or an empty list holds no tokens of
  // any kind.
  if (value.is_null() || (value.is_array() && value.empty())) return OkStatus();
  if (value.is_string()) {
    kind = kText;
  } else if (value.is_array() && !value.empty() && value[0].is_object()) {
    kind = kChat;
  } else if (value.is_array()) {
    kind = kIds;
  } else {
    return InvalidArgumentError(where + ": \"" + field +
                                "\" must be a string, an array of token ids or an array of chat "
                                "messages, got " +
                                std::string(value.type_name()));
  }
  const int kinds =
      (d.text_rows.empty() ? 0 : 1) + (d.id_rows.empty() ? 0 : 1) + (d.chat_rows.empty() ? 0 : 1);
  const bool same = (kind == kText && !d.text_rows.empty()) ||
                    (kind == kIds && !d.id_rows.empty()) || (kind == kChat && !d.chat_rows.empty());
  if (kinds > 0 && !same) {
    return InvalidArgumentError(where + ": mixes text, token-id and chat-message rows");
  }
  switch (kind) {
    case kText:
      d.text_rows.push_back(value.get<std::string>());
      break;
    case kIds: {
      QD_ASSIGN_OR_RETURN(auto ids, IdArray(value, where));
      d.id_rows.push_back(std::move(ids));
      break;
    }
    case kChat:
      for (const json& m : value) {
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
          return InvalidArgumentError(where +
                                      ": a chat message must be an object with a "
                                      "\"role\" string");
        }
      }
      d.chat_rows.push_back(value);
      break;
  }
  return OkStatus();
}

Status ParseJsonl(std::string_view content, const std::string& name, const DatasetOptions& o,
                  Dataset& d) {
  size_t line_no = 0;
  size_t pos = 0;
  // Millions of lines: a job's cancel stops the parse (cancellation.h).
  CancellationPoller poller(256);
  while (pos < content.size()) {
    if (poller.Due()) return CancelledStatus("reading dataset " + name);
    size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    std::string_view line = content.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = "dataset " + name + " line " + std::to_string(line_no);
    QD_ASSIGN_OR_RETURN(json v, ParseBoundedJson(line, JsonBounds{json_limits::kDatasetLine}, where));
    const json* field = &v;
    if (v.is_object()) {
      auto it = v.find(o.text_field);
      if (it == v.end()) {
        return InvalidArgumentError(where + ": no field \"" + o.text_field + "\"");
      }
      field = &*it;
    }
    QD_RETURN_IF_ERROR(AddValue(*field, where, o.text_field, d));
  }
  return OkStatus();
}

Status ParseParquet(std::string_view content, const std::string& name, const DatasetOptions& o,
                    Dataset& d) {
  QD_ASSIGN_OR_RETURN(std::vector<json> rows, ReadParquetRows(content, {o.text_field}, name));
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string where = "dataset " + name + " row " + std::to_string(i);
    QD_RETURN_IF_ERROR(AddValue(rows[i][o.text_field], where, o.text_field, d));
  }
  return OkStatus();
}

Status ParseJsonIds(std::string_view content, const std::string& name, Dataset& d) {
  QD_RETURN_IF_ERROR(
      CheckJsonBounds(content, JsonBounds{json_limits::kDatasetJson}, "dataset " + name));
  json v = json::parse(content.begin(), content.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded() || !v.is_array()) {
    return Malformed(name, "expected a JSON array of token ids or of id arrays");
  }
  if (!v.empty() && v[0].is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_array()) return Malformed(name, "row " + std::to_string(i) + " is not an array");
      QD_ASSIGN_OR_RETURN(auto ids, IdArray(v[i], "dataset " + name + " row " + std::to_string(i)));
      d.id_rows.push_back(std::move(ids));
    }
  } else {
    QD_ASSIGN_OR_RETURN(auto ids, IdArray(v, "dataset " + name));
    d.id_rows.push_back(std::move(ids));
  }
  return OkStatus();
}

Status ParseRawIds(std::string_view content, const std::string& name, Dataset& d) {
  if (content.size() % 4 != 0) {
    return Malformed(name, "raw .ids file is " + std::to_string(content.size()) +
                               " bytes, not a whole number of int32 ids");
  }
  std::vector<int32_t> ids(content.size() / 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto* p = reinterpret_cast<const uint8_t*>(content.data() + 4 * i);
    const uint32_t u = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
    if (u > INT32_MAX) {
      return Malformed(name, "token id at index " + std::to_string(i) + " is negative");
    }
    ids[i] = static_cast<int32_t>(u);
  }
  d.id_rows.push_back(std::move(ids));
  return OkStatus();
}

}  // namespace

DatasetFormat FormatForPath(const std::string& path) {
  if (EndsWith(path, ".jsonl")) return DatasetFormat::kJsonl;
  if (EndsWith(path, ".json")) return DatasetFormat::kJsonIds;
  if (EndsWith(path, ".ids")) return DatasetFormat::kRawIds;
  if (EndsWith(path, ".parquet")) return DatasetFormat::kParquet;
  return DatasetFormat::kText;
}

std::string Dataset::JoinedText() const {
  std::string s;
  for (size_t i = 0; i < text_rows.size(); ++i) {
    if (i > 0) s += separator;
    s += text_rows[i];
  }
  return s;
}

StatusOr<std::vector<int32_t>> Dataset::TextTokens(const Tokenizer& tokenizer) const {
  if (!chat_rows.empty()) {
    return FailedPreconditionError("dataset " + name +
                                   " holds chat messages, which the model's chat template renders "
                                   "first (RenderChatRows)");
  }
  if (rendered_chat) {
    // Each conversation as transformers' apply_chat_template tokenizes it:
    // the template's own BOS text becomes the BOS id.
    std::vector<int32_t> out;
    for (const std::string& row : text_rows) {
      std::string_view text = row;
      if (!chat_bos_text.empty() && tokenizer.bos_id() >= 0 &&
          text.substr(0, chat_bos_text.size()) == chat_bos_text) {
        out.push_back(tokenizer.bos_id());
        text.remove_prefix(chat_bos_text.size());
      }
      std::vector<int32_t> ids = tokenizer.Encode(text);
      if (StopRequested()) return CancelledStatus("tokenizing dataset " + name);
      out.insert(out.end(), ids.begin(), ids.end());
    }
    return out;
  }
  if (!pretokenized()) {
    std::vector<int32_t> ids = tokenizer.Encode(JoinedText());
    // Encode returns part of the ids when the job's scope asked it to stop.
    if (StopRequested()) return CancelledStatus("tokenizing dataset " + name);
    return ids;
  }
  std::vector<int32_t> out;
  for (const auto& row : id_rows) {
    for (int32_t id : row) {
      if (id >= tokenizer.vocab_size()) {
        return InvalidArgumentError("dataset " + name + ": token id " + std::to_string(id) +
                                    " is outside the vocabulary of " +
                                    std::to_string(tokenizer.vocab_size()));
      }
    }
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

StatusOr<std::vector<int32_t>> Dataset::TokenStream(const Tokenizer& tokenizer) const {
  QD_ASSIGN_OR_RETURN(std::vector<int32_t> ids, TextTokens(tokenizer));
  if (!pretokenized() && !rendered_chat && tokenizer.add_bos() && tokenizer.bos_id() >= 0) {
    ids.insert(ids.begin(), tokenizer.bos_id());
  }
  return ids;
}

StatusOr<Dataset> ParseDataset(std::string_view content, DatasetFormat format,
                               const std::string& name, const DatasetOptions& options) {
  Dataset d;
  d.name = name;
  d.separator = options.separator;
  if (format == DatasetFormat::kAuto) format = FormatForPath(name);
  switch (format) {
    case DatasetFormat::kAuto:
    case DatasetFormat::kText:
      d.text_rows.emplace_back(content);
      break;
    case DatasetFormat::kJsonl:
      QD_RETURN_IF_ERROR(ParseJsonl(content, name, options, d));
      break;
    case DatasetFormat::kJsonIds:
      // A .json file of objects is JSON Lines (c4's .json.gz shards are).
      if (const size_t first = content.find_first_not_of(" \t\r\n");
          first != std::string_view::npos && content[first] == '{') {
        QD_RETURN_IF_ERROR(ParseJsonl(content, name, options, d));
      } else {
        QD_RETURN_IF_ERROR(ParseJsonIds(content, name, d));
      }
      break;
    case DatasetFormat::kRawIds:
      QD_RETURN_IF_ERROR(ParseRawIds(content, name, d));
      break;
    case DatasetFormat::kParquet:
      QD_RETURN_IF_ERROR(ParseParquet(content, name, options, d));
      break;
  }
  if (d.text_rows.empty() && d.id_rows.empty() && d.chat_rows.empty())
    return Malformed(name, "has no rows");
  return d;
}

StatusOr<Dataset> LoadDatasetFiles(const std::vector<std::string>& paths, const std::string& name,
                                   const DatasetOptions& options) {
  if (paths.empty()) return InvalidArgumentError("dataset " + name + " has no files");
  Dataset all;
  all.name = name;
  all.separator = options.separator;
  DatasetOptions each = options;
  for (const std::string& path : paths) {
    QD_ASSIGN_OR_RETURN(Dataset d, LoadDataset(path, each));
    if ((!d.text_rows.empty() && (!all.id_rows.empty() || !all.chat_rows.empty())) ||
        (!d.id_rows.empty() && (!all.text_rows.empty() || !all.chat_rows.empty())) ||
        (!d.chat_rows.empty() && (!all.text_rows.empty() || !all.id_rows.empty()))) {
      return InvalidArgumentError("dataset " + name + ": " + d.name +
                                  " holds other rows (text, token ids or chat messages) than the "
                                  "files before it");
    }
    each.max_bytes -= std::min<uint64_t>(each.max_bytes, d.bytes);
    for (auto& row : d.text_rows) all.text_rows.push_back(std::move(row));
    for (auto& row : d.id_rows) all.id_rows.push_back(std::move(row));
    for (auto& row : d.chat_rows) all.chat_rows.push_back(std::move(row));
    all.bytes += d.bytes;
  }
  return all;
}

StatusOr<Dataset> LoadDataset(const std::string& path, const DatasetOptions& options) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return NotFoundError("dataset " + path + " does not exist");
  if (!S_ISREG(st.st_mode)) return InvalidArgumentError("dataset " + path + " is not a file");
  if (static_cast<uint64_t>(st.st_size) > options.max_bytes) {
    return ResourceExhaustedError("dataset " + path + " is " + std::to_string(st.st_size) +
                                  " bytes, above the " + std::to_string(options.max_bytes) +
                                  "-byte limit");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("dataset " + path + " cannot be opened");
  std::string content(static_cast<size_t>(st.st_size), '\0');
  in.read(content.data(), st.st_size);
  if (in.gcount() != st.st_size) return DataLossError("dataset " + path + ": short read");
  // x.jsonl.gz / x.jsonl.zst: decompressed under the same bound, read as x.jsonl.
  const Compression compression = CompressionForPath(path);
  if (compression != Compression::kNone) {
    QD_ASSIGN_OR_RETURN(content,
                        Decompress(content, compression, options.max_bytes, BaseName(path)));
  }
  DatasetFormat format = options.format;
  if (format == DatasetFormat::kAuto) format = FormatForPath(StripCompressionExtension(path));
  QD_ASSIGN_OR_RETURN(Dataset d, ParseDataset(content, format, BaseName(path), options));
  d.bytes = content.size();
  return d;
}

}  // namespace quantd::io
