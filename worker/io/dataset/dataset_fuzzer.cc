// Fuzzes the dataset parsers (JSONL text/ids, JSON ids, raw ids) and
// calibration sampling: bad input is an INVALID_ARGUMENT Status, never a
// crash, and accepted id rows sample into windows inside the stream.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "worker/io/dataset/calibration.h"
#include "worker/io/dataset/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  using quantd::io::DatasetFormat;
  const DatasetFormat formats[] = {DatasetFormat::kJsonl, DatasetFormat::kJsonIds,
                                   DatasetFormat::kRawIds, DatasetFormat::kText};
  const DatasetFormat format = formats[data[0] % 4];
  const std::string_view content(reinterpret_cast<const char*>(data + 1), size - 1);
  auto d = quantd::io::ParseDataset(content, format, "fuzz");
  if (!d.ok()) {
    if (d.status().code() != quantd::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  if (!d->pretokenized()) return 0;
  std::vector<int32_t> stream;
  for (const auto& row : d->id_rows) stream.insert(stream.end(), row.begin(), row.end());
  if (stream.empty()) return 0;
  quantd::io::CalibrationOptions o;
  o.method = data[0] & 4 ? quantd::io::SamplingMethod::kRandomWindows
                         : quantd::io::SamplingMethod::kConcat;
  o.num_samples = 1 + data[0] % 7;
  o.seq_len = 1 + static_cast<int64_t>(size % 13);
  auto set = quantd::io::SampleCalibration(stream, o);
  if (!set.ok()) __builtin_trap();
  for (const auto& s : set->samples) {
    if (static_cast<int64_t>(s.size()) != set->seq_len) __builtin_trap();
  }
  return 0;
}
