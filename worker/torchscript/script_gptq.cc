#include "worker/torchscript/script_gptq.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <utility>

#include "worker/algo/gptq.h"
#include "worker/common/cancellation.h"

namespace quantd::torchscript {
namespace {

struct ConvGeometry {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
};

std::optional<std::vector<int64_t>> IntList(const c10::IValue& v) {
  if (v.isIntList()) return v.toIntVector();
  if (v.isTuple()) {
    std::vector<int64_t> out;
    for (const auto& e : v.toTupleRef().elements()) {
      if (!e.isInt()) return std::nullopt;
      out.push_back(e.toInt());
    }
    return out;
  }
  return std::nullopt;
}

std::optional<std::vector<int64_t>> IntList(torch::jit::Value* v) {
  if (auto c = torch::jit::toIValue(v)) return IntList(*c);
  if (v->node()->kind() != torch::jit::prim::ListConstruct) return std::nullopt;
  std::vector<int64_t> out;
  for (torch::jit::Value* e : v->node()->inputs()) {
    auto i = torch::jit::constant_as<int64_t>(e);
    if (!i) return std::nullopt;
    out.push_back(*i);
  }
  return out;
}

// The convolution's geometry, when GPTQ's unfolding can reproduce it:
// from the class constants of a scripted Conv2d (zero padding given as
// numbers), or from the one aten::_convolution of a traced one that reads
// its input directly.
StatusOr<ConvGeometry> Geometry(const torch::jit::Module& conv) {
  const auto type = conv.type();
  ConvGeometry g;
  if (type->hasConstant("stride")) {
    if (type->hasConstant("padding_mode") &&
        type->getConstant("padding_mode").toStringRef() != "zeros") {
      return FailedPreconditionError("padding_mode is not zeros");
    }
    auto stride = IntList(type->getConstant("stride"));
    auto padding = IntList(type->getConstant("padding"));
    auto dilation = IntList(type->getConstant("dilation"));
    if (!stride || !padding || !dilation) {
      return FailedPreconditionError("its padding is not given as numbers");
    }
    g = {*stride, *padding, *dilation, type->getConstant("groups").toInt()};
    return g;
  }
  auto& graph = *torch::jit::toGraphFunction(conv.get_method("forward").function()).graph();
  for (torch::jit::Node* n : graph.nodes()) {
    if (n->kind() != torch::jit::aten::_convolution) continue;
    auto stride = IntList(n->input(3));
    auto padding = IntList(n->input(4));
    auto dilation = IntList(n->input(5));
    auto groups = torch::jit::constant_as<int64_t>(n->input(8));
    // Its input, through the activation hook quantd put in front of it.
    torch::jit::Value* x = n->input(0);
    if (x->node()->kind() == c10::Symbol::fromQualString("quantd::activation")) {
      x = x->node()->input(0);
    }
    if (x != graph.inputs()[1] || !stride || !padding || !dilation || !groups) {
      return FailedPreconditionError("its traced convolution is not one plain call");
    }
    g = {*stride, *padding, *dilation, *groups};
    return g;
  }
  return FailedPreconditionError("no convolution found in its forward");
}

// Why GPTQ does not fit this layer ("" when it does).
std::string Unsupported(const QuantizedLayer& l, std::optional<ConvGeometry>& geometry) {
  if (!l.plan.weight) return "";
  const quant::QuantSpec spec = *WithLayerAxes(l.plan.weight, l.layer.type);
  if (l.layer.type != "Linear" && l.layer.type != "Conv2d") {
    return "GPTQ fits Linear and Conv2d weights";
  }
  const at::Tensor& w = l.float_weight;
  const int64_t rows = w.size(0), cols = w.numel() / w.size(0);
  if (l.layer.type == "Conv2d") {
    if (spec.qscheme == quant::QScheme::kPerGroup || quant::IsMxType(spec.dtype)) {
      return "GPTQ fits a convolution's weight per tensor or per channel";
    }
    auto g = Geometry(l.layer.module);
    if (!g.ok()) return g.status().message();
    if (g->groups != 1) return "GPTQ fits convolutions with groups 1";
    geometry = *g;
  }
  Status s = algo::CheckGptqWeightSpec(spec, rows, cols);
  return s.ok() ? "" : s.message();
}

}  // namespace

StatusOr<ScriptGptqReport> RunScriptGptq(ScriptQuantizer& quantizer, const TensorDataset& data,
                                         const ScriptGptqOptions& options) {
  ScriptGptqReport report;
  const auto& layers = quantizer.layers();
  const int64_t n =
      std::min<int64_t>(options.samples > 0 ? options.samples : data.size(), data.size());
  const int64_t batch = std::max(1, options.batch_size);
  std::vector<size_t> to_fit;
  std::vector<std::optional<ConvGeometry>> geometry(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    if (!layers[i].plan.weight) continue;
    const std::string why = Unsupported(layers[i], geometry[i]);
    if (why.empty()) {
      to_fit.push_back(i);
    } else {
      report.rounded.push_back(layers[i].layer.name + ": " + why);
    }
  }
  for (size_t k = 0; k < to_fit.size(); ++k) {
    const size_t slot = to_fit[k];
    const QuantizedLayer& l = layers[slot];
    const at::Tensor w2d = l.float_weight.reshape({l.float_weight.size(0), -1});
    algo::HessianAccumulator hessian(w2d.size(1));
    const std::optional<ConvGeometry>& g = geometry[slot];
    const ScriptQuantizer::InputSink sink = [&](const at::Tensor& x) -> Status {
      if (!g) return hessian.Add(x);
      if (x.dim() != 4 || x.size(1) != l.float_weight.size(1)) {
        return InvalidArgumentError(l.layer.name + ": its input is not [N, " +
                                    std::to_string(l.float_weight.size(1)) + ", H, W]");
      }
      // [N, C * kh * kw, L] -> [N, L, C * kh * kw]: N samples, as the reference counts.
      const at::Tensor cols =
          at::im2col(x.to(at::kFloat), {l.float_weight.size(2), l.float_weight.size(3)},
                     g->dilation, g->padding, g->stride);
      return hessian.Add(cols.transpose(1, 2));
    };
    for (int64_t b = 0; b < n; b += batch) {
      if (StopRequested()) return CancelledStatus("collecting GPTQ inputs of " + l.layer.name);
      // Layers before this one in the list hold their GPTQ (or rounded) weights.
      QD_RETURN_IF_ERROR(
          quantizer.ForwardCollecting(slot, slot, sink, data.Batch(b, std::min(n, b + batch)))
              .status());
    }
    const quant::QuantSpec spec = *WithLayerAxes(l.plan.weight, l.layer.type);
    QD_ASSIGN_OR_RETURN(algo::GptqResult r,
                        algo::GptqQuantizeWeight(w2d, hessian.hessian(), spec, options.gptq));
    if (r.rtn_fallback) {
      report.rounded.push_back(l.layer.name + ": " + r.fallback_reason);
    } else {
      char loss[64];
      std::snprintf(loss, sizeof(loss), ": loss %.6g", r.loss);
      report.fitted.push_back(l.layer.name + loss);
    }
    QD_RETURN_IF_ERROR(quantizer.SetFittedWeight(slot, r.weight.reshape(l.float_weight.sizes()),
                                                 std::move(r.qparams)));
    if (options.progress) options.progress(k + 1, static_cast<int>(to_fit.size()), l.layer.name);
  }
  return report;
}

}  // namespace quantd::torchscript
