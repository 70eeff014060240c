#include "worker/export/onnx/onnx_qdq.h"

#include <c10/util/Exception.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "worker/common/bounded_json.h"
#include "worker/common/cancellation.h"
#include "worker/export/export_support.h"
#include "worker/export/hf/hf_files.h"
#include "worker/export/onnx/onnx_proto.h"
#include "worker/export/onnx/onnx_qdq_nodes.h"
#include "worker/models/layer_shapes.h"
#include "worker/models/transformer_ops.h"
#include "worker/quant/fake_quant.h"

namespace quantd::exporter {

namespace fs = std::filesystem;
using nlohmann::json;
using onnx::Attribute;
using onnx::DataType;
using onnx::Dim;
using quant::QScheme;
using quant::QuantSpec;

namespace {

using onnx::AddActivationQdq;
using onnx::AddDequantizedWeight;
using onnx::CodeType;
using onnx::Is4Bit;
using onnx::RawNibbles;

std::string Raw(const at::Tensor& t) { return onnx::RawBytes(t); }

std::vector<int64_t> Dims(const at::Tensor& t) { return t.sizes().vec(); }

// Weights written as onnxruntime's MatMulNBits (com.microsoft): 4-bit codes
// in blocks along the input axis whose size MatMulNBits takes (a power of
// two, at least 16). The standard form, a blocked DequantizeLinear feeding
// MatMul, is what onnxruntime's default optimization level rewrites into
// MatMulNBits itself, but with accuracy_level 4 (session option
// session.qdq_matmulnbits_accuracy_level): the activations are then
// quantized to int8 per block, and the logits moved by 1.7% of the largest
// on stories260K (onnx_peer_test). Written directly, the node carries
// accuracy_level 1, float32 arithmetic, at every optimization level.
bool IsMatMulNBitsWeight(const QuantSpec& s) {
  if (!Is4Bit(s) || s.qscheme != QScheme::kPerGroup) return false;
  const int g = quant::EffectiveGroupSize(s);
  return g >= 16 && (g & (g - 1)) == 0;
}

struct OpsetChoice {
  int64_t opset = 13;
  int64_t ir_version = 7;
  bool matmul_nbits = false;  // imports com.microsoft
};

OpsetChoice ChooseOpset(const QuantizedModel& model) {
  bool fp8 = false, blocked = false;
  auto visit = [&](const QuantSpec& s, bool weight) {
    if (quant::IsFp8Type(s.dtype)) fp8 = true;
    if (Is4Bit(s) || (weight && s.qscheme == QScheme::kPerGroup)) blocked = true;
  };
  bool nbits = false;
  for (const QuantizedLayer& l : model.layers()) {
    if (l.weight) {
      if (IsMatMulNBitsWeight(*l.weight)) {
        nbits = true;
      } else {
        visit(*l.weight, true);
      }
    }
    if (l.input) visit(l.input->spec, false);
    if (l.output) visit(l.output->spec, false);
  }
  if (blocked) return {21, 10, nbits};
  if (fp8) return {19, 9, nbits};
  return {13, 7, nbits};
}

class LlamaGraph {
 public:
  LlamaGraph(const QuantizedModel& model, const OpsetChoice& opset, int64_t max_len)
      : m_(model), c_(model.config()), opset_(opset), max_len_(max_len), g_("quantd") {}

