#include "worker/quant_modules/quant_conv.h"

#include <c10/util/Exception.h>

#include <utility>

namespace quantd::quant_modules {

const char* QuantConv::TypeName(ConvKind kind) {
  return kind == ConvKind::kConv2d ? "Conv2d" : "ConvTranspose2d";
}

StatusOr<std::unique_ptr<QuantConv>> QuantConv::Create(ConvKind kind, std::string name,
                                                       at::Tensor weight, at::Tensor bias,
                                                       const ConvOptions& options,
                                                       const pipeline::LayerPlan& plan) {
  const std::string type = TypeName(kind);
  if (!weight.defined() || weight.dim() != 4) {
    return InvalidArgumentError(name + ": a " + type + " weight must be 4-D");
  }
  if (options.groups < 1) return InvalidArgumentError(name + ": groups must be positive");
  for (int i = 0; i < 2; ++i) {
    if (options.stride[i] < 1 || options.dilation[i] < 1 || options.padding[i] < 0 ||
        options.output_padding[i] < 0) {
      return InvalidArgumentError(name +
                                  ": stride and dilation must be positive, padding "
                                  "and output_padding non-negative");
    }
  }
  std::unique_ptr<QuantConv> m(new QuantConv());
  m->kind_ = kind;
  m->name_ = std::move(name);
  m->options_ = options;
  // The weight's first axis holds whole channels of every group: the
  // outputs of a Conv2d, the inputs of a ConvTranspose2d.
  const int64_t g = options.groups;
  const bool conv = kind == ConvKind::kConv2d;
  const int64_t grouped = weight.size(0), per_group = weight.size(1);
  if (grouped % g != 0) {
    return InvalidArgumentError(m->name_ + ": groups " + std::to_string(g) + " do not divide the " +
                                std::to_string(grouped) +
                                (conv ? " output channels" : " input channels"));
  }
  m->out_channels_ = conv ? grouped : per_group * g;
  m->in_channels_ = conv ? per_group * g : grouped;
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != m->out_channels_)) {
    return InvalidArgumentError(m->name_ + ": bias must be [" + std::to_string(m->out_channels_) +
                                "]");
  }
  std::optional<quant::QuantSpec> wspec = plan.weight;
  if (wspec && kind == ConvKind::kConvTranspose2d && !wspec->ch_axis &&
      wspec->qscheme == quant::QScheme::kPerChannel) {
    wspec->ch_axis = 1;  // the output channels of [in, out / groups, kh, kw]
  }
  QD_ASSIGN_OR_RETURN(m->weight_,
                      ModuleWeight::Create(std::move(weight), wspec, m->name_ + " weight"));
  QD_ASSIGN_OR_RETURN(m->bias_,
                      ModuleWeight::Create(std::move(bias), plan.bias, m->name_ + " bias"));
  QD_ASSIGN_OR_RETURN(m->input_, ActivationQuantizer::Create(plan.input, m->name_ + " input"));
  QD_ASSIGN_OR_RETURN(m->output_, ActivationQuantizer::Create(plan.output, m->name_ + " output"));
  return m;
}

Status QuantConv::CheckInput(const at::Tensor& x) const {
  if (x.defined() && x.dim() == 4 && x.size(1) == in_channels_) return OkStatus();
  return InvalidArgumentError(
      name_ + ": input must be [N, " + std::to_string(in_channels_) + ", H, W], got " +
      (x.defined() ? c10::str(x.sizes()) : std::string("an undefined tensor")));
}

StatusOr<at::Tensor> QuantConv::Convolve(const at::Tensor& x) const {
  QD_RETURN_IF_ERROR(CheckInput(x));
  QD_ASSIGN_OR_RETURN(at::Tensor xq, input_.Apply(x));
  QD_ASSIGN_OR_RETURN(at::Tensor w, weight_.Effective(x.scalar_type(), x.device()));
  QD_ASSIGN_OR_RETURN(at::Tensor b, bias_.Effective(x.scalar_type(), x.device()));
  const auto& o = options_;
  try {
    if (kind_ == ConvKind::kConv2d) {
      return at::conv2d(xq, w, b, o.stride, o.padding, o.dilation, o.groups);
    }
    return at::conv_transpose2d(xq, w, b, o.stride, o.padding, o.output_padding, o.groups,
                                o.dilation);
  } catch (const c10::Error& e) {
    return InvalidArgumentError(name_ + ": " + e.what_without_backtrace());
  }
}

Status QuantConv::Calibrate(const std::vector<at::Tensor>& batches) {
  if (batches.empty()) return InvalidArgumentError(name_ + ": no calibration batches");
  for (const auto& x : batches) {
    QD_RETURN_IF_ERROR(CheckInput(x));
    QD_RETURN_IF_ERROR(input_.Observe(x));
  }
  QD_RETURN_IF_ERROR(input_.Finish());
  if (output_.is_static()) {
    for (const auto& x : batches) {
      QD_ASSIGN_OR_RETURN(at::Tensor y, Convolve(x));
      QD_RETURN_IF_ERROR(output_.Observe(y));
    }
  }
  return output_.Finish();
}

StatusOr<at::Tensor> QuantConv::Forward(const at::Tensor& x) const {
  QD_ASSIGN_OR_RETURN(at::Tensor y, Convolve(x));
  return output_.Apply(y);
}

StatusOr<pipeline::FreezeReport> QuantConv::Freeze() {
  pipeline::FreezeReport report;
  QD_RETURN_IF_ERROR(weight_.Freeze(report));
  QD_RETURN_IF_ERROR(bias_.Freeze(report));
  return report;
}

}  // namespace quantd::quant_modules
