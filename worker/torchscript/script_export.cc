#include "worker/torchscript/script_export.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>

#include <fstream>
#include <set>
#include <utility>

#include "worker/config/quark_json.h"
#include "worker/export/export_support.h"
#include "worker/export/serving_target.h"
#include "worker/quant/spec.h"

namespace quantd::torchscript {
namespace {

// What an activation quantizer becomes in the exported module.
enum ExportMode : int64_t { kNone = 0, kPerTensor = 1, kPerChannel = 2 };

StatusOr<ExportMode> ModeOf(const quant_modules::ActivationQuantizer& q, bool input,
                            const std::string& what) {
  if (!q.enabled()) return kNone;
  const quant::QuantSpec& s = *q.spec();
  Status held =
      exporter::CheckExportSpec(exporter::ExportFormat::kTorchScript, s,
                                input ? quant::TensorRole::kInput : quant::TensorRole::kOutput);
  if (!held.ok()) return Status(held).Prepend(what + ": ");
  return s.qscheme == quant::QScheme::kPerTensor ? kPerTensor : kPerChannel;
}

// The method each hooked class gets; `side` 0 is the input, 1 the output.
constexpr const char* kFakeQuantMethod = R"(
def _quantd_fake_quant(self, x: Tensor, side: int) -> Tensor:
    mode = self._quantd_mode[side]
    if mode == 1:
        return torch.fake_quantize_per_tensor_affine(x, self._quantd_scale[side],
            self._quantd_zero_point[side], self._quantd_qmin[side], self._quantd_qmax[side])
    if mode == 2:
        axis = self._quantd_axis[side]
        if axis < 0:
            axis = axis + x.dim()
        return torch.fake_quantize_per_channel_affine(x, self._quantd_scale[side],
            self._quantd_zero_point[side], axis, self._quantd_qmin[side], self._quantd_qmax[side])
    return x
)";

struct SideParams {
  int64_t mode = kNone;
  at::Tensor scale = at::ones({1});
  at::Tensor zero_point = at::zeros({1}, at::kInt);
  int64_t axis = 0, qmin = 0, qmax = 0;
};

StatusOr<SideParams> ParamsOf(const quant_modules::ActivationQuantizer& q, bool input,
                              const std::string& what) {
  SideParams p;
  QD_ASSIGN_OR_RETURN(ExportMode mode, ModeOf(q, input, what));
  p.mode = mode;
  if (mode == kNone) return p;
  const quant::QuantSpec& s = *q.spec();
  const quant::IntRange range = quant::IntRangeOf(s.dtype);
  p.qmin = range.qmin;
  p.qmax = range.qmax;
  p.axis = quant::EffectiveChAxis(s);
  const quant::QParams& qp = q.qparams();
  p.scale = qp.scale.to(at::kFloat).reshape({-1}).contiguous();
  at::Tensor zp =
      qp.zero_point.defined() ? qp.zero_point.reshape({-1}) : at::zeros_like(p.scale, at::kInt);
  if (zp.is_floating_point() && !zp.eq(zp.round()).all().item<bool>()) {
    return InvalidArgumentError(what +
                                " has a fractional zero point, which PyTorch's "
                                "fake_quantize operators do not take");
  }
  p.zero_point = zp.to(at::kInt).contiguous();
  if (mode == kPerTensor) {
    p.scale = p.scale.reshape({});
    p.zero_point = p.zero_point.reshape({});
  }
  return p;
}

// Replaces each quantd::activation(x, slot, side) with
// self._quantd_fake_quant(x, side).
void RewriteHooks(torch::jit::Graph& g) {
  const auto op = c10::Symbol::fromQualString("quantd::activation");
  std::vector<torch::jit::Node*> hooks;
  for (torch::jit::Node* n : g.nodes()) {
    if (n->kind() == op) hooks.push_back(n);
  }
  for (torch::jit::Node* n : hooks) {
    torch::jit::WithInsertPoint before(n);
    torch::jit::Node* call =
        g.create(torch::jit::prim::CallMethod, {g.inputs()[0], n->input(0), n->input(2)});
    call->s_(torch::jit::attr::name, "_quantd_fake_quant");
    call->output()->setType(c10::TensorType::get());
    g.insertNode(call);
    n->output()->replaceAllUsesWith(call->output());
    n->destroy();
  }
}

}  // namespace

