#include "worker/io/gguf/gguf_tensor_source.h"

#include <utility>

#include "worker/io/gguf/rope_layout.h"

namespace quantd::gguf {

GgufTensorSource::GgufTensorSource(GgufFile file, std::unique_ptr<ByteSource> source)
    : file_(std::move(file)),
      source_(std::move(source)),
      config_json_(UnimplementedError("config.json not built")) {}

StatusOr<std::unique_ptr<GgufTensorSource>> GgufTensorSource::Open(const std::string& path) {
  QD_ASSIGN_OR_RETURN(auto source, OpenFileByteSource(path));
  QD_ASSIGN_OR_RETURN(GgufFile file, ParseGguf(*source));
  std::unique_ptr<GgufTensorSource> gguf(new GgufTensorSource(std::move(file), std::move(source)));
  QD_RETURN_IF_ERROR(gguf->Index());
  return gguf;
}

Status GgufTensorSource::Index() {
  auto arch = file_.GetString("general.architecture");
  arch_ = arch.ok() ? *arch : "";
  const bool mapped = IsMappedArchitecture(arch_);
  if (mapped) {
    config_json_ = BuildHfConfigJson(file_);
    QD_ASSIGN_OR_RETURN(n_head_, file_.GetIntOr(arch_ + ".attention.head_count", 0));
    QD_ASSIGN_OR_RETURN(n_head_kv_, file_.GetIntOr(arch_ + ".attention.head_count_kv", n_head_));
  } else {
    config_json_ =
        UnimplementedError(file_.where() + ": no config.json mapping for GGUF architecture '" +
                           arch_ + "' (supported: llama, qwen2, qwen3, gpt2)");
  }
  for (size_t k = 0; k < file_.tensors.size(); ++k) {
    const GgufTensorInfo& t = file_.tensors[k];
    Entry e;
    e.gguf_index = k;
    e.info.name = t.name;
    if (mapped) {
      if (auto m = GgufToHfTensorName(arch_, t.name)) {
        e.info.name = m->name;
        e.change = m->change;
      }
    }
    e.info.shape = t.torch_shape();
    if (e.change == LayoutChange::kTranspose && e.info.shape.size() == 2) {
      std::swap(e.info.shape[0], e.info.shape[1]);
    }
    e.info.dtype = GetGgmlTypeTraits(t.type).name;
    e.info.file = file_.path;
    e.info.nbytes = t.nbytes;
    const std::string name = e.info.name;
    if (!entries_.emplace(name, std::move(e)).second) {
      return DataLossError(file_.where() + ": two tensors map to the name " + name);
    }
  }
  return OkStatus();
}

std::vector<std::string> GgufTensorSource::Names() const {
  std::vector<std::string> names;
  names.reserve(entries_.size());
  for (const auto& [name, e] : entries_) names.push_back(name);
  return names;
}

const io::TensorInfo* GgufTensorSource::Find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second.info;
}

const GgufTensorInfo* GgufTensorSource::GgufInfo(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &file_.tensors[it->second.gguf_index];
}

StatusOr<at::Tensor> GgufTensorSource::Load(const std::string& name, at::ScalarType dtype) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return NotFoundError("tensor " + name + " not found in " + file_.where());
  }
  const Entry& e = it->second;
  const GgufTensorInfo& t = file_.tensors[e.gguf_index];
  const std::string context = file_.where() + ": tensor " + name + " (" + t.name + "): ";
  QD_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadGgufTensorBytes(file_, *source_, t));
  try {
    at::Tensor out = at::empty(t.torch_shape(), at::kFloat);
    Status s = DequantizeRow(t.type, bytes.data(), out.data_ptr<float>(), t.n_elements());
    if (!s.ok()) return s.Prepend(context);
    switch (e.change) {
      case LayoutChange::kNone:
        break;
      case LayoutChange::kRopeQuery:
      case LayoutChange::kRopeKey: {
        const int64_t heads = e.change == LayoutChange::kRopeQuery ? n_head_ : n_head_kv_;
        auto permuted = RopeInterleavedToHalf(out, heads);
        if (!permuted.ok()) return DataLossError(context + permuted.status().message());
        out = *permuted;
        break;
      }
      case LayoutChange::kTranspose:
        if (out.dim() != 2) return DataLossError(context + "expected a 2-D Conv1D weight");
        out = out.t().contiguous();
        break;
      case LayoutChange::kPlusOne:
        out = out - 1.0f;
        break;
    }
    return dtype == at::kFloat ? out : out.to(dtype);
  } catch (const c10::Error& err) {
    return InternalError(context + err.what_without_backtrace());
  }
}

std::map<std::string, std::string> GgufTensorSource::Metadata() const {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : file_.metadata) out[key] = value.ToText();
  if (config_json_.ok()) out["config.json"] = *config_json_;
  return out;
}

}  // namespace quantd::gguf
