#include "worker/torchscript/script_sensitivity.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "worker/common/cancellation.h"
#include "worker/common/squared_error.h"
#include "worker/torchscript/batchnorm_fold.h"
#include "worker/torchscript/script_model.h"
#include "worker/torchscript/script_quantizer.h"

namespace quantd::torchscript {

StatusOr<std::map<std::string, std::vector<double>>> MeasureScriptSensitivity(
    const std::vector<pipeline::SensitivityCandidate>& candidates, const TensorDataset& data,
    const ScriptSensitivityOptions& options) {
  const int64_t n = std::min(options.samples, data.size());
  const int64_t batch = std::max(1, options.batch_size);
  std::map<std::string, std::vector<double>> out;
  for (const std::string& name : options.layers) out[name].assign(candidates.size(), 0.0);
  const auto layers = static_cast<int64_t>(options.layers.size());
  const int64_t total = static_cast<int64_t>(candidates.size()) * layers;
  int64_t done = 0;  // layer-candidate pairs
  for (size_t c = 0; c < candidates.size(); ++c) {
    const pipeline::SensitivityCandidate& candidate = candidates[c];
    auto loaded = ScriptModel::Load(options.model_path);
    if (!loaded.ok()) return loaded.status();
    ScriptModel model = *std::move(loaded);
    if (options.fold_batchnorm) QD_RETURN_IF_ERROR(FoldBatchNorms(model).status());
    // Only the job's layers, each as the candidate plans it.
    const pipeline::LayerPlanner planner = [&](const std::string& name, const std::string& type) {
      return out.count(name) ? candidate.planner(name, type) : pipeline::LayerPlan{};
    };
    auto created = ScriptQuantizer::Create(model, planner);
    if (created.status().code() == StatusCode::kFailedPrecondition) {
      done += layers;  // it keeps every layer float
      continue;
    }
    if (!created.ok())
      return Status(created.status()).Prepend("sensitivity to " + candidate.name + ": ");
    ScriptQuantizer& q = **created;
    if (q.NeedsCalibration()) {
      for (int64_t b = 0; b < n; b += batch) {
        if (StopRequested()) return CancelledStatus("measuring the sensitivity");
        QD_RETURN_IF_ERROR(
            q.Forward(ScriptQuantizer::Mode::kObserve, data.Batch(b, std::min(n, b + batch)))
                .status());
      }
      QD_RETURN_IF_ERROR(q.FinishCalibration());
    }
    // Batch by batch (no output is kept beyond its batch): the float
    // output, then each layer alone.
    std::vector<SquaredError> sums(q.layers().size());
    for (int64_t b = 0; b < n; b += batch) {
      const std::vector<at::Tensor> inputs = data.Batch(b, std::min(n, b + batch));
      QD_ASSIGN_OR_RETURN(at::Tensor f, q.Forward(ScriptQuantizer::Mode::kFloat, inputs));
      for (size_t slot = 0; slot < q.layers().size(); ++slot) {
        const QuantizedLayer& l = q.layers()[slot];
        if (!l.plan.quantized()) continue;
        if (StopRequested()) return CancelledStatus("measuring the sensitivity");
        auto y = q.ForwardAlone(slot, inputs);
        if (!y.ok())
          return Status(y.status())
              .Prepend("sensitivity of " + l.layer.name + " to " + candidate.name + ": ");
        const SquaredError e = SumSquaredError(*y, f);
        sums[slot].reference += e.reference;
        sums[slot].error += e.error;
      }
      if (options.progress) options.progress(done + layers * std::min(n, b + batch) / n, total);
    }
    done += layers;
    for (size_t slot = 0; slot < q.layers().size(); ++slot) {
      const SquaredError& sum = sums[slot];
      if (q.layers()[slot].plan.quantized())
        out[q.layers()[slot].layer.name][c] = sum.reference > 0 ? sum.error / sum.reference : 0.0;
    }
  }
  return out;
}

}  // namespace quantd::torchscript
