#include "worker/pipeline/freeze.h"

#include "worker/pipeline/weight_quantizer.h"

#include <memory>
#include <optional>
#include <stdexcept>

namespace quantd::pipeline {
namespace {

int64_t Bytes(const at::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : 0; }

bool IsFourBit(quant::DataType t) {
  return t == quant::DataType::kInt4 || t == quant::DataType::kUInt4 ||
         t == quant::DataType::kMxFp4;
}

// Bytes a frozen weight holds: codes, scales, zero points, E8M0 scales.
int64_t QuantizedBytes(const quant::QuantizedTensor& q) {
  return Bytes(q.codes) + Bytes(q.qparams.scale) + Bytes(q.qparams.zero_point) + Bytes(q.e8m0);
}

// The first `numel` nibbles of `packed` as codes of `dtype` in `shape`.
at::Tensor UnpackCodes(const at::Tensor& packed, int64_t numel, at::ScalarType dtype,
                       at::IntArrayRef shape) {
  return UnpackNibbles(packed.reshape({-1}), numel, dtype == at::kChar).to(dtype).view(shape);
}

// The real-quantized form of `weight` when its codes dequantize to it bit
// for bit; nullopt when they do not (the weight then stays float).
StatusOr<std::optional<quant::QuantizedTensor>> ExactCodes(const at::Tensor& weight,
                                                           const quant::QuantSpec& spec,
                                                           const quant::QParams& qp,
                                                           const std::string& name) {
  auto q = quant::RealQuantize(weight, spec, qp);
  if (!q.ok()) return Status(q.status()).Prepend("freezing " + name + ": ");
  auto back = quant::Dequantize(*q, spec, at::kFloat);
  if (!back.ok()) return Status(back.status()).Prepend("freezing " + name + ": ");
  if (!at::equal(*back, weight.to(at::kFloat))) return std::optional<quant::QuantizedTensor>();
  return std::optional<quant::QuantizedTensor>(std::move(*q));
}

}  // namespace

at::Tensor PackNibbles(const at::Tensor& codes) {
  at::Tensor flat = codes.reshape({-1}).to(at::kByte).bitwise_and(0xF);
  if (flat.numel() % 2) flat = at::cat({flat, at::zeros({1}, flat.options())});
  at::Tensor pairs = flat.view({-1, 2});
  return pairs.select(1, 0).bitwise_or(pairs.select(1, 1).__lshift__(4)).contiguous();
}

at::Tensor UnpackNibbles(const at::Tensor& packed, int64_t numel, bool is_signed) {
  at::Tensor lo = packed.bitwise_and(0xF), hi = packed.__rshift__(4);
  at::Tensor flat = at::stack({lo, hi}, 1).reshape({-1}).narrow(0, 0, numel);
  if (!is_signed) return flat;
  at::Tensor v = flat.to(at::kChar);
  return at::where(v.ge(8), v - 16, v);
}

FrozenWeight::FrozenWeight(quant::QuantizedTensor weight, quant::QuantSpec spec,
                           std::vector<int64_t> shape)
    : weight_(std::move(weight)), spec_(std::move(spec)), shape_(std::move(shape)) {
  if (shape_.empty()) shape_ = weight_.codes.sizes().vec();
  if (IsFourBit(spec_.dtype) && weight_.codes.scalar_type() != at::kHalf &&
      weight_.codes.scalar_type() != at::kBFloat16) {
    code_shape_ = weight_.codes.sizes().vec();
    code_dtype_ = weight_.codes.scalar_type();
    weight_.codes = PackNibbles(weight_.codes);
    packed_ = true;
  }
}

quant::QuantizedTensor FrozenWeight::Unpacked() const {
  if (!packed_) return weight_;
  quant::QuantizedTensor q = weight_;
  int64_t numel = 1;
  for (int64_t d : code_shape_) numel *= d;
  q.codes = UnpackCodes(weight_.codes, numel, code_dtype_, code_shape_);
  return q;
}

StatusOr<at::Tensor> FrozenWeight::Dequantize(at::ScalarType dtype) const {
  return quant::Dequantize(Unpacked(), spec_, dtype);
}

int64_t FrozenWeight::bytes() const { return QuantizedBytes(weight_); }

int64_t FrozenWeight::packed_bytes() const {
  return QuantizedStorageBytes(shape_, spec_);
}

StatusOr<std::optional<FrozenWeight>> FreezeWeight(const at::Tensor& weight,
                                                   const quant::QuantSpec& spec,
                                                   const quant::QParams& qp,
                                                   const std::string& name) {
  QD_ASSIGN_OR_RETURN(auto q, ExactCodes(weight, spec, qp, name));
  if (!q) return std::optional<FrozenWeight>();
  return std::optional<FrozenWeight>(FrozenWeight(std::move(*q), spec, weight.sizes().vec()));
}

at::Tensor FrozenLinearKernel::Forward(const models::Linear& layer, const at::Tensor& x) const {
  auto w = weight_.Dequantize(at::kFloat);
  if (!w.ok()) throw std::runtime_error("frozen " + layer.name() + ": " + w.status().ToString());
  at::Tensor weight = w->to(x.scalar_type());
  return layer.bias().defined() ? at::linear(x, weight, layer.bias()) : at::linear(x, weight);
}

FreezeReport& FreezeReport::operator+=(const FreezeReport& o) {
  layers += o.layers;
  float_bytes += o.float_bytes;
  frozen_bytes += o.frozen_bytes;
  packed_bytes += o.packed_bytes;
  kept_float.insert(kept_float.end(), o.kept_float.begin(), o.kept_float.end());
  return *this;
}

StatusOr<FreezeReport> FreezeBlock(models::DecoderBlock& block,
                                   const std::map<std::string, LayerPlan>& plans,
                                   const std::map<std::string, quant::QParams>& weight_qparams) {
  FreezeReport report;
  for (models::Linear* l : block.linears()) {
    auto plan = plans.find(l->name());
    if (plan == plans.end() || !plan->second.weight) continue;
    if (!l->weight().defined()) return FailedPreconditionError(l->name() + " is already frozen");
    quant::QParams qp;
    if (auto it = weight_qparams.find(l->name()); it != weight_qparams.end()) qp = it->second;
    QD_ASSIGN_OR_RETURN(auto frozen,
                        FreezeWeight(l->weight(), *plan->second.weight, qp, l->name()));
    if (!frozen) {
      report.kept_float.push_back(l->name());
      continue;
    }
    auto kernel = std::make_shared<FrozenLinearKernel>(std::move(*frozen));
    report.float_bytes += Bytes(l->weight());
    report.frozen_bytes += kernel->bytes();
    report.packed_bytes += kernel->packed_bytes();
    ++report.layers;
    l->SetKernel(std::move(kernel));
    l->weight() = at::Tensor();  // the codes are the weight now
  }
  return report;
}

FrozenEmbeddingLookup::FrozenEmbeddingLookup(quant::QuantizedTensor table, quant::QuantSpec spec,
                                             at::ScalarType dtype)
    : table_(std::move(table)), spec_(std::move(spec)), dtype_(dtype) {
  num_ = table_.codes.size(0);
  dim_ = table_.codes.size(1);
  code_dtype_ = table_.codes.scalar_type();
  const int axis = quant::EffectiveChAxis(spec_);
  const bool rows_axis = axis == 0 || axis == -2;
  if (spec_.qscheme == quant::QScheme::kPerTensor || quant::IsCastType(spec_.dtype)) {
    params_ = Params::kShared;
  } else if (spec_.qscheme == quant::QScheme::kPerChannel) {
    params_ = rows_axis ? Params::kPerRow : Params::kShared;
  } else {
    params_ = rows_axis ? Params::kAcrossRows : Params::kPerRow;
  }
  if (IsFourBit(spec_.dtype) && dim_ % 2 == 0 && code_dtype_ != at::kHalf &&
      code_dtype_ != at::kBFloat16) {
    table_.codes = PackNibbles(table_.codes).view({num_, dim_ / 2});
    packed_ = true;
  }
}

at::Tensor FrozenEmbeddingLookup::Forward(const models::Embedding& embedding,
                                          const at::Tensor& ids) const {
  const at::Tensor flat = ids.reshape({-1}).to(table_.codes.device());
  std::vector<int64_t> shape = ids.sizes().vec();
  shape.push_back(dim_);
  if (params_ == Params::kAcrossRows) {  // groups along the rows: the whole table
    quant::QuantizedTensor all = table_;
    if (packed_) {
      all.codes = UnpackCodes(table_.codes, num_ * dim_, code_dtype_, {num_, dim_});
    }
    auto values = quant::Dequantize(all, spec_, dtype_);
    if (!values.ok()) {
      throw std::runtime_error("frozen " + embedding.name() + ": " + values.status().ToString());
    }
    return values->index_select(0, flat).view(shape);
  }
  // Per-row parameters are gathered with the rows; shared ones (per tensor,
  // per column) are used as they are.
  auto rows = [&](const at::Tensor& t) {
    return t.defined() && params_ == Params::kPerRow ? t.index_select(0, flat) : t;
  };
  quant::QuantizedTensor q;
  q.codes = table_.codes.index_select(0, flat);
  if (packed_) {
    q.codes = UnpackCodes(q.codes, flat.numel() * dim_, code_dtype_, {flat.numel(), dim_});
  }
  q.qparams.scale = rows(table_.qparams.scale);
  q.qparams.zero_point = rows(table_.qparams.zero_point);
  q.e8m0 = rows(table_.e8m0);
  auto values = quant::Dequantize(q, spec_, dtype_);
  if (!values.ok()) {
    throw std::runtime_error("frozen " + embedding.name() + ": " + values.status().ToString());
  }
  return values->view(shape);
}

int64_t FrozenEmbeddingLookup::bytes() const { return QuantizedBytes(table_); }

StatusOr<FreezeReport> FreezeEmbedding(models::Embedding& embedding, const quant::QuantSpec& spec,
                                       const quant::QParams& qparams) {
  FreezeReport report;
  const at::Tensor w = embedding.weight();
  if (!w.defined()) return FailedPreconditionError(embedding.name() + " is already frozen");
  QD_ASSIGN_OR_RETURN(auto q, ExactCodes(w, spec, qparams, embedding.name()));
  if (!q) {
    report.kept_float.push_back(embedding.name());
    return report;
  }
  auto lookup = std::make_shared<FrozenEmbeddingLookup>(std::move(*q), spec, w.scalar_type());
  report.float_bytes = Bytes(w);
  report.frozen_bytes = lookup->bytes();
  report.packed_bytes = QuantizedStorageBytes(w.sizes().vec(), spec);
  report.layers = 1;
  embedding.SetLookup(std::move(lookup));
  embedding.weight() = at::Tensor();  // the codes are the table now
  return report;
}

}  // namespace quantd::pipeline
