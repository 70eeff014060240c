// Datasets for calibration and evaluation: plain text, JSONL or Parquet with
// a named field, pre-tokenized ids, and chat conversations.
//
// Formats (DatasetFormat::kAuto picks by extension):
//   .txt (anything else): the whole file is one text row.
//   .jsonl: one JSON value per line; an object's `text_field` holds a string
//     (a text row), an array of token ids, or an array of chat messages
//     ({"role", "content"} objects, as ultrachat-style data holds them);
//     a bare array is a row of ids. Blank lines, null values and empty
//     arrays are skipped; empty strings are kept (wikitext has them, and
//     they matter when rows are joined).
//   .parquet: the column `text_field` of every row, read as JSONL's field
//     (parquet_reader.h: strings, lists of ids, lists of message structs).
//   .json: an array of token ids, or an array of such arrays; a file whose
//     first value is an object is JSON Lines.
//   .ids: raw little-endian int32 token ids, one sequence.
//   x.gz, x.zst: decompressed (decompress.h) and read as x.
// Text rows are joined with "\n\n" before tokenizing (the usual wikitext
// protocol); id rows are concatenated. Chat rows are rendered to text by the
// model's chat template first (chat_rows.h), then each conversation is
// tokenized on its own. Torch-free.
#ifndef QUANTD_WORKER_IO_DATASET_DATASET_H_
#define QUANTD_WORKER_IO_DATASET_DATASET_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/tokenizer/tokenizer.h"

namespace quantd::io {

enum class DatasetFormat { kAuto, kText, kJsonl, kJsonIds, kRawIds, kParquet };

struct DatasetOptions {
  DatasetFormat format = DatasetFormat::kAuto;
  std::string text_field = "text";
  std::string separator = "\n\n";
  // Files larger than this, or decompressing to more, are refused
  // (RESOURCE_EXHAUSTED).
  uint64_t max_bytes = uint64_t{2} << 30;
};

struct Dataset {
  // The file's base name, recorded with every metric computed on it.
  std::string name;
  std::string separator = "\n\n";
  // Exactly one of the three is non-empty.
  std::vector<std::string> text_rows;
  std::vector<std::vector<int32_t>> id_rows;
  std::vector<nlohmann::json> chat_rows;  // each an array of messages
  uint64_t bytes = 0;                     // of the files read
  // Set when text_rows are rendered conversations (chat_rows.h): each is
  // tokenized alone, a leading chat_bos_text as the BOS id, and no BOS is
  // added (the template writes its own).
  bool rendered_chat = false;
  std::string chat_bos_text;

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