  Status Build(const ExportProgress& progress) {
    const models::ModelLayout layout = models::GetModelLayout(c_);
    const Dim batch = std::string("batch"), seq = std::string("sequence_length");
    const Dim past = std::string("past_sequence_length");
    const Dim total = std::string("total_sequence_length");
    g_.AddInput("input_ids", DataType::kInt64, {batch, seq});
    g_.AddInput("attention_mask", DataType::kInt64, {batch, total});
    g_.AddInput("position_ids", DataType::kInt64, {batch, seq});
    for (int64_t i = 0; i < c_.num_hidden_layers; ++i) {
      for (const char* kind : {"key", "value"}) {
        g_.AddInput(PastName(i, kind), DataType::kFloat,
                    {batch, c_.num_key_value_heads, past, c_.head_dim});
      }
    }
    QD_RETURN_IF_ERROR(Prelude());
    QD_ASSIGN_OR_RETURN(at::Tensor embed, m_.Load(layout.token_embedding.name + ".weight"));
    const std::string embed_name =
        g_.AddInitializer(layout.token_embedding.name + ".weight", DataType::kFloat, Dims(embed),
                          Raw(embed.to(at::kFloat)));
    std::string h = g_.Op("Gather", "/embed/Gather", {embed_name, "input_ids"},
                          {Attribute{"axis", int64_t{0}}});
    const int total_steps = static_cast<int>(c_.num_hidden_layers) + 1;
    for (int64_t i = 0; i < c_.num_hidden_layers; ++i) {
      if (StopRequested()) return CancelledStatus("exporting block " + std::to_string(i + 1));
      QD_ASSIGN_OR_RETURN(h, Block(i, h));
      if (progress) progress(static_cast<int>(i) + 1, total_steps);
    }
    QD_ASSIGN_OR_RETURN(std::string x, RmsNorm(layout.final_norm.name, h));
    const std::string head = layout.lm_head.name;
    std::string logits;
    if (m_.original().Find(head + ".weight") != nullptr) {
      QD_ASSIGN_OR_RETURN(logits, Linear(head, x, /*has_bias=*/false));
    } else {  // tied to the token embedding
      const std::string wt = g_.Op("Transpose", "/lm_head/Transpose", {embed_name},
                                   {Attribute{"perm", std::vector<int64_t>{1, 0}}});
      logits = g_.Op("MatMul", "/lm_head/MatMul", {x, wt});
    }
    g_.OpTo("Identity", "/logits", {logits}, "logits");
    g_.AddOutput("logits", DataType::kFloat, {batch, seq, c_.vocab_size});
    for (int64_t i = 0; i < c_.num_hidden_layers; ++i) {
      for (const char* kind : {"key", "value"}) {
        g_.AddOutput(PresentName(i, kind), DataType::kFloat,
                     {batch, c_.num_key_value_heads, total, c_.head_dim});
      }
    }
    if (progress) progress(total_steps, total_steps);
    return OkStatus();
  }

  onnx::GraphBuilder& graph() { return g_; }

 private:
  std::string I64(const std::string& name, std::vector<int64_t> values, bool scalar = false) {
    at::Tensor t = at::tensor(values, at::kLong);
    if (scalar) t = t.reshape({});
    return g_.AddInitializer(name, DataType::kInt64, Dims(t), Raw(t));
  }
  std::string F32(const std::string& name, float v) {
    at::Tensor t = at::tensor(v, at::kFloat).reshape({});
    return g_.AddInitializer(name, DataType::kFloat, {}, Raw(t));
  }

