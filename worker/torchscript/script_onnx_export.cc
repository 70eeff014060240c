#include "worker/torchscript/script_onnx_export.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <utility>

#include "worker/config/quark_json.h"
#include "worker/export/export_support.h"
#include "worker/export/onnx/onnx_proto.h"
#include "worker/export/onnx/onnx_qdq_nodes.h"
#include "worker/export/serving_target.h"
#include "worker/quant/fake_quant.h"
#include "worker/quant/spec.h"

namespace quantd::torchscript {
namespace {

namespace fs = std::filesystem;
namespace onnx = exporter::onnx;
using onnx::Attribute;
using onnx::DataType;
using onnx::Dim;
using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

// What a TorchScript value is during the walk: every value has its result on
// the example inputs (`concrete`); those that depend on the inputs are
// `dyn` and have an ONNX tensor (`name`), or, for a list or tuple, elements.
struct Val {
  bool dyn = false;
  c10::IValue concrete;
  std::string name;
  std::vector<Val> elems;
  // A static value computed from a dynamic tensor's batch size.
  bool batch = false;
  // For a module attribute: its module object and name.
  const c10::ivalue::Object* owner = nullptr;
  std::string attr;
};

DataType OnnxType(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return DataType::kFloat;
    case at::kLong:
      return DataType::kInt64;
    case at::kInt:
      return DataType::kInt32;
    case at::kBool:
      return DataType::kBool;
    case at::kHalf:
      return DataType::kFloat16;
    case at::kBFloat16:
      return DataType::kBfloat16;
    case at::kByte:
      return DataType::kUint8;
    case at::kChar:
      return DataType::kInt8;
    case at::kDouble:
      return static_cast<DataType>(11);  // DOUBLE
    default:
      return DataType::kFloat;
  }
}

bool IsSupportedType(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
    case at::kLong:
    case at::kInt:
    case at::kBool:
    case at::kHalf:
    case at::kBFloat16:
    case at::kByte:
    case at::kChar:
    case at::kDouble:
      return true;
    default:
      return false;
  }
}

// The lowest opset that expresses the quantizers: 13 for int8 / uint8, 19
// with FP8, 21 with int4 / uint4 or per-group (blocked) DequantizeLinear.
int64_t ChooseOpset(const ScriptQuantizer& q) {
  int64_t opset = 13;
  for (const QuantizedLayer& l : q.layers()) {
    const auto w = WithLayerAxes(l.plan.weight, l.layer.type);
    if (w && onnx::HasOnnxCodes(*w) && !quant::IsCastType(w->dtype)) {
      if (quant::IsFp8Type(w->dtype)) opset = std::max<int64_t>(opset, 19);
      if (onnx::Is4Bit(*w) || w->qscheme == quant::QScheme::kPerGroup) opset = 21;
    }
    for (const auto* a : {&l.input, &l.output}) {
      if (!a->enabled()) continue;
      if (quant::IsFp8Type(a->spec()->dtype)) opset = std::max<int64_t>(opset, 19);
      if (onnx::Is4Bit(*a->spec())) opset = 21;
    }
  }
  return opset;
}

int64_t IrVersion(int64_t opset) { return opset >= 21 ? 10 : opset >= 19 ? 9 : 7; }

std::string Sanitize(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') c = '_';
  }
  return s.empty() ? "input" : s;
}

class OnnxWalker {
 public:
  OnnxWalker(ScriptQuantizer& q, bool emit_quantizers, int64_t opset)
      : q_(q), emit_quantizers_(emit_quantizers), opset_(opset), g_("quantd") {}

