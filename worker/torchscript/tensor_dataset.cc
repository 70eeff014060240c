#include "worker/torchscript/tensor_dataset.h"

#include <set>

#include "worker/io/safetensors/safetensors_source.h"

namespace quantd::torchscript {
namespace {

bool IsIntegerDtype(const std::string& d) {
  return d == "I64" || d == "I32" || d == "I16" || d == "I8" || d == "U8" || d == "BOOL";
}

}  // namespace

std::vector<at::Tensor> TensorDataset::Batch(int64_t begin, int64_t end) const {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : inputs) out.push_back(t.slice(0, begin, end));
  return out;
}

StatusOr<TensorDataset> LoadTensorDataset(const std::string& path, int num_inputs,
                                          const TensorDatasetLimits& limits) {
  auto source = io::SafetensorsSource::Open(path);
  if (!source.ok()) return source.status();
  std::vector<std::string> input_names;
  if (num_inputs == 1) {
    input_names.push_back((*source)->Find("input") != nullptr ? "input" : "input.0");
  } else {
    for (int i = 0; i < num_inputs; ++i) input_names.push_back("input." + std::to_string(i));
  }
  std::set<std::string> known(input_names.begin(), input_names.end());
  known.insert({"label", "target", "bucket"});
  std::vector<std::string> unknown;
  int64_t bytes = 0;
  for (const std::string& name : (*source)->Names()) {
    if (!known.count(name)) unknown.push_back("'" + name + "'");
    const io::TensorInfo* info = (*source)->Find(name);
    int64_t n = 1;
    for (int64_t d : info->shape) n *= d;
    bytes += n * (IsIntegerDtype(info->dtype) ? 8 : 4);
  }
  if (!unknown.empty()) {
    std::string list;
    for (const auto& u : unknown) list += (list.empty() ? "" : ", ") + u;
    return InvalidArgumentError(path + ": unknown tensor(s) " + list + "; a tensor dataset holds " +
                                (num_inputs == 1
                                     ? std::string("input")
                                     : "input.0 .. input." + std::to_string(num_inputs - 1)) +
                                ", and optionally label, target and bucket");
  }
  if (bytes > limits.max_bytes) {
    return InvalidArgumentError(path + " holds " + std::to_string(bytes) +
                                " bytes of tensors as loaded, over the limit of " +
                                std::to_string(limits.max_bytes));
  }
  TensorDataset data;
  auto load = [&](const std::string& name, at::Tensor& out) -> Status {
    const io::TensorInfo* info = (*source)->Find(name);
    if (info == nullptr) return OkStatus();
    if (info->shape.empty() || info->shape[0] == 0) {
      return InvalidArgumentError(path + ": '" + name +
                                  "' has no sample axis (its first axis counts samples)");
    }
    auto t = (*source)->Load(name, IsIntegerDtype(info->dtype) ? at::kLong : at::kFloat);
    if (!t.ok()) return t.status();
    out = *std::move(t);
    return OkStatus();
  };
  for (const std::string& name : input_names) {
    at::Tensor t;
    QD_RETURN_IF_ERROR(load(name, t));
    if (!t.defined()) {
      return InvalidArgumentError(path + ": no tensor '" + name + "' (forward takes " +
                                  std::to_string(num_inputs) + " tensor argument" +
                                  (num_inputs == 1 ? "" : "s") + ")");
    }
    data.inputs.push_back(t);
  }
  QD_RETURN_IF_ERROR(load("label", data.label));
  QD_RETURN_IF_ERROR(load("target", data.target));
  QD_RETURN_IF_ERROR(load("bucket", data.bucket));
  const int64_t n = data.size();
  auto check_samples = [&](const std::string& name, const at::Tensor& t) -> Status {
    if (t.defined() && t.size(0) != n) {
      return InvalidArgumentError(path + ": '" + name + "' has " + std::to_string(t.size(0)) +
                                  " samples, '" + input_names[0] + "' " + std::to_string(n));
    }
    return OkStatus();
  };
  for (size_t i = 0; i < input_names.size(); ++i) {
    QD_RETURN_IF_ERROR(check_samples(input_names[i], data.inputs[i]));
  }
  QD_RETURN_IF_ERROR(check_samples("label", data.label));
  QD_RETURN_IF_ERROR(check_samples("target", data.target));
  QD_RETURN_IF_ERROR(check_samples("bucket", data.bucket));
  for (const char* name : {"label", "bucket"}) {
    const at::Tensor& t = std::string(name) == "label" ? data.label : data.bucket;
    if (!t.defined()) continue;
    if (t.dim() != 1 || t.scalar_type() != at::kLong) {
      return InvalidArgumentError(path + ": '" + name + "' must be an integer tensor [N]");
    }
    const int64_t lo = t.min().item<int64_t>(), hi = t.max().item<int64_t>();
    const int64_t cap = std::string(name) == "bucket" ? limits.max_buckets : (int64_t{1} << 31);
    if (lo < 0 || hi >= cap) {
      return InvalidArgumentError(path + ": '" + name + "' values must be in [0, " +
                                  std::to_string(cap) + "), found " + std::to_string(lo) + " .. " +
                                  std::to_string(hi));
    }
  }
  return data;
}

}  // namespace quantd::torchscript
