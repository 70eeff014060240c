#include "worker/io/dataset/dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "worker/common/bounded_json.h"
#include "worker/common/cancellation.h"

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
    if (field->is_string()) {
      if (!d.id_rows.empty()) {
        return InvalidArgumentError(where + ": mixes text rows and token-id rows");
      }
      d.text_rows.push_back(field->get<std::string>());
    } else if (field->is_array()) {
      if (!d.text_rows.empty()) {
        return InvalidArgumentError(where + ": mixes text rows and token-id rows");
      }
      QD_ASSIGN_OR_RETURN(auto ids, IdArray(*field, where));
      d.id_rows.push_back(std::move(ids));
    } else {
      return InvalidArgumentError(where + ": \"" + o.text_field +
                                  "\" must be a string or an array of token ids");
    }
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
  if (!pretokenized() && tokenizer.add_bos() && tokenizer.bos_id() >= 0) {
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
      QD_RETURN_IF_ERROR(ParseJsonIds(content, name, d));
      break;
    case DatasetFormat::kRawIds:
      QD_RETURN_IF_ERROR(ParseRawIds(content, name, d));
      break;
  }
  if (d.text_rows.empty() && d.id_rows.empty()) return Malformed(name, "has no rows");
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
    if ((d.pretokenized() && !all.text_rows.empty()) ||
        (!d.pretokenized() && !all.id_rows.empty())) {
      return InvalidArgumentError("dataset " + name + ": " + d.name +
                                  " holds other rows (text or token ids) than the files before it");
    }
    each.max_bytes -= std::min<uint64_t>(each.max_bytes, d.bytes);
    for (auto& row : d.text_rows) all.text_rows.push_back(std::move(row));
    for (auto& row : d.id_rows) all.id_rows.push_back(std::move(row));
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
  DatasetFormat format = options.format;
  if (format == DatasetFormat::kAuto) format = FormatForPath(path);
  QD_ASSIGN_OR_RETURN(Dataset d, ParseDataset(content, format, BaseName(path), options));
  d.bytes = content.size();
  return d;
}

}  // namespace quantd::io