  // Rotary tables gathered at position_ids, and the additive attention mask
  // of the new tokens over the cache and themselves: a key is hidden when it
  // lies after the query (causal; the query at row r sits at position
  // past + r) or where attention_mask is 0 (padding).
  Status Prelude() {
    const std::string idx1 = I64("/const/one_scalar", {1}, true);
    const std::string seq_len =
        g_.Op("Gather", "/mask/seq_len", {g_.Op("Shape", "/mask/ids_shape", {"input_ids"}), idx1},
              {Attribute{"axis", int64_t{0}}});
    const std::string total_len = g_.Op(
        "Gather", "/mask/total_len", {g_.Op("Shape", "/mask/mask_shape", {"attention_mask"}), idx1},
        {Attribute{"axis", int64_t{0}}});
    const std::string past_len = g_.Op("Sub", "/mask/past_len", {total_len, seq_len});
    const std::string axes0 = I64("/const/axes0", {0});
    const std::string axes1 = I64("/const/axes1", {1});
    const std::string axes12 = I64("/const/axes12", {1, 2});
    axes2_ = I64("/const/axes2", {2});
    try {
      models::RotaryTables t = models::MakeRotaryTables(c_, max_len_, at::kFloat, at::kCPU);
      const std::string cos =
          g_.AddInitializer("/rope/cos_table", DataType::kFloat, Dims(t.cos), Raw(t.cos));
      const std::string sin =
          g_.AddInitializer("/rope/sin_table", DataType::kFloat, Dims(t.sin), Raw(t.sin));
      // [B, S, hd] -> [B, 1, 1, S, hd], broadcast over the [B, G, R, S, hd]
      // heads.
      cos_ = g_.Op("Unsqueeze", "/rope/cos",
                   {g_.Op("Gather", "/rope/cos_Gather", {cos, "position_ids"},
                          {Attribute{"axis", int64_t{0}}}),
                    axes12});
      sin_ = g_.Op("Unsqueeze", "/rope/sin",
                   {g_.Op("Gather", "/rope/sin_Gather", {sin, "position_ids"},
                          {Attribute{"axis", int64_t{0}}}),
                    axes12});
    } catch (const c10::Error& e) {
      return InternalError(std::string("rotary tables: ") + e.what_without_backtrace());
    }
    const std::string zero = I64("/const/zero_scalar", {0}, true);
    const std::string rows =
        g_.Op("Unsqueeze", "/mask/rows",
              {g_.Op("Range", "/mask/query_positions", {past_len, total_len, idx1}), axes1});
    const std::string cols =
        g_.Op("Unsqueeze", "/mask/cols",
              {g_.Op("Range", "/mask/key_positions", {zero, total_len, idx1}), axes0});
    const std::string future = g_.Op("Greater", "/mask/future", {cols, rows});  // [S, T]
    const std::string padding =
        g_.Op("Unsqueeze", "/mask/padding",
              {g_.Op("Equal", "/mask/Equal", {"attention_mask", I64("/const/zero_i64", {0}, true)}),
               I64("/const/axes123", {1, 2, 3})});  // [B, 1, 1, 1, T]
    // The lowest float, not -inf: a row with every key hidden (a padding
    // query) then stays finite instead of filling the cache with NaN.
    mask_ = g_.Op("Where", "/mask/Where",
                  {g_.Op("Or", "/mask/Or", {future, padding}),
                   F32("/const/lowest", std::numeric_limits<float>::lowest()),
                   F32("/const/zero_f", 0.0f)});  // [B, 1, 1, S, T]
    head_scale_ = F32("/const/attn_scale",
                      static_cast<float>(1.0 / std::sqrt(static_cast<double>(c_.head_dim))));
    eps_ = F32("/const/rms_eps", static_cast<float>(c_.norm_eps));
    half_ = I64("/const/half", {c_.head_dim / 2});
    full_ = I64("/const/full", {c_.head_dim});
    last_axis_ = I64("/const/last_axis", {-1});
    zero1d_ = I64("/const/zero1d", {0});
    return OkStatus();
  }

  StatusOr<std::string> RmsNorm(const std::string& module, const std::string& x) {
    QD_ASSIGN_OR_RETURN(at::Tensor w, m_.Load(module + ".weight"));
    const std::string wn =
        g_.AddInitializer(module + ".weight", DataType::kFloat, Dims(w), Raw(w.to(at::kFloat)));
    const std::string p = "/" + module;
    const std::string sq = g_.Op("Mul", p + "/Square", {x, x});
    std::string mean;
    if (opset_.opset >= 18) {
      mean = g_.Op("ReduceMean", p + "/ReduceMean", {sq, last_axis_},
                   {Attribute{"keepdims", int64_t{1}}});
    } else {
      mean =
          g_.Op("ReduceMean", p + "/ReduceMean", {sq},
                {Attribute{"axes", std::vector<int64_t>{-1}}, Attribute{"keepdims", int64_t{1}}});
    }
    const std::string var = g_.Op("Add", p + "/AddEps", {mean, eps_});
    const std::string inv =
        g_.Op("Reciprocal", p + "/Reciprocal", {g_.Op("Sqrt", p + "/Sqrt", {var})});
    const std::string normed = g_.Op("Mul", p + "/Normalize", {x, inv});
    return g_.Op("Mul", p + "/Weight", {wn, normed});
  }