  Status Run(const std::vector<at::Tensor>& inputs) {
    torch::jit::Module& m = q_.module();
    for (const auto& sub : m.named_modules()) {
      module_names_[sub.value._ivalue().get()] = sub.name;
    }
    for (size_t i = 0; i < q_.layers().size(); ++i) {
      layer_of_[q_.layers()[i].layer.module._ivalue().get()] = i;
    }
    torch::jit::GraphFunction& fn = torch::jit::toGraphFunction(m.get_method("forward").function());
    std::shared_ptr<torch::jit::Graph> graph = fn.graph()->copy();
    torch::jit::Inline(*graph);
    const auto& args = fn.getSchema().arguments();
    if (graph->inputs().size() != inputs.size() + 1 || args.size() != inputs.size() + 1) {
      return InvalidArgumentError("onnx: forward takes " +
                                  std::to_string(graph->inputs().size() - 1) +
                                  " tensors, the example has " + std::to_string(inputs.size()));
    }
    Val self;
    self.concrete = m._ivalue();
    vals_[graph->inputs()[0]] = self;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const at::Tensor& t = inputs[i];
      if (!IsSupportedType(t.scalar_type()) || t.dim() == 0) {
        return InvalidArgumentError("onnx: forward's argument " + args[i + 1].name() +
                                    " is not a batched tensor of a type ONNX has");
      }
      Val v;
      v.dyn = true;
      v.concrete = t.clone();
      v.name = Sanitize(args[i + 1].name());
      g_.AddInput(v.name, OnnxType(t.scalar_type()), Dims(t));
      vals_[graph->inputs()[i + 1]] = v;
    }
    c10::AutoGradMode no_grad(false);
    QD_RETURN_IF_ERROR(WalkBlock(graph->block()));
    Val out = vals_.at(graph->outputs()[0]);
    if (!out.elems.empty()) out = out.elems[0];  // a tuple or list: its first element
    if (!out.dyn || out.name.empty() || !out.concrete.isTensor()) {
      return InvalidArgumentError(
          "onnx: forward's result (or its first element) is not a tensor computed from the "
          "inputs");
    }
    const at::Tensor& t = out.concrete.toTensor();
    g_.OpTo("Identity", "/output", {out.name}, "output");
    g_.AddOutput("output", OnnxType(t.scalar_type()), Dims(t));
    return OkStatus();
  }

  onnx::GraphBuilder& graph() { return g_; }
  int64_t opset() const { return opset_; }
  const std::vector<std::string>& float_weights() const { return float_weights_; }
  const std::map<std::string, std::string>& weight_forms() const { return weight_forms_; }

 private:
  static std::vector<Dim> Dims(const at::Tensor& t) {
    std::vector<Dim> d = {std::string("batch")};
    for (int64_t i = 1; i < t.dim(); ++i) d.push_back(t.size(i));
    return d;
  }

  // The module a node came from ("layer1.0.conv1"), from its inlined call
  // stack; "forward" for the top level.
  std::string Where(const Node* n) const {
    std::string path;
    if (auto cs = n->callstack()) {
      for (const auto& e : (*cs)->vec()) {
        const auto& info = std::get<2>(e);
        if (!info || info->instance_name().empty()) continue;
        const std::string& name = info->instance_name();
        if (name == "self" || name == "SELF" || name == "__module__") continue;
        path += (path.empty() ? "" : ".") + name;
      }
    }
    return path.empty() ? "forward" : path;
  }

  Status Refuse(const Node* n, const std::string& what) const {
    return InvalidArgumentError("onnx cannot express " + what + " (in " + Where(n) + ")");
  }

  std::string Unique(const std::string& base) {
    int& count = used_names_[base];
    return count++ == 0 ? base : base + "_" + std::to_string(count - 1);
  }

  Val& V(const Value* v) { return vals_.at(v); }
  const c10::IValue& C(const Node* n, size_t i) { return V(n->input(i)).concrete; }
  // A number argument (an int, float or bool constant) as a double.
  static double Number(const c10::IValue& v) { return v.toScalar().to<double>(); }
  bool AnyDyn(const Node* n) {
    for (const Value* v : n->inputs()) {
      if (V(v).dyn) return true;
    }
    return false;
  }

  Status WalkBlock(Block* b) {
    for (Node* n : b->nodes()) {
      QD_RETURN_IF_ERROR(Visit(n));
    }
    return OkStatus();
  }

  // Runs the node's operator on the inputs' concrete values.
  StatusOr<std::vector<c10::IValue>> Evaluate(const Node* n) {
    torch::jit::Stack stack;
    for (const Value* v : n->inputs()) stack.push_back(V(v).concrete);
    try {
      torch::jit::Operation op = n->getOperation();
      op(stack);
    } catch (const std::exception& e) {
      return Refuse(n, std::string(n->kind().toQualString()) + " here: " + FirstLine(e));
    }
    if (stack.size() != n->outputs().size()) {
      return InternalError(std::string("onnx: ") + n->kind().toQualString() + " returned " +
                           std::to_string(stack.size()) + " values");
    }
    return stack;
  }

  // Whether the node writes into a static input (x.add_() on a module
  // attribute): refused, as the export would freeze one forward's effect.
  bool WritesStaticInput(const Node* n) {
    const c10::FunctionSchema* s = n->maybeSchema();
    if (s == nullptr) return false;
    for (size_t i = 0; i < s->arguments().size() && i < n->inputs().size(); ++i) {
      const auto* alias = s->arguments()[i].alias_info();
      if (alias != nullptr && alias->isWrite() && !V(n->input(i)).dyn) return true;
    }
    return false;
  }

  Status Visit(Node* n) {
    const std::string kind = n->kind().toQualString();
    if (n->kind() == torch::jit::prim::Constant) {
      Val v;
      v.concrete = torch::jit::toIValue(n->output()).value_or(c10::IValue());
      vals_[n->output()] = v;
      return OkStatus();
    }
    if (kind == "quantd::loop_tick") return OkStatus();
    if (n->kind() == torch::jit::prim::GetAttr) {
      const Val& obj = V(n->input(0));
      if (obj.dyn || !obj.concrete.isObject()) return Refuse(n, "prim::GetAttr on a dynamic value");
      Val v;
      v.owner = obj.concrete.toObject().get();
      v.attr = n->s(torch::jit::attr::name);
      v.concrete = obj.concrete.toObject()->getAttr(v.attr);
      vals_[n->output()] = v;
      return OkStatus();
    }
    if (n->kind() == torch::jit::prim::If) {
      const Val& cond = V(n->input(0));
      if (cond.dyn) return Refuse(n, "prim::If on a value computed from the inputs");
      Block* taken = n->blocks()[cond.concrete.toBool() ? 0 : 1];
      QD_RETURN_IF_ERROR(WalkBlock(taken));
      for (size_t i = 0; i < n->outputs().size(); ++i) {
        vals_[n->outputs()[i]] = V(taken->outputs()[i]);
      }
      return OkStatus();
    }
    if (n->kind() == torch::jit::prim::Loop) return Refuse(n, "prim::Loop (a loop)");
    if (kind == "prim::RaiseException") {
      return InvalidArgumentError("onnx: forward raises an exception on the example inputs (in " +
                                  Where(n) + ")");
    }
    if (kind == "prim::SetAttr") return Refuse(n, "prim::SetAttr (forward changes the module)");
    if (kind == "quantd::activation") return Hook(n);
    if (kind == "prim::ListConstruct" || kind == "prim::TupleConstruct") {
      std::vector<c10::IValue> items;
      for (const Value* in : n->inputs()) items.push_back(V(in).concrete);
      Val v;
      if (kind == "prim::ListConstruct") {
        c10::impl::GenericList list(
            n->output()->type()->expectRef<c10::ListType>().getElementType());
        for (auto& item : items) list.push_back(std::move(item));
        v.concrete = std::move(list);
      } else {
        v.concrete = c10::ivalue::Tuple::create(std::move(items));
      }
      v.dyn = AnyDyn(n);
      for (const Value* in : n->inputs()) {
        v.batch = v.batch || V(in).batch;
        if (v.dyn) v.elems.push_back(V(in));
      }
      vals_[n->output()] = v;
      return OkStatus();
    }
    const bool dyn = AnyDyn(n);
    if (dyn && (kind == "prim::ListUnpack" || kind == "prim::TupleUnpack")) {
      const Val list = V(n->input(0));
      if (list.elems.size() != n->outputs().size()) return Refuse(n, kind + " of this list");
      for (size_t i = 0; i < n->outputs().size(); ++i) vals_[n->outputs()[i]] = list.elems[i];
      return OkStatus();
    }
    if (dyn && (kind == "prim::TupleIndex" || kind == "aten::__getitem__") && !V(n->input(1)).dyn &&
        V(n->input(0)).dyn && !V(n->input(0)).elems.empty()) {
      const Val list = V(n->input(0));
      int64_t i = C(n, 1).toInt();
      if (i < 0) i += static_cast<int64_t>(list.elems.size());
      if (i < 0 || i >= static_cast<int64_t>(list.elems.size())) return Refuse(n, kind);
      vals_[n->output()] = list.elems[i];
      return OkStatus();
    }
    if (!dyn) {
      if (WritesStaticInput(n)) return Refuse(n, kind + " writing into a module attribute");
      QD_ASSIGN_OR_RETURN(auto out, Evaluate(n));
      bool batch = false;
      for (const Value* in : n->inputs()) batch = batch || V(in).batch;
      for (size_t i = 0; i < out.size(); ++i) {
        Val v;
        v.concrete = out[i];
        v.batch = batch;
        vals_[n->outputs()[i]] = v;
      }
      return OkStatus();
    }
    // Static results of dynamic inputs: shapes, types, None checks.
    static const std::set<std::string> kStaticOf = {
        "aten::dim",    "aten::size",    "prim::dtype",
        "prim::device", "aten::__is__",  "aten::__isnot__",
        "aten::len",    "prim::is_cuda", "aten::is_floating_point",
        "prim::layout"};
    if (kStaticOf.count(kind)) {
      QD_ASSIGN_OR_RETURN(auto out, Evaluate(n));
      for (size_t i = 0; i < out.size(); ++i) {
        Val v;
        v.concrete = out[i];
        // The batch size: size(x) or size(x, 0).
        v.batch = kind == "aten::size" && (n->inputs().size() == 1 || C(n, 1).toInt() == 0 ||
                                           C(n, 1).toInt() == -C(n, 0).toTensor().dim());
        vals_[n->outputs()[i]] = v;
      }
      return OkStatus();
    }
    if (WritesStaticInput(n)) return Refuse(n, kind + " writing into a module attribute");
    QD_ASSIGN_OR_RETURN(auto out, Evaluate(n));
    if (out.size() != 1 || !out[0].isTensor()) return Refuse(n, kind);
    QD_ASSIGN_OR_RETURN(std::string name, Translate(n, kind, out[0].toTensor()));
    Val v;
    v.dyn = true;
    v.concrete = out[0];
    v.name = name;
    vals_[n->output()] = v;
    // An in-place operator: later uses of its first input see the result.
    const c10::FunctionSchema* s = n->maybeSchema();
    if (s != nullptr && !s->arguments().empty() && s->arguments()[0].alias_info() != nullptr &&
        s->arguments()[0].alias_info()->isWrite()) {
      vals_[n->input(0)] = v;
    }
    return OkStatus();
  }

  // quantd::activation(x, slot, side): the layer's quantizer as
  // QuantizeLinear + DequantizeLinear, or x.
  Status Hook(Node* n) {
    Val x = V(n->input(0));
    const int64_t slot = C(n, 1).toInt(), side = C(n, 2).toInt();
    if (slot < 0 || slot >= static_cast<int64_t>(q_.layers().size())) {
      return InternalError("onnx: activation hook of unknown layer slot");
    }
    const QuantizedLayer& l = q_.layers()[slot];
    const quant_modules::ActivationQuantizer& a = side == 0 ? l.input : l.output;
    if (emit_quantizers_ && a.enabled()) {
      if (!x.dyn) return Refuse(n, "an activation quantizer on a constant");
      const std::string prefix = Unique("/" + l.layer.name + (side == 0 ? "/input" : "/output"));
      QD_ASSIGN_OR_RETURN(x.name,
                          onnx::AddActivationQdq(g_, prefix, *a.spec(), a.qparams(), x.name));
    }
    vals_[n->output()] = x;
    return OkStatus();
  }

  // ---- operands ----

  std::string I64(const std::string& base, const std::vector<int64_t>& values,
                  bool scalar = false) {
    at::Tensor t = at::tensor(values, at::kLong);
    if (scalar) t = t.reshape({});
    return g_.AddInitializer(Unique(base), DataType::kInt64, t.sizes().vec(), onnx::RawBytes(t));
  }
  std::string Scalar(const std::string& base, double v, at::ScalarType type) {
    at::Tensor t = at::scalar_tensor(v, at::TensorOptions().dtype(type));
    return g_.AddInitializer(Unique(base), OnnxType(type), {}, onnx::RawBytes(t));
  }

  // The ONNX tensor of a value: its name when dynamic; an initializer of a
  // static tensor (once per tensor), a quantized layer's weight as codes
  // with DequantizeLinear.
  StatusOr<std::string> Tensor(const Node* n, const Val& v) {
    if (v.dyn) {
      if (v.name.empty()) return Refuse(n, "a list where a tensor is expected");
      return v.name;
    }
    if (!v.concrete.isTensor()) return Refuse(n, "a non-tensor operand");
    const at::Tensor t = v.concrete.toTensor();
    auto cached = initializers_.find(t.unsafeGetTensorImpl());
    if (cached != initializers_.end()) return cached->second;
    std::string name;
    auto layer = layer_of_.find(v.owner);
    if (layer != layer_of_.end() && v.attr == "weight") {
      QD_ASSIGN_OR_RETURN(name, Weight(q_.layers()[layer->second]));
    } else {
      if (!IsSupportedType(t.scalar_type())) {
        return Refuse(n, std::string("a constant of type ") + c10::toString(t.scalar_type()));
      }
      std::string base = "const";
      if (v.owner != nullptr) {
        auto m = module_names_.find(v.owner);
        base = (m != module_names_.end() && !m->second.empty() ? m->second + "." : "") + v.attr;
      }
      name = g_.AddInitializer(Unique(base), OnnxType(t.scalar_type()), t.sizes().vec(),
                               onnx::RawBytes(t.detach().contiguous()));
    }
    initializers_[t.unsafeGetTensorImpl()] = name;
    kept_.push_back(t);
    return name;
  }
  StatusOr<std::string> In(const Node* n, size_t i) { return Tensor(n, V(n->input(i))); }

  // A layer's weight: its codes with DequantizeLinear where ONNX has their
  // type, else its fake-quantized float values.
  StatusOr<std::string> Weight(const QuantizedLayer& l) {
    const std::string name = l.layer.name + ".weight";
    const auto spec = WithLayerAxes(l.plan.weight, l.layer.type);
    QD_ASSIGN_OR_RETURN(at::Tensor fake, l.weight.Effective(at::kFloat, at::kCPU));
    fake = fake.contiguous();
    auto as_float = [&](const std::string& why) {
      if (spec) {
        float_weights_.push_back(l.layer.name + ": " + quant::DescribeSpec(*spec) + " (" + why +
                                 ")");
        weight_forms_[l.layer.name] =
            "float32 fake-quantized " + quant::DescribeSpec(*spec) + " (" + why + ")";
      }
      return g_.AddInitializer(Unique(name), DataType::kFloat, fake.sizes().vec(),
                               onnx::RawBytes(fake));
    };
    if (!spec) return as_float("");
    if (!onnx::HasOnnxCodes(*spec)) return as_float("ONNX has no element type for it");
    QD_ASSIGN_OR_RETURN(quant::QuantizedTensor q,
                        quant::RealQuantize(fake, *spec, l.weight.qparams()));
    at::Tensor scale = q.qparams.scale, zp = q.qparams.zero_point;
    int64_t axis = 0;
    if (spec->qscheme == quant::QScheme::kPerChannel) {
      axis = quant::EffectiveChAxis(*spec);
      if (axis < 0) axis += fake.dim();
      scale = scale.reshape({-1});
      if (zp.defined()) zp = zp.reshape({-1});
      if (scale.numel() != fake.size(axis)) return as_float("unexpected per-channel parameters");
    } else if (spec->qscheme == quant::QScheme::kPerGroup) {
      axis = quant::EffectiveChAxis(*spec);
      if (axis < 0) axis += fake.dim();
      if (scale.dim() != fake.dim()) return as_float("unexpected per-group parameters");
    } else {
      scale = scale.reshape({});
      if (zp.defined()) zp = zp.reshape({});
    }
    const std::string form = quant::IsCastType(spec->dtype) ? "Cast" : "DequantizeLinear";
    weight_forms_[l.layer.name] = quant::DescribeSpec(*spec) + ": codes + " + form;
    return onnx::AddDequantizedWeight(g_, Unique(name), Unique("/" + l.layer.name + "/weight"),
                                      *spec, q.codes.contiguous(), scale, zp, axis);
  }

  // A static argument (an int, list, float, string, None) of the node.
  StatusOr<c10::IValue> Arg(const Node* n, size_t i) {
    const Val& v = V(n->input(i));
    if (v.dyn) {
      return Refuse(n, std::string(n->kind().toQualString()) + " with argument " +
                           std::to_string(i) + " computed from the inputs");
    }
    return v.concrete;
  }
  StatusOr<std::vector<int64_t>> Ints(const Node* n, size_t i) {
    QD_ASSIGN_OR_RETURN(c10::IValue v, Arg(n, i));
    if (v.isInt()) return std::vector<int64_t>{v.toInt()};
    if (v.isIntList()) return v.toIntVector();
    return Refuse(n, std::string(n->kind().toQualString()) + " with a non-integer argument");
  }
  int64_t Rank(const Node* n, size_t i) {
    const c10::IValue& c = C(n, i);
    return c.isTensor() ? c.toTensor().dim() : 0;
  }
  static int64_t Axis(int64_t a, int64_t rank) { return a < 0 ? a + rank : a; }
  static std::vector<int64_t> Pair(std::vector<int64_t> v) {
    if (v.size() == 1) v.push_back(v[0]);
    return v;
  }

  // Operand i of an elementwise operator as a tensor of `type` (scalars
  // become initializers; other tensor types a Cast).
  StatusOr<std::string> Operand(const Node* n, size_t i, at::ScalarType type,
                                const std::string& p) {
    const Val& v = V(n->input(i));
    if (!v.dyn && (v.concrete.isDouble() || v.concrete.isInt() || v.concrete.isBool())) {
      return Scalar(p + "/scalar", Number(v.concrete), type);
    }
    QD_ASSIGN_OR_RETURN(std::string t, Tensor(n, v));
    const at::ScalarType have = v.concrete.toTensor().scalar_type();
    if (have == type) return t;
    return g_.Op("Cast", Unique(p + "/Cast"), {t},
                 {Attribute{"to", static_cast<int64_t>(OnnxType(type))}});
  }

  // ---- operators ----

  StatusOr<std::string> Conv(const Node* n, const std::string& p, size_t x, size_t w, size_t b,
                             std::vector<int64_t> stride, std::vector<int64_t> padding,
                             std::vector<int64_t> dilation, int64_t groups, bool transposed,
                             std::vector<int64_t> output_padding) {
    if (Rank(n, x) != 4 || Rank(n, w) != 4) {
      return Refuse(n, std::string(n->kind().toQualString()) + " other than 2-D and batched");
    }
    stride = Pair(stride);
    padding = Pair(padding);
    dilation = Pair(dilation);
    QD_ASSIGN_OR_RETURN(std::string xs, In(n, x));
    QD_ASSIGN_OR_RETURN(std::string ws, In(n, w));
    std::vector<std::string> inputs = {xs, ws};
    if (!C(n, b).isNone()) {
      QD_ASSIGN_OR_RETURN(std::string bs, In(n, b));
      inputs.push_back(bs);
    }
    std::vector<Attribute> attrs = {
        {"strides", stride},
        {"pads", std::vector<int64_t>{padding[0], padding[1], padding[0], padding[1]}},
        {"dilations", dilation},
        {"group", groups}};
    if (transposed) {
      attrs.push_back({"output_padding", Pair(output_padding)});
      return g_.Op("ConvTranspose", Unique(p + "/ConvTranspose"), inputs, attrs);
    }
    return g_.Op("Conv", Unique(p + "/Conv"), inputs, attrs);
  }

  StatusOr<std::string> Unary(const std::string& op, const Node* n, const std::string& p,
                              const std::vector<Attribute>& attrs = {}) {
    QD_ASSIGN_OR_RETURN(std::string x, In(n, 0));
    return g_.Op(op, Unique(p + "/" + op), {x}, attrs);
  }

  StatusOr<std::string> Clip(const Node* n, const std::string& p, double lo, double hi) {
    QD_ASSIGN_OR_RETURN(std::string x, In(n, 0));
    const at::ScalarType t = C(n, 0).toTensor().scalar_type();
    return g_.Op("Clip", Unique(p + "/Clip"),
                 {x, Scalar(p + "/min", lo, t), Scalar(p + "/max", hi, t)});
  }

  StatusOr<std::string> Reshape(const Node* n, const std::string& p, const std::string& x,
                                const std::vector<int64_t>& shape) {
    return g_.Op("Reshape", Unique(p + "/Reshape"), {x, I64(p + "/shape", shape)});
  }

  StatusOr<std::string> Translate(const Node* n, const std::string& kind, const at::Tensor& out) {
    const std::string p = "/" + Where(n);
    // Arithmetic.
    static const std::map<std::string, std::string> kBinary = {
        {"aten::add", "Add"},  {"aten::add_", "Add"}, {"aten::sub", "Sub"},
        {"aten::sub_", "Sub"}, {"aten::mul", "Mul"},  {"aten::mul_", "Mul"},
        {"aten::div", "Div"},  {"aten::div_", "Div"}, {"aten::rsub", "Sub"}};
    if (auto b = kBinary.find(kind); b != kBinary.end()) {
      const at::ScalarType t = out.scalar_type();
      if ((b->second == "Div") && n->inputs().size() > 2) {
        return Refuse(n, kind + " with a rounding mode");
      }
      QD_ASSIGN_OR_RETURN(std::string a, Operand(n, 0, t, p));
      QD_ASSIGN_OR_RETURN(std::string c, Operand(n, 1, t, p));
      if ((b->second == "Add" || b->second == "Sub") && n->inputs().size() > 2) {
        QD_ASSIGN_OR_RETURN(c10::IValue alpha, Arg(n, 2));
        const double al = Number(alpha);
        if (al != 1.0) {
          c = g_.Op("Mul", Unique(p + "/Alpha"), {c, Scalar(p + "/alpha", al, t)});
        }
      }
      if (kind == "aten::rsub") std::swap(a, c);
      if (kind == "aten::rsub" && n->inputs().size() > 2 && Number(C(n, 2)) != 1.0) {
        return Refuse(n, "aten::rsub with alpha");
      }
      return g_.Op(b->second, Unique(p + "/" + b->second), {a, c});
    }
    // Elementwise activations and functions.
    static const std::map<std::string, std::string> kUnary = {
        {"aten::relu", "Relu"},        {"aten::relu_", "Relu"}, {"aten::sigmoid", "Sigmoid"},
        {"aten::sigmoid_", "Sigmoid"}, {"aten::tanh", "Tanh"},  {"aten::tanh_", "Tanh"},
        {"aten::neg", "Neg"},          {"aten::sin", "Sin"},    {"aten::cos", "Cos"},
        {"aten::exp", "Exp"},          {"aten::sqrt", "Sqrt"},  {"aten::abs", "Abs"},
        {"aten::log", "Log"},          {"aten::erf", "Erf"},    {"aten::reciprocal", "Reciprocal"}};
    if (auto u = kUnary.find(kind); u != kUnary.end()) return Unary(u->second, n, p);
    if (kind == "aten::silu" || kind == "aten::silu_") {
      QD_ASSIGN_OR_RETURN(std::string x, In(n, 0));
      return g_.Op("Mul", Unique(p + "/SiLU"), {x, g_.Op("Sigmoid", Unique(p + "/Sigmoid"), {x})});
    }
    if (kind == "aten::gelu" || kind == "aten::gelu_") {
      QD_ASSIGN_OR_RETURN(std::string x, In(n, 0));
      std::string approx = "none";
      if (n->inputs().size() > 1) {
        QD_ASSIGN_OR_RETURN(c10::IValue a, Arg(n, 1));
        approx = a.toStringRef();
      }
      const at::ScalarType t = out.scalar_type();
      std::string inner;
      if (approx == "none") {  // 0.5 x (1 + erf(x / sqrt 2))
        inner = g_.Op(
            "Erf", Unique(p + "/Erf"),
            {g_.Op("Div", Unique(p + "/DivSqrt2"), {x, Scalar(p + "/sqrt2", std::sqrt(2.0), t)})});
      } else if (approx == "tanh") {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        const std::string x3 =
            g_.Op("Mul", Unique(p + "/Cube"), {x, g_.Op("Mul", Unique(p + "/Square"), {x, x})});
        const std::string sum = g_.Op(
            "Add", Unique(p + "/AddCube"),
            {x, g_.Op("Mul", Unique(p + "/MulCoef"), {x3, Scalar(p + "/coef", 0.044715, t)})});
        inner = g_.Op(
            "Tanh", Unique(p + "/Tanh"),
            {g_.Op("Mul", Unique(p + "/MulK"), {sum, Scalar(p + "/k", std::sqrt(2.0 / M_PI), t)})});
      } else {
        return Refuse(n, "aten::gelu with approximate='" + approx + "'");
      }
      const std::string one_plus =
          g_.Op("Add", Unique(p + "/AddOne"), {inner, Scalar(p + "/one", 1.0, t)});
      return g_.Op(
          "Mul", Unique(p + "/Half"),
          {g_.Op("Mul", Unique(p + "/GeluMul"), {x, one_plus}), Scalar(p + "/half", 0.5, t)});
    }
    if (kind == "aten::hardtanh" || kind == "aten::hardtanh_") {
      QD_ASSIGN_OR_RETURN(c10::IValue lo, Arg(n, 1));
      QD_ASSIGN_OR_RETURN(c10::IValue hi, Arg(n, 2));
      return Clip(n, p, Number(lo), Number(hi));
    }
    if (kind == "aten::relu6" || kind == "aten::relu6_") return Clip(n, p, 0, 6);
    if (kind == "aten::clamp" || kind == "aten::clamp_") {
      QD_ASSIGN_OR_RETURN(c10::IValue lo, Arg(n, 1));
      QD_ASSIGN_OR_RETURN(c10::IValue hi, Arg(n, 2));
      if ((!lo.isNone() && !lo.isScalar()) || (!hi.isNone() && !hi.isScalar())) {
        return Refuse(n, kind + " with tensor bounds");
      }
      return Clip(n, p, lo.isNone() ? -std::numeric_limits<double>::infinity() : Number(lo),
                  hi.isNone() ? std::numeric_limits<double>::infinity() : Number(hi));
    }
    if (kind == "aten::hardsigmoid" || kind == "aten::hardsigmoid_") {
      return Unary("HardSigmoid", n, p, {Attribute{"alpha", 1.0f / 6}, Attribute{"beta", 0.5f}});
    }
    if (kind == "aten::hardswish" || kind == "aten::hardswish_") {  // x * hardsigmoid(x)
      QD_ASSIGN_OR_RETURN(std::string x, In(n, 0));
      return g_.Op("Mul", Unique(p + "/HardSwish"),
                   {x, g_.Op("HardSigmoid", Unique(p + "/HardSigmoid"), {x},
                             {Attribute{"alpha", 1.0f / 6}, Attribute{"beta", 0.5f}})});
    }
    if (kind == "aten::leaky_relu" || kind == "aten::leaky_relu_") {
      QD_ASSIGN_OR_RETURN(c10::IValue slope, Arg(n, 1));
      return Unary("LeakyRelu", n, p, {Attribute{"alpha", static_cast<float>(Number(slope))}});
    }
    if (kind == "aten::softmax" || kind == "aten::log_softmax") {
      QD_ASSIGN_OR_RETURN(c10::IValue dim, Arg(n, 1));
      if (n->inputs().size() > 2 && !C(n, 2).isNone()) return Refuse(n, kind + " with a dtype");
      return Unary(kind == "aten::softmax" ? "Softmax" : "LogSoftmax", n, p,
                   {Attribute{"axis", Axis(dim.toInt(), Rank(n, 0))}});
    }
    // Convolutions and matrix products.
    if (kind == "aten::conv2d") {
      QD_ASSIGN_OR_RETURN(std::vector<int64_t> stride, Ints(n, 3));
      QD_ASSIGN_OR_RETURN(c10::IValue pad, Arg(n, 4));
      QD_ASSIGN_OR_RETURN(std::vector<int64_t> dilation, Ints(n, 5));
      QD_ASSIGN_OR_RETURN(c10::IValue groups, Arg(n, 6));
      std::vector<int64_t> padding;
      if (pad.isString()) {
        if (pad.toStringRef() == "valid") {
          padding = {0, 0};
        } else {
          return Refuse(n, "aten::conv2d with padding='" + pad.toStringRef() + "'");
        }
      } else {
        padding = pad.toIntVector();
      }
      return Conv(n, p, 0, 1, 2, stride, padding, dilation, groups.toInt(), false, {});
    }
    if (kind == "aten::_convolution") {
      QD_ASSIGN_OR_RETURN(std::vector<int64_t> stride, Ints(n, 3));
      QD_ASSIGN_OR_RETURN(std::vector<int64_t> padding, Ints(n, 4));
      QD_ASSIGN_OR_RETURN(std::vector<int64_t> dilation, Ints(n, 5));
      QD_ASSIGN_OR_RETURN(c10::IValue transposed, Arg(n, 6));
      QD_ASSIGN_OR_RETURN(std::vector<int64_t> output_padding, Ints(n, 7));
      QD_ASSIGN_OR_RETURN(c10::IValue groups, Arg(n, 8));
      return Conv(n, p, 0, 1, 2, stride, padding, dilation, groups.toInt(), transposed.toBool(),
                  output_padding);
    }
    if (kind == "aten::conv_transpose2d") {
      QD_ASSIGN_OR_RETURN(std::vector<int64_t> stride, Ints(n, 3));
      QD_ASSIGN_OR_RETURN(std::vector<int64_t> padding, Ints(n, 4));
      QD_ASSIGN_OR_RETURN(std::vector<int64_t> output_padding, Ints(n, 5));
      QD_ASSIGN_OR_RETURN(c10::IValue groups, Arg(n, 6));
      QD_ASSIGN_OR_RETURN(std::vector<int64_t> dilation, Ints(n, 7));
      return Conv(n, p, 0, 1, 2, stride, padding, dilation, groups.toInt(), true, output_padding);
    }
    if (kind == "aten::linear") {
      QD_ASSIGN_OR_RETURN(std::string x, In(n, 0));
      QD_ASSIGN_OR_RETURN(std::string w, In(n, 1));
      std::string b;
      if (!C(n, 2).isNone()) {
        QD_ASSIGN_OR_RETURN(b, In(n, 2));
      }
      if (Rank(n, 0) == 2) {
        std::vector<std::string> inputs = {x, w};
        if (!b.empty()) inputs.push_back(b);
        return g_.Op("Gemm", Unique(p + "/Gemm"), inputs, {Attribute{"transB", int64_t{1}}});
      }
      const std::string wt = g_.Op("Transpose", Unique(p + "/Transpose"), {w},
                                   {Attribute{"perm", std::vector<int64_t>{1, 0}}});
      std::string y = g_.Op("MatMul", Unique(p + "/MatMul"), {x, wt});
      if (!b.empty()) y = g_.Op("Add", Unique(p + "/AddBias"), {y, b});
      return y;
    }
    if (kind == "aten::matmul" || kind == "aten::mm" || kind == "aten::bmm") {
      QD_ASSIGN_OR_RETURN(std::string a, In(n, 0));
      QD_ASSIGN_OR_RETURN(std::string b, In(n, 1));
      return g_.Op("MatMul", Unique(p + "/MatMul"), {a, b});
    }
    if (kind == "aten::addmm") {
      QD_ASSIGN_OR_RETURN(std::string c, In(n, 0));
      QD_ASSIGN_OR_RETURN(std::string a, In(n, 1));
      QD_ASSIGN_OR_RETURN(std::string b, In(n, 2));
      QD_ASSIGN_OR_RETURN(c10::IValue beta, Arg(n, 3));
      QD_ASSIGN_OR_RETURN(c10::IValue alpha, Arg(n, 4));
      return g_.Op("Gemm", Unique(p + "/Gemm"), {a, b, c},
                   {Attribute{"alpha", static_cast<float>(Number(alpha))},
                    Attribute{"beta", static_cast<float>(Number(beta))}});
    }
    // Normalization and pooling.
    if (kind == "aten::batch_norm") {
      QD_ASSIGN_OR_RETURN(c10::IValue training, Arg(n, 5));
      if (training.toBool()) return Refuse(n, "aten::batch_norm in training mode");
      QD_ASSIGN_OR_RETURN(c10::IValue eps, Arg(n, 7));
      const int64_t c = C(n, 0).toTensor().size(1);
      QD_ASSIGN_OR_RETURN(std::string x, In(n, 0));
      std::vector<std::string> inputs = {x};
      for (size_t i : {1, 2, 3, 4}) {
        if (C(n, i).isNone()) {
          at::Tensor fill = i == 1 || i == 4 ? at::ones({c}) : at::zeros({c});
          inputs.push_back(g_.AddInitializer(Unique(p + "/bn_default"), DataType::kFloat, {c},
                                             onnx::RawBytes(fill)));
        } else {
          QD_ASSIGN_OR_RETURN(std::string t, In(n, i));
          inputs.push_back(t);
        }
      }
      return g_.Op("BatchNormalization", Unique(p + "/BatchNormalization"), inputs,
                   {Attribute{"epsilon", static_cast<float>(Number(eps))}});
    }
    if (kind == "aten::max_pool2d" || kind == "aten::avg_pool2d") {
      if (Rank(n, 0) != 4) return Refuse(n, kind + " of an unbatched input");
      const bool max = kind == "aten::max_pool2d";
      QD_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, Ints(n, 1));
      QD_ASSIGN_OR_RETURN(std::vector<int64_t> stride, Ints(n, 2));
      QD_ASSIGN_OR_RETURN(std::vector<int64_t> padding, Ints(n, 3));
      kernel = Pair(kernel);
      stride = stride.empty() ? kernel : Pair(stride);
      padding = Pair(padding);
      std::vector<Attribute> attrs = {
          {"kernel_shape", kernel},
          {"strides", stride},
          {"pads", std::vector<int64_t>{padding[0], padding[1], padding[0], padding[1]}}};
      if (max) {
        QD_ASSIGN_OR_RETURN(std::vector<int64_t> dilation, Ints(n, 4));
        QD_ASSIGN_OR_RETURN(c10::IValue ceil, Arg(n, 5));
        attrs.push_back({"dilations", Pair(dilation)});
        attrs.push_back({"ceil_mode", int64_t{ceil.toBool()}});
      } else {
        QD_ASSIGN_OR_RETURN(c10::IValue ceil, Arg(n, 4));
        QD_ASSIGN_OR_RETURN(c10::IValue include_pad, Arg(n, 5));
        if (n->inputs().size() > 6 && !C(n, 6).isNone()) {
          return Refuse(n, "aten::avg_pool2d with divisor_override");
        }
        attrs.push_back({"ceil_mode", int64_t{ceil.toBool()}});
        attrs.push_back({"count_include_pad", int64_t{include_pad.toBool()}});
      }
      return Unary(max ? "MaxPool" : "AveragePool", n, p, attrs);
    }
    if (kind == "aten::adaptive_avg_pool2d") {
      if (Rank(n, 0) != 4) return Refuse(n, kind + " of an unbatched input");
      QD_ASSIGN_OR_RETURN(std::vector<int64_t> size, Ints(n, 1));
      size = Pair(size);
      const at::Tensor x = C(n, 0).toTensor();
      const int64_t h = x.size(2), w = x.size(3);
      if (size[0] == 1 && size[1] == 1) return Unary("GlobalAveragePool", n, p);
      if (size[0] > 0 && size[1] > 0 && h % size[0] == 0 && w % size[1] == 0) {
        const std::vector<int64_t> k = {h / size[0], w / size[1]};
        return Unary("AveragePool", n, p, {{"kernel_shape", k}, {"strides", k}});
      }
      return Refuse(n, "aten::adaptive_avg_pool2d to a size that does not divide the input");
    }
    // Shapes.
    if (kind == "aten::flatten") {
      QD_ASSIGN_OR_RETURN(c10::IValue s, Arg(n, 1));
      QD_ASSIGN_OR_RETURN(c10::IValue e, Arg(n, 2));
      const at::Tensor x = C(n, 0).toTensor();
      const int64_t r = x.dim(), start = Axis(s.toInt(), r), end = Axis(e.toInt(), r);
      QD_ASSIGN_OR_RETURN(std::string xs, In(n, 0));
      if (r == 0 || start >= end) return g_.Op("Identity", Unique(p + "/Identity"), {xs});
      std::vector<int64_t> shape(start, 0);
      shape.push_back(-1);
      for (int64_t i = end + 1; i < r; ++i) shape.push_back(x.size(i));
      return Reshape(n, p, xs, shape);
    }
    if (kind == "aten::view" || kind == "aten::reshape") {
      const Val& sv = V(n->input(1));
      if (sv.dyn) return Refuse(n, kind + " to a shape computed from the inputs");
      std::vector<int64_t> shape = sv.concrete.toIntVector();
      const at::Tensor x = C(n, 0).toTensor();
      // The batch dimension copied from the input stays symbolic.
      if (sv.batch && !shape.empty() && x.dim() > 0 && shape[0] == x.size(0)) shape[0] = 0;
      QD_ASSIGN_OR_RETURN(std::string xs, In(n, 0));
      return Reshape(n, p, xs, shape);
    }
    if (kind == "aten::cat" || kind == "aten::concat") {
      const Val& list = V(n->input(0));
      QD_ASSIGN_OR_RETURN(c10::IValue dim, Arg(n, 1));
      std::vector<std::string> inputs;
      for (const Val& e : list.elems) {
        QD_ASSIGN_OR_RETURN(std::string t, Tensor(n, e));
        inputs.push_back(t);
      }
      return g_.Op("Concat", Unique(p + "/Concat"), inputs,
                   {Attribute{"axis", Axis(dim.toInt(), out.dim())}});
    }
    if (kind == "aten::unsqueeze" || kind == "aten::unsqueeze_") {
      QD_ASSIGN_OR_RETURN(c10::IValue dim, Arg(n, 1));
      QD_ASSIGN_OR_RETURN(std::string x, In(n, 0));
      return g_.Op("Unsqueeze", Unique(p + "/Unsqueeze"),
                   {x, I64(p + "/axes", {Axis(dim.toInt(), out.dim())})});
    }
    if (kind == "aten::squeeze" || kind == "aten::squeeze_") {
      const at::Tensor x = C(n, 0).toTensor();
      std::vector<int64_t> axes;
      if (n->inputs().size() > 1) {
        QD_ASSIGN_OR_RETURN(c10::IValue dim, Arg(n, 1));
        const int64_t a = Axis(dim.toInt(), x.dim());
        if (x.size(a) == 1) axes.push_back(a);
      } else {
        for (int64_t i = 1; i < x.dim(); ++i) {
          if (x.size(i) == 1) axes.push_back(i);
        }
      }
      QD_ASSIGN_OR_RETURN(std::string xs, In(n, 0));
      if (axes.empty()) return g_.Op("Identity", Unique(p + "/Identity"), {xs});
      return g_.Op("Squeeze", Unique(p + "/Squeeze"), {xs, I64(p + "/axes", axes)});
    }
    if (kind == "aten::slice") {
      const at::Tensor x = C(n, 0).toTensor();
      QD_ASSIGN_OR_RETURN(c10::IValue dim, Arg(n, 1));
      QD_ASSIGN_OR_RETURN(c10::IValue start, Arg(n, 2));
      QD_ASSIGN_OR_RETURN(c10::IValue end, Arg(n, 3));
      QD_ASSIGN_OR_RETURN(c10::IValue step, Arg(n, 4));
      const int64_t axis = Axis(dim.toInt(), x.dim());
      const int64_t s = start.isNone() ? 0 : start.toInt();
      const int64_t e = end.isNone() ? std::numeric_limits<int64_t>::max() : end.toInt();
      QD_ASSIGN_OR_RETURN(std::string xs, In(n, 0));
      if (s == 0 && e >= x.size(axis) && step.toInt() == 1 && axis != 0) {
        return g_.Op("Identity", Unique(p + "/Identity"), {xs});
      }
      return g_.Op("Slice", Unique(p + "/Slice"),
                   {xs, I64(p + "/starts", {s}), I64(p + "/ends", {e}), I64(p + "/axes", {axis}),
                    I64(p + "/steps", {step.toInt()})});
    }
    if (kind == "aten::select") {
      QD_ASSIGN_OR_RETURN(c10::IValue dim, Arg(n, 1));
      QD_ASSIGN_OR_RETURN(c10::IValue index, Arg(n, 2));
      QD_ASSIGN_OR_RETURN(std::string x, In(n, 0));
      return g_.Op("Gather", Unique(p + "/Gather"), {x, I64(p + "/index", {index.toInt()}, true)},
                   {Attribute{"axis", Axis(dim.toInt(), Rank(n, 0))}});
    }
    if (kind == "aten::transpose" || kind == "aten::permute" || kind == "aten::t") {
      const int64_t r = Rank(n, 0);
      std::vector<int64_t> perm(r);
      for (int64_t i = 0; i < r; ++i) perm[i] = i;
      if (kind == "aten::transpose") {
        QD_ASSIGN_OR_RETURN(c10::IValue a, Arg(n, 1));
        QD_ASSIGN_OR_RETURN(c10::IValue b, Arg(n, 2));
        std::swap(perm[Axis(a.toInt(), r)], perm[Axis(b.toInt(), r)]);
      } else if (kind == "aten::permute") {
        QD_ASSIGN_OR_RETURN(perm, Ints(n, 1));
        for (int64_t& d : perm) d = Axis(d, r);
      } else if (r == 2) {
        perm = {1, 0};
      }
      return Unary("Transpose", n, p, {Attribute{"perm", perm}});
    }
    if (kind == "aten::to" || kind == "aten::type_as" || kind == "aten::float") {
      QD_ASSIGN_OR_RETURN(std::string x, In(n, 0));
      if (C(n, 0).toTensor().scalar_type() == out.scalar_type()) {
        return g_.Op("Identity", Unique(p + "/Identity"), {x});
      }
      if (!IsSupportedType(out.scalar_type())) return Refuse(n, kind + " to this type");
      return g_.Op("Cast", Unique(p + "/Cast"), {x},
                   {Attribute{"to", static_cast<int64_t>(OnnxType(out.scalar_type()))}});
    }
    if (kind == "aten::contiguous" || kind == "aten::detach" || kind == "aten::clone" ||
        kind == "aten::alias" || kind == "prim::unchecked_cast") {
      QD_ASSIGN_OR_RETURN(std::string x, In(n, 0));
      return g_.Op("Identity", Unique(p + "/Identity"), {x});
    }
    if (kind == "aten::dropout" || kind == "aten::dropout_" || kind == "aten::feature_dropout" ||
        kind == "aten::alpha_dropout") {
      QD_ASSIGN_OR_RETURN(c10::IValue train, Arg(n, 2));
      if (train.toBool()) return Refuse(n, kind + " in training mode");
      QD_ASSIGN_OR_RETURN(std::string x, In(n, 0));
      return g_.Op("Identity", Unique(p + "/Identity"), {x});
    }
    if (kind == "aten::mean" || kind == "aten::sum") {
      const std::string op = kind == "aten::mean" ? "ReduceMean" : "ReduceSum";
      QD_ASSIGN_OR_RETURN(std::string x, In(n, 0));
      const int64_t r = Rank(n, 0);
      std::vector<int64_t> axes;
      bool keep = false;
      if (n->inputs().size() >= 3 && !C(n, 1).isNone() && C(n, 1).isIntList()) {
        axes = C(n, 1).toIntVector();
        for (int64_t& a : axes) a = Axis(a, r);
        keep = C(n, 2).toBool();
        if (n->inputs().size() > 3 && !C(n, 3).isNone()) return Refuse(n, kind + " with a dtype");
      } else if (n->inputs().size() > 1 && !C(n, 1).isNone()) {
        return Refuse(n, kind + " with a dtype");
      } else {
        for (int64_t i = 0; i < r; ++i) axes.push_back(i);
      }
      if (op == "ReduceSum" || opset_ >= 18) {
        return g_.Op(op, Unique(p + "/" + op), {x, I64(p + "/axes", axes)},
                     {Attribute{"keepdims", int64_t{keep}}});
      }
      return g_.Op(op, Unique(p + "/" + op), {x},
                   {Attribute{"axes", axes}, Attribute{"keepdims", int64_t{keep}}});
    }
    if (kind == "aten::upsample_nearest2d" || kind == "aten::upsample_bilinear2d") {
      const at::Tensor x = C(n, 0).toTensor();
      if (x.dim() != 4) return Refuse(n, kind + " of an unbatched input");
      const bool nearest = kind == "aten::upsample_nearest2d";
      // Scales as PyTorch takes them: the given factors, else out / in.
      std::vector<double> scales = {static_cast<double>(out.size(2)) / x.size(2),
                                    static_cast<double>(out.size(3)) / x.size(3)};
      const size_t factors = nearest ? 2 : 3;
      if (n->inputs().size() == factors + 1 && C(n, factors).isDoubleList()) {
        auto f = C(n, factors).toDoubleVector();
        if (f.size() == 2) scales = f;
      }
      std::vector<Attribute> attrs;
      if (nearest) {
        attrs = {{"mode", std::string("nearest")},
                 {"coordinate_transformation_mode", std::string("asymmetric")},
                 {"nearest_mode", std::string("floor")}};
      } else {
        QD_ASSIGN_OR_RETURN(c10::IValue align, Arg(n, 2));
        attrs = {{"mode", std::string("linear")},
                 {"coordinate_transformation_mode",
                  std::string(align.toBool() ? "align_corners" : "pytorch_half_pixel")}};
      }
      at::Tensor s =
          at::tensor({1.0f, 1.0f, static_cast<float>(scales[0]), static_cast<float>(scales[1])});
      const std::string sn =
          g_.AddInitializer(Unique(p + "/scales"), DataType::kFloat, {4}, onnx::RawBytes(s));
      QD_ASSIGN_OR_RETURN(std::string xs, In(n, 0));
      return g_.Op("Resize", Unique(p + "/Resize"), {xs, "", sn}, attrs);
    }
    if (kind == "aten::constant_pad_nd" || kind == "aten::pad") {
      const at::Tensor x = C(n, 0).toTensor();
      QD_ASSIGN_OR_RETURN(std::vector<int64_t> pad, Ints(n, 1));
      double value = 0;
      if (kind == "aten::pad") {
        QD_ASSIGN_OR_RETURN(c10::IValue mode, Arg(n, 2));
        if (mode.toStringRef() != "constant")
          return Refuse(n, "aten::pad in mode " + mode.toStringRef());
        if (n->inputs().size() > 3 && !C(n, 3).isNone()) value = Number(C(n, 3));
      } else if (n->inputs().size() > 2) {
        value = Number(C(n, 2));
      }
      const int64_t r = x.dim();
      std::vector<int64_t> pads(2 * r, 0);
      for (size_t i = 0; 2 * i + 1 < pad.size(); ++i) {
        pads[r - 1 - i] = pad[2 * i];
        pads[2 * r - 1 - i] = pad[2 * i + 1];
      }
      QD_ASSIGN_OR_RETURN(std::string xs, In(n, 0));
      return g_.Op("Pad", Unique(p + "/Pad"),
                   {xs, I64(p + "/pads", pads), Scalar(p + "/value", value, x.scalar_type())});
    }
    return Refuse(n, kind);
  }

  ScriptQuantizer& q_;
  bool emit_quantizers_;
  int64_t opset_;
  onnx::GraphBuilder g_;
  std::unordered_map<const Value*, Val> vals_;
  std::unordered_map<const c10::ivalue::Object*, std::string> module_names_;
  std::unordered_map<const c10::ivalue::Object*, size_t> layer_of_;
  std::unordered_map<const c10::TensorImpl*, std::string> initializers_;
  std::vector<at::Tensor> kept_;  // keeps initializers_' keys alive
  std::map<std::string, int> used_names_;
  std::vector<std::string> float_weights_;
  std::map<std::string, std::string> weight_forms_;
};

