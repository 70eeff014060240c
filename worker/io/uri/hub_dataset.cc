#include "worker/io/uri/hub_dataset.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace quantd::io {
namespace {

bool IsPlainSegment(const std::string& s) {
  if (s.empty() || s.size() > 255 || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.';
  });
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsDataFile(const std::string& path) {
  for (const char* ext : {".parquet", ".jsonl", ".json", ".txt"}) {
    for (const char* compressed : {"", ".gz", ".zst"})
      if (EndsWith(path, std::string(ext) + compressed)) return true;
  }
  return false;
}

// %XX-decoded `s`; false for a malformed escape or a decoded control byte.
bool PercentDecode(const std::string& s, std::string& out) {
  out.clear();
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '%') {
      if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
          !std::isxdigit(static_cast<unsigned char>(s[i + 2])))
        return false;
      c = static_cast<unsigned char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else if (c == '+') {
      c = ' ';
    }
    if (c < 0x20 || c == 0x7f) return false;
    out += static_cast<char>(c);
  }
  return true;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = s.find(sep, start);
    parts.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

// The Hub's rule for a split named in a path segment: the split as a word
// between non-word characters ('-', '.', ' ', digits) or the segment's ends,
// so "train-00000.parquet" and "c4-train.00000.json.gz" are train's and
// "train_sft-00000.parquet" is not.
bool SegmentNamesSplit(const std::string& segment, const std::string& split) {
  auto separator = [](char c) {
    return c == '-' || c == '.' || c == ' ' || std::isdigit(static_cast<unsigned char>(c));
  };
  for (size_t pos = segment.find(split); pos != std::string::npos;
       pos = segment.find(split, pos + 1)) {
    const size_t after = pos + split.size();
    if ((pos == 0 || separator(segment[pos - 1])) &&
        (after == segment.size() || separator(segment[after])))
      return true;
  }
  return false;
}

}  // namespace

bool IsHubRelativePath(const std::string& path) {
  const std::vector<std::string> parts = Split(path, '/');
  if (parts.size() > 8) return false;
  return std::all_of(parts.begin(), parts.end(), IsPlainSegment);
}

StatusOr<HubDatasetQuery> ParseHubDatasetQuery(const std::string& query) {
  HubDatasetQuery q;
  if (query.empty() || query == "?") return q;
  std::vector<std::string> problems;
  std::set<std::string> seen;
  for (const std::string& pair : Split(query.substr(query[0] == '?' ? 1 : 0), '&')) {
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    const std::string key = pair.substr(0, eq);
    std::string value;
    if (eq == std::string::npos || !PercentDecode(pair.substr(eq + 1), value) || value.empty()) {
      problems.push_back("'" + key.substr(0, 64) + "' needs a value (" + key.substr(0, 64) +
                         "=...)");
      continue;
    }
    if (!seen.insert(key).second) {
      problems.push_back("'" + key + "' is given twice");
      continue;
    }
    if (key == "split" || key == "config") {
      if (!IsPlainSegment(value)) {
        problems.push_back(key + " '" + value.substr(0, 64) +
                           "' is not a plain name (letters, digits, '-', '_', '.')");
      }
      (key == "split" ? q.split : q.config) = value;
    } else if (key == "field") {
      if (!IsPlainSegment(value) || value.size() > 128) {
        problems.push_back("field '" + value.substr(0, 64) +
                           "' is not a plain name (letters, digits, '-', '_', '.')");
      }
      q.field = value;
    } else if (key == "file") {
      if (!IsHubRelativePath(value) || !IsDataFile(value)) {
        problems.push_back("file '" + value.substr(0, 128) +
                           "' is not a relative .parquet, .jsonl, .json or .txt path (.gz or "
                           ".zst for the last three) of plain names");
      }
      q.file = value;
    } else {
      problems.push_back("unknown key '" + key.substr(0, 64) +
                         "' (known: split, config, field, file)");
    }
  }
  if (!q.file.empty() && (seen.count("split") || seen.count("config"))) {
    problems.push_back("file names one data file; it cannot be combined with split or config");
  }
  if (problems.empty()) return q;
  std::string message = "the dataset query: ";
  for (size_t i = 0; i < problems.size(); ++i) message += (i ? "; " : "") + problems[i];
  return InvalidArgumentError(message);
}

StatusOr<std::vector<std::string>> SelectHubDatasetFiles(const std::vector<std::string>& listed,
                                                         const HubDatasetQuery& query,
                                                         const std::string& uri) {
  std::vector<std::string> data_files;
  for (const std::string& path : listed)
    if (IsHubRelativePath(path) && IsDataFile(path)) data_files.push_back(path);
  std::sort(data_files.begin(), data_files.end());
  auto none_found = [&](const std::string& what) {
    std::string known;
    for (size_t i = 0; i < data_files.size() && i < 8; ++i)
      known += (i ? ", " : "") + data_files[i];
    if (data_files.size() > 8) known += ", ...";
    return NotFoundError(
        uri + ": " + what + "; its data files are " +
        (known.empty() ? std::string("none (.parquet, .jsonl, .json, .txt)") : known));
  };
  if (!query.file.empty()) {
    if (!std::binary_search(data_files.begin(), data_files.end(), query.file))
      return none_found("the repository has no file " + query.file);
    return std::vector<std::string>{query.file};
  }
  std::vector<std::string> chosen;
  std::set<std::string> configs;  // the configuration folders of the matches
  for (const std::string& path : data_files) {
    std::vector<std::string> parts = Split(path, '/');
    if (!query.config.empty()) {
      if (parts.size() < 2 || parts[0] != query.config) continue;
      parts.erase(parts.begin());
    }
    if (std::none_of(parts.begin(), parts.end(),
                     [&](const std::string& p) { return SegmentNamesSplit(p, query.split); }))
      continue;
    chosen.push_back(path);
    // "data/" is the Hub's plain layout, not a configuration.
    if (query.config.empty() && parts.size() >= 2 && parts[0] != "data" && parts[0] != query.split)
      configs.insert(parts[0]);
  }
  if (chosen.empty()) {
    return none_found("no data file holds the split '" + query.split + "'" +
                      (query.config.empty() ? "" : " of config '" + query.config + "'"));
  }
  if (configs.size() > 1) {
    std::string names;
    for (const std::string& c : configs) names += (names.empty() ? "" : ", ") + c;
    return FailedPreconditionError(uri + ": the split '" + query.split +
                                   "' is in several configurations (" + names +
                                   "); name one with ?config=");
  }
  if (chosen.size() > kMaxHubDatasetFiles) {
    return ResourceExhaustedError(uri + ": the split '" + query.split + "' has " +
                                  std::to_string(chosen.size()) + " data files; at most " +
                                  std::to_string(kMaxHubDatasetFiles) +
                                  " are read (name one with ?file=)");
  }
  return chosen;
}

}  // namespace quantd::io
