#include "worker/pipeline/freeze.h"

#include <memory>
#include <stdexcept>

namespace quantd::pipeline {
namespace {

int64_t Bytes(const at::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : 0; }

bool IsFourBit(quant::DataType t) {
  return t == quant::DataType::kInt4 || t == quant::DataType::kUInt4 ||
         t == quant::DataType::kMxFp4;
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

FrozenLinearKernel::FrozenLinearKernel(quant::QuantizedTensor weight, quant::QuantSpec spec)
    : weight_(std::move(weight)), spec_(std::move(spec)) {
  if (IsFourBit(spec_.dtype) && weight_.codes.scalar_type() != at::kHalf &&
      weight_.codes.scalar_type() != at::kBFloat16) {
    code_shape_ = weight_.codes.sizes().vec();
    code_dtype_ = weight_.codes.scalar_type();
    weight_.codes = PackNibbles(weight_.codes);
    packed_ = true;
  }
}

quant::QuantizedTensor FrozenLinearKernel::Unpacked() const {
  if (!packed_) return weight_;
  quant::QuantizedTensor q = weight_;
  int64_t numel = 1;
  for (int64_t d : code_shape_) numel *= d;
  q.codes = UnpackNibbles(weight_.codes, numel, code_dtype_ == at::kChar)
                .to(code_dtype_)
                .view(code_shape_);
  return q;
}

at::Tensor FrozenLinearKernel::Forward(const models::Linear& layer, const at::Tensor& x) const {
  auto w = quant::Dequantize(Unpacked(), spec_, at::kFloat);
  if (!w.ok()) throw std::runtime_error("frozen " + layer.name() + ": " + w.status().ToString());
  at::Tensor weight = w->to(x.scalar_type());
  return layer.bias().defined() ? at::linear(x, weight, layer.bias()) : at::linear(x, weight);
}

int64_t FrozenLinearKernel::bytes() const {
  return Bytes(weight_.codes) + Bytes(weight_.qparams.scale) + Bytes(weight_.qparams.zero_point) +
         Bytes(weight_.e8m0);
}

FreezeReport& FreezeReport::operator+=(const FreezeReport& o) {
  layers += o.layers;
  float_bytes += o.float_bytes;
  frozen_bytes += o.frozen_bytes;
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
    auto q = quant::RealQuantize(l->weight(), *plan->second.weight, qp);
    if (!q.ok()) return Status(q.status()).Prepend("freezing " + l->name() + ": ");
    auto back = quant::Dequantize(*q, *plan->second.weight, at::kFloat);
    if (!back.ok()) return Status(back.status()).Prepend("freezing " + l->name() + ": ");
    if (!at::equal(*back, l->weight().to(at::kFloat))) {
      report.kept_float.push_back(l->name());
      continue;
    }
    auto kernel = std::make_shared<FrozenLinearKernel>(std::move(*q), *plan->second.weight);
    report.float_bytes += Bytes(l->weight());
    report.frozen_bytes += kernel->bytes();
    ++report.layers;
    l->SetKernel(std::move(kernel));
    l->weight() = at::Tensor();  // the codes are the weight now
  }
  return report;
}

}  // namespace quantd::pipeline