Status CheckActivation(const quant_modules::ActivationQuantizer& a, bool input,
                       const std::string& what) {
  if (!a.enabled()) return OkStatus();
  Status held =
      exporter::CheckExportSpec(exporter::ExportFormat::kOnnxQdq, *a.spec(),
                                input ? quant::TensorRole::kInput : quant::TensorRole::kOutput);
  if (!held.ok()) return Status(held).Prepend(what + ": ");
  return OkStatus();
}

std::string DescribeActivation(const quant_modules::ActivationQuantizer& a) {
  if (!a.enabled()) return "float";
  const char* form = quant::IsFp8Type(a.spec()->dtype) ? "Cast to FP8 and back"
                                                       : "QuantizeLinear + DequantizeLinear";
  return quant::DescribeSpec(*a.spec()) + ": " + form;
}

}  // namespace

Status CheckScriptOnnxQuantizers(const ScriptQuantizer& quantizer) {
  Status bad;
  std::string first;
  for (const QuantizedLayer& l : quantizer.layers()) {
    for (const auto* a : {&l.input, &l.output}) {
      const std::string what = l.layer.name + (a == &l.input ? " input" : " output");
      Status s = CheckActivation(*a, a == &l.input, what);
      if (s.ok()) continue;
      if (first.empty()) {
        first = s.message();
        bad = InvalidArgumentError(first);
      }
      bad.AddViolation(what, s.message());
    }
  }
  return bad;
}

