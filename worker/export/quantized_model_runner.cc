#include "worker/export/quantized_model_runner.h"

#include <c10/util/Exception.h>

#include "worker/export/quantized_values_source.h"
#include "worker/models/registry.h"
#include "worker/quant/fake_quant.h"

namespace quantd::exporter {
namespace {

// A hook that fake-quantizes what passes through with `q`. Errors are thrown
// as c10::Error, which the block's Forward turns into a Status.
models::LinearHook FakeQuantHook(const ActivationQuantizer& q, std::string where) {
  return [q, where](const models::Linear&, const at::Tensor& t) -> at::Tensor {
    StatusOr<at::Tensor> r = q.spec.is_dynamic || !q.static_qparams
                                 ? quant::FakeQuantizeDynamic(t, q.spec)
                                 : quant::FakeQuantize(t, q.spec, *q.static_qparams);
    TORCH_CHECK(r.ok(), where, ": ", r.status().ToString());
    return *r;
  };
}

}  // namespace

StatusOr<std::unique_ptr<QuantizedModelRunner>> QuantizedModelRunner::Create(
    const QuantizedModel& model, const models::ModelOptions& options) {
  std::unique_ptr<QuantizedModelRunner> r(new QuantizedModelRunner());
  r->model_ = &model;
  auto source = std::make_shared<QuantizedValuesSource>(&model);
  QD_ASSIGN_OR_RETURN(r->lm_, models::LoadCausalLM(model.config(), source, options));
  return r;
}

Status QuantizedModelRunner::InstallHooks(models::Linear& linear) const {
  const QuantizedLayer* layer = model_->FindLayer(linear.name());
  if (layer == nullptr) return OkStatus();
  for (const auto* q : {&layer->input, &layer->output}) {
    if (!*q) continue;
    if (!(*q)->spec.is_dynamic && !(*q)->static_qparams)
      return InternalError(linear.name() + ": a static activation quantizer has no parameters");
  }
  if (layer->input) linear.AddInputHook(FakeQuantHook(*layer->input, linear.name() + " input"));
  if (layer->output) linear.AddOutputHook(FakeQuantHook(*layer->output, linear.name() + " output"));
  return OkStatus();
}

eval::BlockwiseModel QuantizedModelRunner::Blockwise() const {
  eval::BlockwiseModel m;
  m.num_blocks = lm_->num_blocks();
  m.embed = [this](const at::Tensor& ids) { return lm_->Embed(ids); };
  m.load_block = [this](int64_t i) -> StatusOr<std::unique_ptr<models::DecoderBlock>> {
    QD_ASSIGN_OR_RETURN(auto block, lm_->LoadBlock(i));
    for (models::Linear* linear : block->linears()) QD_RETURN_IF_ERROR(InstallHooks(*linear));
    return block;
  };
  m.load_head = [this]() -> StatusOr<std::unique_ptr<models::HeadStage>> {
    QD_ASSIGN_OR_RETURN(auto head, lm_->LoadHead());
    QD_RETURN_IF_ERROR(InstallHooks(head->lm_head()));
    return head;
  };
  return m;
}

StatusOr<at::Tensor> QuantizedModelRunner::Forward(const at::Tensor& ids) const {
  const eval::BlockwiseModel m = Blockwise();
  QD_ASSIGN_OR_RETURN(at::Tensor h, m.embed(ids));
  for (int64_t i = 0; i < m.num_blocks; ++i) {
    QD_ASSIGN_OR_RETURN(auto block, m.load_block(i));
    QD_ASSIGN_OR_RETURN(h, block->Forward(h));
  }
  QD_ASSIGN_OR_RETURN(auto head, m.load_head());
  return head->Forward(h);
}

}  // namespace quantd::exporter
