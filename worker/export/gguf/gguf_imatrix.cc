#include "worker/export/gguf/gguf_imatrix.h"

#include "worker/export/gguf/gguf_writer.h"

namespace quantd::gguf {

Status WriteImatrixGguf(const std::vector<ImatrixEntry>& entries, const ImatrixInfo& info,
                        const std::string& path) {
  GgufWriter w;
  w.Set("general.type", GgufValue::String("imatrix"));
  w.Set("imatrix.datasets", GgufValue::StringArray(info.datasets));
  w.Set("imatrix.chunk_count", GgufValue::Uint32(info.chunk_count));
  w.Set("imatrix.chunk_size", GgufValue::Uint32(info.chunk_size));
  for (const ImatrixEntry& e : entries) {
    const int64_t n = static_cast<int64_t>(e.in_sum2.size());
    QD_RETURN_IF_ERROR(w.AddFloatTensor(e.tensor + ".in_sum2", {n, 1}, GgmlType::kF32, e.in_sum2));
    QD_RETURN_IF_ERROR(w.AddFloatTensor(e.tensor + ".counts", {1, 1}, GgmlType::kF32,
                                        std::vector<float>{e.count}));
  }
  return w.Write(path);
}

}  // namespace quantd::gguf