Status CheckScriptOnnxGraph(ScriptQuantizer& quantizer,
                            const std::vector<at::Tensor>& example_inputs) {
  try {
    OnnxWalker walker(quantizer, /*emit_quantizers=*/false, ChooseOpset(quantizer));
    return walker.Run(example_inputs);
  } catch (const std::exception& e) {
    return InvalidArgumentError("onnx: walking forward: " + FirstLine(e));
  }
}

StatusOr<ScriptOnnxExportResult> ExportScriptOnnx(ScriptQuantizer& quantizer,
                                                  const ScriptOnnxExportOptions& options) {
  QD_RETURN_IF_ERROR(CheckScriptOnnxQuantizers(quantizer));
  if (options.example_inputs.empty()) {
    return FailedPreconditionError(
        "onnx: the export walks forward on a batch of the job's data: give a calibration or "
        "evaluation dataset");
  }
  QD_RETURN_IF_ERROR(quantizer.UseQuantizedWeights());
  const int64_t opset = ChooseOpset(quantizer);
  OnnxWalker walker(quantizer, /*emit_quantizers=*/true, opset);
  std::string bytes;
  try {
    QD_RETURN_IF_ERROR(walker.Run(options.example_inputs));
    onnx::GraphBuilder::ModelInfo info;
    info.opset = opset;
    info.ir_version = IrVersion(opset);
    info.doc_string = "quantd ONNX QDQ export of a TorchScript model";
    QD_ASSIGN_OR_RETURN(bytes, walker.graph().Serialize(info));
  } catch (const std::exception& e) {
    return InternalError("onnx: writing the graph: " + FirstLine(e));
  }
  QD_ASSIGN_OR_RETURN(exporter::StagedDirectory staged,
                      exporter::StagedDirectory::Create(options.output_dir, options.overwrite,
                                                        options.output_owner));
  {
    std::ofstream f(staged.staging_path() + "/model.onnx", std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) return Status(StatusCode::kUnavailable, "writing model.onnx failed");
  }
  if (options.quant_config != nullptr) {
    std::ofstream f(staged.staging_path() + "/quantization_config.json");
    f << config::WriteQuarkJsonForExport(*options.quant_config, "fake_quantized", 2) << "\n";
    if (!f) return InternalError("writing quantization_config.json failed");
  }
  nlohmann::json layers = nlohmann::json::array();
  for (const QuantizedLayer& l : quantizer.layers()) {
    auto form = walker.weight_forms().find(l.layer.name);
    layers.push_back({{"name", l.layer.name},
                      {"type", l.layer.type},
                      {"weight", form != walker.weight_forms().end() ? form->second : "float"},
                      {"input", DescribeActivation(l.input)},
                      {"output", DescribeActivation(l.output)}});
  }
  const nlohmann::json info = {{"opset", opset},
                               {"ir_version", IrVersion(opset)},
                               {"inputs_batch_dimension", "batch"},
                               {"layers", layers},
                               {"float_weights", walker.float_weights()}};
  {
    std::ofstream f(staged.staging_path() + "/onnx_export.json");
    f << info.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!f) return InternalError("writing onnx_export.json failed");
  }
  QD_RETURN_IF_ERROR(staged.Commit());
  ScriptOnnxExportResult result;
  QD_ASSIGN_OR_RETURN(result.artifact, exporter::DescribeArtifact(exporter::ExportFormat::kOnnxQdq,
                                                                  staged, "model.onnx"));
  result.artifact.consumers = exporter::ArtifactConsumers(exporter::ExportFormat::kOnnxQdq, {});
  result.opset = opset;
  result.float_weights = walker.float_weights();
  return result;
}

}  // namespace quantd::torchscript
