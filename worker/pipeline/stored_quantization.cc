#include "worker/pipeline/stored_quantization.h"

#include <c10/util/Exception.h>

namespace quantd::pipeline {

using quant::QScheme;
using quant::QuantSpec;

namespace {

// The fields that decide the grid, with defaults applied.
QuantSpec GridOf(QuantSpec s) {
  s.observer = quant::ObserverType::kMinMax;
  s.percentile.reset();
  int axis = quant::EffectiveChAxis(s);
  if (s.qscheme == QScheme::kPerGroup || quant::IsMxType(s.dtype)) {
    if (axis < 0) axis += 2;  // a Linear weight is 2-D
  }
  s.ch_axis = axis;
  if (s.qscheme != QScheme::kPerGroup) s.group_size.reset();
  return s;
}

bool SameWidthInts(quant::DataType a, quant::DataType b) {
  return quant::IsIntType(a) && quant::IsIntType(b) && quant::BitWidth(a) == quant::BitWidth(b);
}

}  // namespace

std::optional<quant::QParams> SameGridQParams(const QuantSpec& stored, const quant::QParams& qp,
                                              const QuantSpec& plan) {
  QuantSpec a = GridOf(stored), b = GridOf(plan);
  if (a == b) return qp;
  if (!SameWidthInts(a.dtype, b.dtype) || a.zero_point_type != quant::ZeroPointType::kInt32 ||
      b.zero_point_type != quant::ZeroPointType::kInt32)
    return std::nullopt;
  // Compare the rest with the plan's dtype and symmetry.
  a.dtype = b.dtype;
  a.symmetric = b.symmetric;
  if (a != b) return std::nullopt;
  const int64_t mid = int64_t{1} << (quant::BitWidth(plan.dtype) - 1);
  int64_t shift = 0;
  if (quant::IsSignedInt(stored.dtype) && !quant::IsSignedInt(plan.dtype)) shift = mid;
  if (!quant::IsSignedInt(stored.dtype) && quant::IsSignedInt(plan.dtype)) shift = -mid;
  try {
    quant::QParams out;
    out.scale = qp.scale;
    at::Tensor zp = qp.zero_point.defined() ? qp.zero_point.to(at::kLong)
                                            : at::zeros(qp.scale.sizes(), at::kLong);
    zp = zp + shift;
    const quant::IntRange r = quant::IntRangeOf(plan.dtype);
    if (plan.symmetric) {
      const int64_t want = quant::IsSignedInt(plan.dtype) ? 0 : mid;
      if (zp.ne(want).any().item<bool>()) return std::nullopt;
    } else if (zp.lt(r.qmin).any().item<bool>() || zp.gt(r.qmax).any().item<bool>()) {
      return std::nullopt;
    }
    out.zero_point = zp.to(at::kInt);
    return out;
  } catch (const c10::Error&) {
    return std::nullopt;
  }
}

StatusOr<StoredQuantization> MatchStoredQuantization(const exporter::QuantizedModel& stored,
                                                     const std::map<std::string, LayerPlan>& plans,
                                                     const StoredMatchOptions& options) {
  StoredQuantization out;
  for (const exporter::QuantizedLayer& layer : stored.layers()) {
    auto plan_it = plans.find(layer.name);
    const LayerPlan* plan = plan_it == plans.end() ? nullptr : &plan_it->second;
    StoredLayerParams kept;
    if (layer.weight) {
      std::string why;
      if (plan == nullptr || !plan->weight) {
        out.left_float.push_back(layer.name);
      } else if (options.weights_change) {
        why = "the job's algorithms change the weights";
      } else {
        QD_ASSIGN_OR_RETURN(quant::QParams qp, stored.WeightQParams(layer.name));
        QD_ASSIGN_OR_RETURN(at::Tensor g_idx, stored.WeightGroupIndex(layer.name));
        std::optional<quant::QParams> same = SameGridQParams(*layer.weight, qp, *plan->weight);
        if (!same) {
          why = "stored " + quant::DescribeSpec(*layer.weight) + ", the job quantizes " +
                quant::DescribeSpec(*plan->weight);
        } else if (g_idx.defined() && options.contiguous_groups_only) {
          why = "its stored groups are permuted columns, which only compressed-tensors records";
        } else {
          kept.weight = std::move(same);
          kept.weight_group_index = g_idx;
        }
      }
      if (!why.empty()) out.requantized.push_back(layer.name + " (" + why + ")");
    }
    if (plan != nullptr && !options.weights_change) {
      auto keep = [](const std::optional<exporter::ActivationQuantizer>& a,
                     const std::optional<QuantSpec>& want) -> std::optional<quant::QParams> {
        if (!a || !want || a->spec.is_dynamic || want->is_dynamic || !a->static_qparams)
          return std::nullopt;
        return SameGridQParams(a->spec, *a->static_qparams, *want);
      };
      kept.input = keep(layer.input, plan->input);
      kept.output = keep(layer.output, plan->output);
    }
    if (kept.weight || kept.input || kept.output) out.layers[layer.name] = std::move(kept);
  }
  return out;
}

}  // namespace quantd::pipeline