  // x -> QuantizeLinear -> DequantizeLinear with a static per-tensor
  // quantizer; FP8 as a Cast pair (onnx_qdq_nodes.h says why).
  StatusOr<std::string> Qdq(const std::string& prefix, const ActivationQuantizer& a,
                            const std::string& x) {
    if (!a.static_qparams)
      return InternalError(prefix + ": a static activation quantizer has no calibrated scale");
    return AddActivationQdq(g_, prefix, a.spec, *a.static_qparams, x);
  }

  // The codes and parameters of `module`'s quantized weight, [out, in].
  StatusOr<quant::QuantizedTensor> WeightCodes(const std::string& module, const QuantSpec& s) {
    QD_ASSIGN_OR_RETURN(at::Tensor value, m_.Load(module + ".weight"));
    QD_ASSIGN_OR_RETURN(quant::QParams qp, m_.WeightQParams(module));
    return quant::RealQuantize(value, s, qp);
  }

  // The [in, out] float weight of `module` for MatMul: DequantizeLinear of
  // its codes, a Cast of float16 / bfloat16, or float values.
  StatusOr<std::string> Weight(const std::string& module, const QuantizedLayer* layer) {
    const std::string name = module + ".weight";
    if (layer == nullptr || !layer->weight) {
      QD_ASSIGN_OR_RETURN(at::Tensor value, m_.Load(name));
      at::Tensor wt = value.to(at::kFloat).t().contiguous();
      return g_.AddInitializer(name, DataType::kFloat, Dims(wt), Raw(wt));
    }
    const QuantSpec& s = *layer->weight;
    QD_ASSIGN_OR_RETURN(quant::QuantizedTensor q, WeightCodes(module, s));
    const std::string p = "/" + module;
    if (quant::IsCastType(s.dtype)) {
      at::Tensor wt = q.codes.t().contiguous();
      const std::string w = g_.AddInitializer(name, CodeType(s), Dims(wt), Raw(wt));
      return g_.Op("Cast", p + "/Cast", {w}, {Attribute{"to", int64_t{1}}});
    }
    at::Tensor scale = q.qparams.scale;
    at::Tensor zp = q.qparams.zero_point;
    if (s.qscheme == QScheme::kPerGroup) {
      scale = scale.t();  // [in / gs, out]
      if (zp.defined()) zp = zp.t();
    }
    const int64_t axis = s.qscheme == QScheme::kPerGroup ? 0 : 1;
    return AddDequantizedWeight(g_, name, p, s, q.codes.t().contiguous(), scale, zp, axis);
  }

  StatusOr<std::string> Linear(const std::string& module, const std::string& x, bool has_bias) {
    const QuantizedLayer* layer = m_.FindLayer(module);
    std::string in = x;
    if (layer != nullptr && layer->input) {
      QD_ASSIGN_OR_RETURN(in, Qdq("/" + module + "/input", *layer->input, x));
    }
    std::string y;
    if (layer != nullptr && layer->weight && IsMatMulNBitsWeight(*layer->weight)) {
      QD_ASSIGN_OR_RETURN(y, MatMulNBits(module, *layer, in));
    } else {
      QD_ASSIGN_OR_RETURN(std::string w, Weight(module, layer));
      y = g_.Op("MatMul", "/" + module + "/MatMul", {in, w});
    }
    if (has_bias) {
      QD_ASSIGN_OR_RETURN(at::Tensor b, m_.Load(module + ".bias"));
      const std::string bn =
          g_.AddInitializer(module + ".bias", DataType::kFloat, Dims(b), Raw(b.to(at::kFloat)));
      y = g_.Op("Add", "/" + module + "/AddBias", {y, bn});
    }
    if (layer != nullptr && layer->output) {
      QD_ASSIGN_OR_RETURN(y, Qdq("/" + module + "/output", *layer->output, y));
    }
    return y;
  }

