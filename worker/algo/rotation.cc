#include "worker/algo/rotation.h"

#include <c10/util/Exception.h>

#include <string>
#include <utility>
#include <vector>

namespace quantd::algo {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The Llama-style layers of a block, by role.
struct LlamaBlock {
  models::Linear *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  models::Linear *gate = nullptr, *up = nullptr, *down = nullptr;
  models::Norm *attn_norm = nullptr, *mlp_norm = nullptr;
};

StatusOr<LlamaBlock> FindLlamaLayers(const models::DecoderBlock& block) {
  LlamaBlock b;
  const std::vector<std::pair<const char*, models::Linear**>> roles = {
      {"self_attn.q_proj", &b.q}, {"self_attn.k_proj", &b.k}, {"self_attn.v_proj", &b.v},
      {"self_attn.o_proj", &b.o}, {"mlp.gate_proj", &b.gate}, {"mlp.up_proj", &b.up},
      {"mlp.down_proj", &b.down}};
  for (models::Linear* l : block.linears()) {
    bool known = false;
    for (const auto& [suffix, slot] : roles) {
      if (EndsWith(l->name(), std::string(".") + suffix)) {
        *slot = l;
        known = true;
      }
    }
    if (!known) return UnimplementedError("rotation does not support layer " + l->name());
  }
  for (models::Norm* n : block.norms()) {
    if (n->kind() != models::NormKind::kRmsNorm)
      return UnimplementedError("rotation needs RMSNorm blocks; " + n->name() + " is a LayerNorm");
    if (EndsWith(n->name(), ".input_layernorm")) {
      b.attn_norm = n;
    } else if (EndsWith(n->name(), ".post_attention_layernorm")) {
      b.mlp_norm = n;
    } else if (EndsWith(n->name(), ".q_norm") || EndsWith(n->name(), ".k_norm")) {
      // Qwen3's per-head q/k norms act on q_proj's and k_proj's outputs,
      // which a rotation of their inputs leaves as they were.
    } else {
      return UnimplementedError("rotation does not support norm " + n->name());
    }
  }
  for (const auto& [suffix, slot] : roles)
    if (*slot == nullptr) return UnimplementedError(std::string("rotation needs a ") + suffix);
  if (b.attn_norm == nullptr || b.mlp_norm == nullptr)
    return UnimplementedError("rotation needs input_layernorm and post_attention_layernorm");
  return b;
}

at::Tensor F64(const at::Tensor& t) { return t.to(at::kDouble); }

// W [out, in] <- W diag(gamma): the norm's scale moves into the linear.
void FuseNormInto(const models::Norm& norm, models::Linear& l) {
  l.weight() = (F64(l.weight()) * F64(norm.weight()).unsqueeze(0)).to(l.weight().scalar_type());
}

void SetOnes(models::Norm& norm) { norm.weight() = at::ones_like(norm.weight()); }

// The input of `l` is rotated by R: W <- W R.
void RotateInput(models::Linear& l, const Rotation& r) {
  l.weight() = r.Apply(F64(l.weight())).to(l.weight().scalar_type());
}

// The output of `l` is rotated by R: W <- R^T W, b <- b R.
void RotateOutput(models::Linear& l, const Rotation& r) {
  l.weight() = r.Apply(F64(l.weight()).t()).t().contiguous().to(l.weight().scalar_type());
  if (l.bias().defined()) l.bias() = r.Apply(F64(l.bias())).to(l.bias().scalar_type());
}

// The input of `l` is [heads x head_dim], each head rotated by R.
void RotateHeadInputs(models::Linear& l, const Rotation& r, int64_t head_dim) {
  at::Tensor w = F64(l.weight());
  const int64_t out = w.size(0), in = w.size(1);
  w = r.Apply(w.reshape({out, in / head_dim, head_dim})).reshape({out, in});
  l.weight() = w.to(l.weight().scalar_type());
}

// The output of `l` is [heads x head_dim], each head rotated by R.
void RotateHeadOutputs(models::Linear& l, const Rotation& r, int64_t head_dim) {
  at::Tensor w = F64(l.weight());
  const int64_t out = w.size(0), in = w.size(1);
  // Rows of head h: W_h <- R^T W_h, i.e. (W_h^T R)^T.
  at::Tensor wt = w.t().reshape({in, out / head_dim, head_dim});
  l.weight() = r.Apply(wt).reshape({in, out}).t().contiguous().to(l.weight().scalar_type());
  if (l.bias().defined()) {
    at::Tensor b = F64(l.bias()).reshape({out / head_dim, head_dim});
    l.bias() = r.Apply(b).reshape({out}).to(l.bias().scalar_type());
  }
}

}  // namespace

StatusOr<const Rotation*> RotationTransform::Get(Kind kind, int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(static_cast<int>(kind), n);
  auto it = rotations_.find(key);
  if (it != rotations_.end()) return it->second.get();
  // R1 and R2 draw from different streams of the seed.
  const uint64_t seed = options_.seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(kind);
  QD_ASSIGN_OR_RETURN(Rotation r, Rotation::Create(n, /*random_signs=*/kind != Kind::kR4, seed));
  auto owned = std::make_unique<Rotation>(std::move(r));
  const Rotation* p = owned.get();
  rotations_[key] = std::move(owned);
  return p;
}

