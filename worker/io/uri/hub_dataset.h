// hf://datasets/ORG/NAME[@REV][?split=S&config=C&field=F&file=PATH]: which
// files of a Hugging Face dataset repository a job reads.
//
// A dataset repository holds its splits as data files (.parquet, .jsonl,
// .json, .txt, the last three also .gz or .zst) named after the split, the layouts the Hub's
// dataset viewer recognises: `train.jsonl`, `data/train-00000-of-00002.parquet`,
// `test/part0.jsonl`, and, for a repository with several configurations
// (subsets), the same under a folder per configuration
// (`wikitext-2-raw-v1/test-00000-of-00001.parquet`). The query says:
//   split   the split (default "train"): files with the split as a word of
//           their name or of a folder's, between '-', '.', ' ' or digits
//           (the Hub's rule: "train-00000.parquet", "c4-train.00001.json.gz",
//           "train/part0.jsonl"; "train_sft.parquet" is another split);
//   config  the configuration's folder; required when the split's files lie
//           in several configuration folders;
//   field   the column or JSON field holding the text, the token ids or the
//           chat messages (overrides spec.*.text_field; default "text");
//   file    one data file by its path in the repository, instead of a split.
// Files are read in path order (shard 00000 first).
#ifndef QUANTD_WORKER_IO_URI_HUB_DATASET_H_
#define QUANTD_WORKER_IO_URI_HUB_DATASET_H_

#include <string>
#include <vector>

#include "worker/common/status.h"

namespace quantd::io {

struct HubDatasetQuery {
  std::string split = "train";
  std::string config;
  std::string field;  // empty: the spec's text_field
  std::string file;
};

// At most this many data files are read for one split.
inline constexpr size_t kMaxHubDatasetFiles = 64;
// A dataset revision may list this many files (a model's: 4096).
inline constexpr size_t kMaxHubDatasetListing = size_t{1} << 17;

// Parses a ParsedUri's query ("" or "?k=v&..."). INVALID_ARGUMENT naming
// every unknown, repeated, empty or malformed key at once.
StatusOr<HubDatasetQuery> ParseHubDatasetQuery(const std::string& query);

// True for a repository path that is a relative path of plain segments
// (letters, digits, '-', '_', '.'; no "." or ".."), at most 8 deep.
bool IsHubRelativePath(const std::string& path);

// The data files of `listed` (repository paths) that `query` names, sorted.
// NOT_FOUND naming the data files there are when none matches;
// FAILED_PRECONDITION when the split lies in several configuration folders
// and no config was given; RESOURCE_EXHAUSTED past kMaxHubDatasetFiles.
StatusOr<std::vector<std::string>> SelectHubDatasetFiles(const std::vector<std::string>& listed,
                                                         const HubDatasetQuery& query,
                                                         const std::string& uri);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_URI_HUB_DATASET_H_