  // y = x W^T as onnxruntime's MatMulNBits: B [N, K / block, block / 2]
  // holds the unsigned codes two per byte, the first in the low nibble
  // (int4 codes + 8, so that (u - z) * scale is unchanged), scales
  // [N * K / block], zero points packed the same way per row.
  StatusOr<std::string> MatMulNBits(const std::string& module, const QuantizedLayer& layer,
                                    const std::string& x) {
    const QuantSpec& s = *layer.weight;
    QD_ASSIGN_OR_RETURN(quant::QuantizedTensor q, WeightCodes(module, s));
    const int64_t n = q.codes.size(0), k = q.codes.size(1);
    const int64_t block = quant::EffectiveGroupSize(s), blocks = k / block;
    const int64_t offset = quant::IsSignedInt(s.dtype) ? 8 : 0;
    const at::Tensor codes = q.codes.to(at::kInt) + offset;  // [N, K]
    at::Tensor zp = q.qparams.zero_point.defined()
                        ? q.qparams.zero_point.to(at::kInt).reshape({n, blocks}) + offset
                        : at::full({n, blocks}, offset, at::kInt);
    if (blocks % 2) zp = at::cat({zp, at::zeros({n, 1}, at::kInt)}, 1);  // whole bytes per row
    const std::string name = module + ".weight";
    const std::string b = g_.AddInitializer(name + "_nbits", DataType::kUint8,
                                            {n, blocks, block / 2}, RawNibbles(codes));
    const at::Tensor scale = q.qparams.scale.to(at::kFloat).reshape({-1}).contiguous();
    const std::string sc =
        g_.AddInitializer(name + "_scale", DataType::kFloat, Dims(scale), Raw(scale));
    const std::string z =
        g_.AddInitializer(name + "_zero_point", DataType::kUint8, {zp.numel() / 2}, RawNibbles(zp));
    return g_.AddNodeWithOutputs(
        "MatMulNBits", "/" + module + "/MatMulNBits", {x, b, sc, z},
        {"/" + module + "/MatMulNBits_out"},
        {Attribute{"K", k}, Attribute{"N", n}, Attribute{"bits", int64_t{4}},
         Attribute{"block_size", block}, Attribute{"accuracy_level", int64_t{1}}},
        "com.microsoft")[0];
  }

  // [B, G, R, T, hd] Hugging Face rotate-half RoPE.
  std::string Rope(const std::string& p, const std::string& x) {
    const std::string x1 = g_.Op("Slice", p + "/x1", {x, zero1d_, half_, last_axis_});
    const std::string x2 = g_.Op("Slice", p + "/x2", {x, half_, full_, last_axis_});
    const std::string rotated =
        g_.Op("Concat", p + "/rotate_half", {g_.Op("Neg", p + "/Neg", {x2}), x1},
              {Attribute{"axis", int64_t{-1}}});
    return g_.Op(
        "Add", p + "/Add",
        {g_.Op("Mul", p + "/MulCos", {x, cos_}), g_.Op("Mul", p + "/MulSin", {rotated, sin_})});
  }

  static std::string PastName(int64_t layer, const char* kind) {
    return "past_key_values." + std::to_string(layer) + "." + kind;
  }
  static std::string PresentName(int64_t layer, const char* kind) {
    return "present." + std::to_string(layer) + "." + kind;
  }