Status RotationTransform::TransformEmbedding(models::EmbeddingStage& embedding) {
  if (embedding.position_embedding() != nullptr || embedding.project_in() != nullptr)
    return UnimplementedError(
        "rotation supports Llama-style models (no learned positions or input projection)");
  models::Embedding& e = embedding.token_embedding();
  try {
    QD_ASSIGN_OR_RETURN(const Rotation* r1, Get(Kind::kR1, e.weight().size(1)));
    e.weight() = r1->Apply(F64(e.weight())).to(e.weight().scalar_type());
  } catch (const c10::Error& err) {
    return InternalError(std::string("rotating the embedding: ") + err.what_without_backtrace());
  }
  return OkStatus();
}

Status RotationTransform::TransformBlock(models::DecoderBlock& block) {
  QD_ASSIGN_OR_RETURN(LlamaBlock b, FindLlamaLayers(block));
  const models::ModelConfig& cfg = block.config();
  const int64_t kv_heads =
      cfg.num_key_value_heads > 0 ? cfg.num_key_value_heads : cfg.num_attention_heads;
  if (kv_heads <= 0 || b.v->out_features() % kv_heads != 0)
    return UnimplementedError("rotation cannot split v_proj into heads");
  const int64_t head_dim = b.v->out_features() / kv_heads;
  try {
    QD_ASSIGN_OR_RETURN(const Rotation* r1, Get(Kind::kR1, cfg.hidden_size));
    for (models::Linear* l : {b.q, b.k, b.v}) FuseNormInto(*b.attn_norm, *l);
    for (models::Linear* l : {b.gate, b.up}) FuseNormInto(*b.mlp_norm, *l);
    SetOnes(*b.attn_norm);
    SetOnes(*b.mlp_norm);
    for (models::Linear* l : {b.q, b.k, b.v, b.gate, b.up}) RotateInput(*l, *r1);
    for (models::Linear* l : {b.o, b.down}) RotateOutput(*l, *r1);
    if (options_.rotate_heads) {
      if (b.o->in_features() % head_dim != 0)
        return UnimplementedError("rotation cannot split o_proj's input into heads");
      QD_ASSIGN_OR_RETURN(const Rotation* r2, Get(Kind::kR2, head_dim));
      RotateHeadOutputs(*b.v, *r2, head_dim);
      RotateHeadInputs(*b.o, *r2, head_dim);
    }
    if (options_.online_down_proj) {
      QD_ASSIGN_OR_RETURN(const Rotation* r4, Get(Kind::kR4, b.down->in_features()));
      RotateInput(*b.down, *r4);
      // Live until InstallOnline replaces it (see the header).
      auto armed = std::make_shared<bool>(true);
      b.down->AddInputHook([r4, armed](const models::Linear&, const at::Tensor& x) {
        return *armed ? r4->Apply(x) : x;
      });
      std::lock_guard<std::mutex> lock(mu_);
      pending_linear_ = b.down;
      pending_armed_ = armed;
    }
  } catch (const c10::Error& err) {
    return InternalError("rotating block " + std::to_string(block.index()) + ": " +
                         err.what_without_backtrace());
  }
  return OkStatus();
}

Status RotationTransform::TransformHead(models::HeadStage& head) {
  if (head.project_out() != nullptr)
    return UnimplementedError("rotation does not support an output projection (OPT)");
  models::Norm* norm = head.final_norm();
  if (norm == nullptr || norm->kind() != models::NormKind::kRmsNorm)
    return UnimplementedError("rotation needs a final RMSNorm");
  models::Linear& lm = head.lm_head();
  try {
    QD_ASSIGN_OR_RETURN(const Rotation* r1, Get(Kind::kR1, lm.in_features()));
    // A new tensor: when tied, the old one is the embedding's.
    FuseNormInto(*norm, lm);
    SetOnes(*norm);
    RotateInput(lm, *r1);
  } catch (const c10::Error& err) {
    return InternalError(std::string("rotating the head: ") + err.what_without_backtrace());
  }
  return OkStatus();
}

Status RotationTransform::InstallOnline(models::DecoderBlock& block) {
  if (!options_.online_down_proj) return OkStatus();
  QD_ASSIGN_OR_RETURN(LlamaBlock b, FindLlamaLayers(block));
  QD_ASSIGN_OR_RETURN(const Rotation* r4, Get(Kind::kR4, b.down->in_features()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_linear_ == b.down && pending_armed_) *pending_armed_ = false;
    pending_linear_ = nullptr;
    pending_armed_.reset();
  }
  b.down->AddInputHook([r4](const models::Linear&, const at::Tensor& x) { return r4->Apply(x); });
  return OkStatus();
}

}  // namespace quantd::algo
