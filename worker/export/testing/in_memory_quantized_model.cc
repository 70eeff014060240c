#include "worker/export/testing/in_memory_quantized_model.h"

#include <c10/util/Exception.h>

#include <utility>

#include "worker/config/quark_json.h"
#include "worker/export/hf/quark_config.h"
#include "worker/export/module_names.h"
#include "worker/export/quantized_values_source.h"
#include "worker/io/safetensors/safetensors_source.h"
#include "worker/models/layer_shapes.h"
#include "worker/models/registry.h"
#include "worker/quant/fake_quant.h"

namespace quantd::exporter::testing {
namespace {

struct RunningRange {
  at::Tensor min, max;  // 0-dim float32
  void Observe(const at::Tensor& t) {
    auto [mn, mx] = at::aminmax(t.to(at::kFloat));
    min = min.defined() ? at::minimum(min, mn) : mn;
    max = max.defined() ? at::maximum(max, mx) : mx;
  }
};

}  // namespace

StatusOr<std::unique_ptr<InMemoryQuantizedModel>> InMemoryQuantizedModel::Create(
    const InMemoryQuantizeOptions& options) {
  std::unique_ptr<InMemoryQuantizedModel> m(new InMemoryQuantizedModel());
  m->model_dir_ = options.model_dir;
  m->quantize_on_load_ = options.quantize_on_load;
  QD_ASSIGN_OR_RETURN(m->config_, models::LoadModelConfig(options.model_dir));
  QD_ASSIGN_OR_RETURN(auto st, io::SafetensorsSource::Open(options.model_dir));
  m->original_ = std::move(st);
  m->quantized_ = std::make_shared<io::TensorMapSource>("fake-quantized weights");
  QD_ASSIGN_OR_RETURN(QuarkConfig quark, QuarkConfig::Parse(options.quant_config_json));
  QD_ASSIGN_OR_RETURN(m->quant_config_, config::ParseQuarkJson(options.quant_config_json));
  bool needs_calibration = false;
  for (const models::LinearLayerInfo& info : models::ListLinearLayers(m->config_)) {
    const std::string weight_name = info.name + ".weight";
    if (m->original_->Find(weight_name) == nullptr) continue;
    QuarkLayerSpecs specs = quark.Resolve(info.name, info.type);
    if (!specs.quantized()) continue;
    QuantizedLayer layer;
    layer.name = info.name;
    layer.type = info.type;
    layer.weight = specs.weight;
    layer.bias = specs.bias;
    if (specs.input) layer.input = ActivationQuantizer{*specs.input, std::nullopt};
    if (specs.output) layer.output = ActivationQuantizer{*specs.output, std::nullopt};
    needs_calibration |=
        (specs.input && !specs.input->is_dynamic) || (specs.output && !specs.output->is_dynamic);
    if (specs.weight) {
      QD_ASSIGN_OR_RETURN(at::Tensor w, m->original_->Load(weight_name));
      QD_ASSIGN_OR_RETURN(quant::QParams qp, quant::ComputeQParams(w, *specs.weight));
      m->weight_qparams_[info.name] = qp;
      m->weight_specs_[weight_name] = *specs.weight;
      if (!m->quantize_on_load_) {
        QD_ASSIGN_OR_RETURN(at::Tensor fq, quant::FakeQuantize(w, *specs.weight, qp));
        m->quantized_->Put(weight_name, fq);
      }
    }
    m->layers_.push_back(std::move(layer));
  }
  if (needs_calibration) {
    if (!options.calibration_ids.defined())
      return InvalidArgumentError("static activation quantizers need calibration_ids");
    QD_RETURN_IF_ERROR(m->Calibrate(options.calibration_ids));
  }
  return m;
}

Status InMemoryQuantizedModel::Calibrate(const at::Tensor& ids) {
  auto weights = std::make_shared<QuantizedValuesSource>(this);
  QD_ASSIGN_OR_RETURN(auto lm, models::LoadCausalLM(config_, weights));
  std::map<std::string, RunningRange> inputs, outputs;
  auto install = [&](models::Linear& linear) {
    const QuantizedLayer* layer = FindLayer(linear.name());
    if (layer == nullptr) return;
    const std::string name = linear.name();
    if (layer->input && !layer->input->spec.is_dynamic)
      linear.AddInputHook([&inputs, name](const models::Linear&, const at::Tensor& t) {
        inputs[name].Observe(t);
        return t;
      });
    if (layer->output && !layer->output->spec.is_dynamic)
      linear.AddOutputHook([&outputs, name](const models::Linear&, const at::Tensor& t) {
        outputs[name].Observe(t);
        return t;
      });
  };
  try {
    QD_ASSIGN_OR_RETURN(at::Tensor h, lm->Embed(ids));
    for (int64_t i = 0; i < lm->num_blocks(); ++i) {
      QD_ASSIGN_OR_RETURN(auto block, lm->LoadBlock(i));
      for (models::Linear* linear : block->linears()) install(*linear);
      QD_ASSIGN_OR_RETURN(h, block->Forward(h));
    }
    QD_ASSIGN_OR_RETURN(auto head, lm->LoadHead());
    install(head->lm_head());
    QD_ASSIGN_OR_RETURN(at::Tensor logits, head->Forward(h));
    (void)logits;
  } catch (const c10::Error& e) {
    return InternalError(std::string("calibration: ") + e.what_without_backtrace());
  }
  for (QuantizedLayer& layer : layers_) {
    for (auto [q, ranges] :
         {std::make_pair(&layer.input, &inputs), std::make_pair(&layer.output, &outputs)}) {
      if (!*q || (*q)->spec.is_dynamic) continue;
      auto it = ranges->find(layer.name);
      if (it == ranges->end()) return InternalError(layer.name + " saw no calibration data");
      QD_ASSIGN_OR_RETURN(
          quant::QParams qp,
          quant::QParamsFromMinMax(it->second.min, it->second.max, (*q)->spec, at::kFloat));
      (*q)->static_qparams = qp;
    }
  }
  // One KV-cache scale per block: max of the k and v projections' (FP8).
  for (QuantizedLayer& k : layers_) {
    if (!EndsWith(k.name, ".k_proj") || !k.output || !k.output->static_qparams ||
        !quant::IsFp8Type(k.output->spec.dtype))
      continue;
    const std::string v_name = k.name.substr(0, k.name.size() - 7) + ".v_proj";
    for (QuantizedLayer& v : layers_) {
      if (v.name != v_name || !v.output || !v.output->static_qparams ||
          !quant::IsFp8Type(v.output->spec.dtype))
        continue;
      at::Tensor unified =
          at::maximum(k.output->static_qparams->scale, v.output->static_qparams->scale);
      k.output->static_qparams->scale = unified;
      v.output->static_qparams->scale = unified.clone();
    }
  }
  return OkStatus();
}

StatusOr<at::Tensor> InMemoryQuantizedModel::Load(const std::string& tensor_name) const {
  if (quantized_->Find(tensor_name) != nullptr) return quantized_->Load(tensor_name, at::kFloat);
  QD_ASSIGN_OR_RETURN(at::Tensor t, original_->Load(tensor_name, at::kFloat));
  auto spec = weight_specs_.find(tensor_name);
  if (!quantize_on_load_ || spec == weight_specs_.end()) return t;
  const std::string module = tensor_name.substr(0, tensor_name.size() - 7);
  return quant::FakeQuantize(t, spec->second, weight_qparams_.at(module));
}

const QuantizedLayer* InMemoryQuantizedModel::FindLayer(const std::string& module_name) const {
  for (const auto& l : layers_)
    if (l.name == module_name) return &l;
  return nullptr;
}

StatusOr<quant::QParams> InMemoryQuantizedModel::WeightQParams(
    const std::string& module_name) const {
  auto it = weight_qparams_.find(module_name);
  if (it == weight_qparams_.end()) return NotFoundError(module_name + " has no quantized weight");
  return it->second;
}

}  // namespace quantd::exporter::testing