Status CheckScriptExport(const ScriptQuantizer& quantizer) {
  Status bad;
  std::string first;
  for (const QuantizedLayer& l : quantizer.layers()) {
    for (const auto* q : {&l.input, &l.output}) {
      const std::string what = l.layer.name + (q == &l.input ? " input" : " output");
      auto mode = ModeOf(*q, q == &l.input, what);
      if (mode.ok()) continue;
      if (first.empty()) {
        first = mode.status().message();
        bad = InvalidArgumentError(first);
      }
      bad.AddViolation(what, mode.status().message());
    }
  }
  return bad;
}

StatusOr<exporter::Artifact> ExportScriptModel(ScriptQuantizer& quantizer,
                                               const ScriptExportOptions& options) {
  QD_RETURN_IF_ERROR(CheckScriptExport(quantizer));
  QD_ASSIGN_OR_RETURN(exporter::StagedDirectory staged,
                      exporter::StagedDirectory::Create(options.output_dir, options.overwrite,
                                                        options.output_owner));
  try {
    std::set<torch::jit::Function*> rewritten;
    const auto int_list = c10::ListType::ofInts();
    const auto tensor_list = c10::ListType::ofTensors();
    for (const QuantizedLayer& l : quantizer.layers()) {
      torch::jit::Module m = l.layer.module;
      QD_ASSIGN_OR_RETURN(SideParams in, ParamsOf(l.input, true, l.layer.name + " input"));
      QD_ASSIGN_OR_RETURN(SideParams out, ParamsOf(l.output, false, l.layer.name + " output"));
      m.register_attribute("_quantd_mode", int_list, c10::List<int64_t>({in.mode, out.mode}));
      m.register_attribute("_quantd_scale", tensor_list,
                           c10::List<at::Tensor>({in.scale, out.scale}));
      m.register_attribute("_quantd_zero_point", tensor_list,
                           c10::List<at::Tensor>({in.zero_point, out.zero_point}));
      m.register_attribute("_quantd_axis", int_list, c10::List<int64_t>({in.axis, out.axis}));
      m.register_attribute("_quantd_qmin", int_list, c10::List<int64_t>({in.qmin, out.qmin}));
      m.register_attribute("_quantd_qmax", int_list, c10::List<int64_t>({in.qmax, out.qmax}));
      torch::jit::Function& fn = m.get_method("forward").function();
      if (!rewritten.insert(&fn).second) continue;
      m.define(kFakeQuantMethod);
      RewriteHooks(*torch::jit::toGraphFunction(fn).graph());
    }
    // Fake-quantized weights in the module, as the quantized forward used.
    QD_RETURN_IF_ERROR(quantizer.UseQuantizedWeights());
    quantizer.model().RemoveLoopChecks();
    quantizer.module().save(staged.staging_path() + "/model.pt");
  } catch (const std::exception& e) {
    return InternalError("writing the torchscript export: " + FirstLine(e));
  }
  if (options.quant_config != nullptr) {
    std::ofstream f(staged.staging_path() + "/quantization_config.json");
    f << config::WriteQuarkJsonForExport(*options.quant_config, "fake_quantized", 2) << "\n";
    if (!f) return InternalError("writing quantization_config.json failed");
  }
  QD_RETURN_IF_ERROR(staged.Commit());
  QD_ASSIGN_OR_RETURN(
      exporter::Artifact artifact,
      exporter::DescribeArtifact(exporter::ExportFormat::kTorchScript, staged, "model.pt"));
  artifact.consumers = exporter::ArtifactConsumers(exporter::ExportFormat::kTorchScript, {});
  return artifact;
}

}  // namespace quantd::torchscript