  // [B, G, 1, S, hd] -> present [B, G, past + S, hd] -> [B, G, 1, T, hd].
  std::string Cache(const std::string& p, const std::string& x, const std::string& past,
                    const std::string& present) {
    const std::string now = g_.Op("Squeeze", p + "/Squeeze", {x, axes2_});
    g_.AddNodeWithOutputs("Concat", p + "/Concat", {past, now}, {present},
                          {Attribute{"axis", int64_t{2}}});
    return g_.Op("Unsqueeze", p + "/Unsqueeze", {present, axes2_});
  }

  StatusOr<std::string> Block(int64_t i, const std::string& h) {
    const models::BlockLayout b = models::GetBlockLayout(c_, i);
    const std::string pre = b.prefix;  // "model.layers.3."
    const int64_t heads = c_.num_attention_heads, kv = c_.num_key_value_heads, hd = c_.head_dim;
    const int64_t rep = heads / kv;
    QD_ASSIGN_OR_RETURN(std::string x, RmsNorm(pre + "input_layernorm", h));
    QD_ASSIGN_OR_RETURN(std::string q, Linear(pre + "self_attn.q_proj", x, c_.qkv_bias));
    QD_ASSIGN_OR_RETURN(std::string k, Linear(pre + "self_attn.k_proj", x, c_.qkv_bias));
    QD_ASSIGN_OR_RETURN(std::string v, Linear(pre + "self_attn.v_proj", x, c_.qkv_bias));
    const std::string p = "/" + pre + "self_attn";
    const std::vector<int64_t> perm = {0, 2, 3, 1, 4};
    const std::string q_shape = I64(p + "/q_shape", {0, 0, kv, rep, hd});
    const std::string kv_shape = I64(p + "/kv_shape", {0, 0, kv, 1, hd});
    q = g_.Op("Transpose", p + "/q_T", {g_.Op("Reshape", p + "/q_R", {q, q_shape})},
              {Attribute{"perm", perm}});
    k = g_.Op("Transpose", p + "/k_T", {g_.Op("Reshape", p + "/k_R", {k, kv_shape})},
              {Attribute{"perm", perm}});
    v = g_.Op("Transpose", p + "/v_T", {g_.Op("Reshape", p + "/v_R", {v, kv_shape})},
              {Attribute{"perm", perm}});
    q = Rope(p + "/q_rope", q);
    k = Rope(p + "/k_rope", k);
    // The cache: [B, G, past, hd] + this step's [B, G, S, hd] along the
    // sequence, returned as present and attended over as [B, G, 1, T, hd].
    k = Cache(p + "/k_cache", k, PastName(i, "key"), PresentName(i, "key"));
    v = Cache(p + "/v_cache", v, PastName(i, "value"), PresentName(i, "value"));
    q = g_.Op("Mul", p + "/q_scale", {q, head_scale_});
    const std::string kt = g_.Op("Transpose", p + "/k_Tt", {k},
                                 {Attribute{"perm", std::vector<int64_t>{0, 1, 2, 4, 3}}});
    std::string scores = g_.Op("MatMul", p + "/QK", {q, kt});
    scores = g_.Op("Add", p + "/Mask", {scores, mask_});
    const std::string probs =
        g_.Op("Softmax", p + "/Softmax", {scores}, {Attribute{"axis", int64_t{-1}}});
    std::string attn = g_.Op("MatMul", p + "/PV", {probs, v});
    attn = g_.Op("Transpose", p + "/out_T", {attn},
                 {Attribute{"perm", std::vector<int64_t>{0, 3, 1, 2, 4}}});
    attn = g_.Op("Reshape", p + "/out_R", {attn, I64(p + "/out_shape", {0, 0, heads * hd})});
    QD_ASSIGN_OR_RETURN(std::string o, Linear(pre + "self_attn.o_proj", attn, c_.o_bias));
    const std::string h2 = g_.Op("Add", "/" + pre + "residual_attn", {h, o});
    QD_ASSIGN_OR_RETURN(std::string x2, RmsNorm(pre + "post_attention_layernorm", h2));
    QD_ASSIGN_OR_RETURN(std::string gate, Linear(pre + "mlp.gate_proj", x2, c_.mlp_bias));
    QD_ASSIGN_OR_RETURN(std::string up, Linear(pre + "mlp.up_proj", x2, c_.mlp_bias));
    const std::string mp = "/" + pre + "mlp";
    const std::string act =
        g_.Op("Mul", mp + "/SiLU", {gate, g_.Op("Sigmoid", mp + "/Sigmoid", {gate})});
    const std::string prod = g_.Op("Mul", mp + "/GateUp", {act, up});
    QD_ASSIGN_OR_RETURN(std::string down, Linear(pre + "mlp.down_proj", prod, c_.mlp_bias));
    return g_.Op("Add", "/" + pre + "residual_mlp", {h2, down});
  }

