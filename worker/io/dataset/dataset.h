// Datasets for calibration and evaluation: plain text, JSONL with a named
// text field, and pre-tokenized ids.
//
// Formats (DatasetFormat::kAuto picks by extension):
//   .txt (anything else): the whole file is one text row.
//   .jsonl: one JSON value per line; an object's `text_field` holds either a
//     string (a text row) or an array of token ids, and a bare array is a
//     row of ids. Blank lines are skipped; empty strings are kept (wikitext
//     has them, and they matter when rows are joined).
//   .json: an array of token ids, or an array of such arrays.
//   .ids: raw little-endian int32 token ids, one sequence.
// Text rows are joined with "\n\n" before tokenizing (the usual wikitext
// protocol); id rows are concatenated. Torch-free.
#ifndef QUANTD_WORKER_IO_DATASET_DATASET_H_
#define QUANTD_WORKER_IO_DATASET_DATASET_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/tokenizer/tokenizer.h"

namespace quantd::io {

enum class DatasetFormat { kAuto, kText, kJsonl, kJsonIds, kRawIds };

struct DatasetOptions {
  DatasetFormat format = DatasetFormat::kAuto;
  std::string text_field = "text";
  std::string separator = "\n\n";
  // Files larger than this are refused (RESOURCE_EXHAUSTED).
  uint64_t max_bytes = uint64_t{2} << 30;
};

struct Dataset {
  // The file's base name, recorded with every metric computed on it.
  std::string name;
  std::string separator = "\n\n";
  // Exactly one of the two is non-empty.
  std::vector<std::string> text_rows;
  std::vector<std::vector<int32_t>> id_rows;
  uint64_t bytes = 0;  // of the files read

  bool pretokenized() const { return !id_rows.empty(); }
  // Text rows joined with the separator.
  std::string JoinedText() const;
  // The dataset as one token stream: the joined text encoded once (with
  // BOS first when `tokenizer` adds one), or the id rows concatenated.
  // INVALID_ARGUMENT when a pre-tokenized id is outside the vocabulary.
  StatusOr<std::vector<int32_t>> TokenStream(const Tokenizer& tokenizer) const;
  // Same, without BOS (perplexity windows add their own).
  StatusOr<std::vector<int32_t>> TextTokens(const Tokenizer& tokenizer) const;
};

// NOT_FOUND for a missing file; INVALID_ARGUMENT naming the file and line
// for malformed content or a missing field; RESOURCE_EXHAUSTED past
// max_bytes; CANCELLED when the thread's CancellationScope asks to stop
// (worker/common/cancellation.h; TextTokens and TokenStream likewise).
StatusOr<Dataset> LoadDataset(const std::string& path, const DatasetOptions& options = {});
// Several files read as one dataset (a split's shards, in order): their rows
// concatenated, max_bytes bounding their sum; `name` names the whole. The
// files must hold the same kind of rows.
StatusOr<Dataset> LoadDatasetFiles(const std::vector<std::string>& paths, const std::string& name,
                                   const DatasetOptions& options = {});
// Parses content already in memory; `name` names it in errors and results.
StatusOr<Dataset> ParseDataset(std::string_view content, DatasetFormat format,
                               const std::string& name, const DatasetOptions& options = {});

// kAuto resolved from a file name.
DatasetFormat FormatForPath(const std::string& path);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_DATASET_DATASET_H_