  const QuantizedModel& m_;
  const models::ModelConfig& c_;
  OpsetChoice opset_;
  int64_t max_len_;
  onnx::GraphBuilder g_;
  std::string cos_, sin_, mask_, head_scale_, eps_, half_, full_, last_axis_, axes2_, zero1d_;
};

Status CheckModel(const QuantizedModel& model, int64_t max_len) {
  const models::ModelConfig& c = model.config();
  QD_RETURN_IF_ERROR(CheckArchitectureSupport(ExportFormat::kOnnxQdq, c));
  if (c.hidden_act != "silu" && c.hidden_act != "swish")
    return Status(StatusCode::kUnimplemented,
                  "onnx_qdq: hidden_act " + c.hidden_act + " is not exported (silu is)",
                  "FEATURE_NOT_BUILT");
  int64_t window = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (models::SlidingWindowAt(c, l) > 0) window = models::SlidingWindowAt(c, l);
  }
  if (window > 0 && window < max_len)
    return Status(StatusCode::kUnimplemented,
                  "onnx_qdq: a sliding window of " + std::to_string(window) +
                      " positions is not exported; set max_sequence_length <= the window",
                  "FEATURE_NOT_BUILT");
  return CheckExportSupport(ExportFormat::kOnnxQdq, ExportLayerSpecsOf(model));
}

// genai_config.json: the decoder's inputs and outputs under the names
// onnxruntime-genai looks up, its shape, and greedy search up to the
// rotary tables' length. The padding token is config.json's, else EOS.
Status WriteGenaiConfig(const QuantizedModel& model, int64_t max_len, const std::string& file_name,
                        const std::string& dir) {
  const models::ModelConfig& c = model.config();
  QD_ASSIGN_OR_RETURN(std::string text,
                      ReadTextFile((fs::path(model.model_dir()) / "config.json").string()));
  QD_ASSIGN_OR_RETURN(json hf,
                      ParseBoundedJson(text, JsonBounds{json_limits::kModelConfig},
                                       model.model_dir() + "/config.json", StatusCode::kDataLoss));
  int64_t pad = c.eos_token_id;
  if (hf.is_object() && hf.contains("pad_token_id") && hf["pad_token_id"].is_number_integer())
    pad = hf["pad_token_id"].get<int64_t>();
  const json genai = {{"model",
                       {{"bos_token_id", c.bos_token_id},
                        {"eos_token_id", c.eos_token_id},
                        {"pad_token_id", pad},
                        {"context_length", max_len},
                        {"type", c.model_type},
                        {"vocab_size", c.vocab_size},
                        {"decoder",
                         {{"filename", file_name},
                          {"head_size", c.head_dim},
                          {"hidden_size", c.hidden_size},
                          {"num_attention_heads", c.num_attention_heads},
                          {"num_key_value_heads", c.num_key_value_heads},
                          {"num_hidden_layers", c.num_hidden_layers},
                          {"session_options",
                           {{"log_id", "onnxruntime-genai"}, {"provider_options", json::array()}}},
                          {"inputs",
                           {{"input_ids", "input_ids"},
                            {"attention_mask", "attention_mask"},
                            {"position_ids", "position_ids"},
                            {"past_key_names", "past_key_values.%d.key"},
                            {"past_value_names", "past_key_values.%d.value"}}},
                          {"outputs",
                           {{"logits", "logits"},
                            {"present_key_names", "present.%d.key"},
                            {"present_value_names", "present.%d.value"}}}}}}},
                      {"search",
                       {{"do_sample", false},
                        {"num_beams", 1},
                        {"num_return_sequences", 1},
                        {"max_length", max_len},
                        {"min_length", 0},
                        // present is past + the new tokens, a new tensor each step.
                        {"past_present_share_buffer", false}}}};
  // model_type comes from the tenant's config.json: bytes that are not
  // UTF-8 are written as U+FFFD (dump() would throw), as WriteHfConfig does.
  return WriteTextFile((fs::path(dir) / "genai_config.json").string(),
                       genai.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

}  // namespace

StatusOr<OnnxQdqExportResult> ExportOnnxQdq(const QuantizedModel& model,
                                            const OnnxQdqExportOptions& opt,
                                            const ExportProgress& progress) {
  const int64_t max_len = opt.max_sequence_length > 0
                              ? opt.max_sequence_length
                              : std::min<int64_t>(model.config().max_position_embeddings > 0
                                                      ? model.config().max_position_embeddings
                                                      : 8192,
                                                  8192);
  QD_RETURN_IF_ERROR(CheckModel(model, max_len));
  const OpsetChoice opset = ChooseOpset(model);
  LlamaGraph graph(model, opset, max_len);
  try {
    QD_RETURN_IF_ERROR(graph.Build(progress));
  } catch (const c10::Error& e) {
    return InternalError(std::string("onnx_qdq: ") + e.what_without_backtrace());
  }
  QD_ASSIGN_OR_RETURN(StagedDirectory staged,
                      StagedDirectory::Create(opt.output_dir, opt.overwrite, opt.output_owner));
  onnx::GraphBuilder::ModelInfo info;
  info.ir_version = opset.ir_version;
  info.opset = opset.opset;
  info.doc_string = "quantd ONNX QDQ export of " + model.model_dir();
  if (opset.matmul_nbits) info.domain_opsets.push_back({"com.microsoft", 1});
  const bool external = graph.graph().initializer_bytes() > opt.external_data_above_bytes;
  const std::string data_name = opt.file_name + ".data";
  QD_ASSIGN_OR_RETURN(
      std::string bytes,
      graph.graph().Serialize(
          info, external ? (fs::path(staged.staging_path()) / data_name).string() : "",
          external ? data_name : ""));
  std::FILE* f = std::fopen((fs::path(staged.staging_path()) / opt.file_name).c_str(), "wb");
  if (f == nullptr) return FailedPreconditionError("cannot create " + opt.file_name);
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (std::fclose(f) != 0 || !ok)
    return Status(StatusCode::kUnavailable, "writing " + opt.file_name + " failed");
  QD_RETURN_IF_ERROR(WriteGenaiConfig(model, max_len, opt.file_name, staged.staging_path()));
  QD_RETURN_IF_ERROR(CopyHfSideFiles(model.model_dir(), staged.staging_path()));
  QD_RETURN_IF_ERROR(staged.Commit());
  OnnxQdqExportResult result;
  QD_ASSIGN_OR_RETURN(result.artifact,
                      DescribeArtifact(ExportFormat::kOnnxQdq, staged, opt.file_name));
  result.opset = opset.opset;
  result.ir_version = opset.ir_version;
  return result;
}

}  // namespace quantd::exporter
