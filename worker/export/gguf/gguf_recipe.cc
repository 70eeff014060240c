#include "worker/export/gguf/gguf_recipe.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <numeric>

namespace quantd::gguf {
namespace {

struct FileTypeRow {
  GgufFileType type;
  const char* name;
  GgmlType default_type;
};

constexpr FileTypeRow kFileTypes[] = {
    {GgufFileType::kF32, "F32", GgmlType::kF32},
    {GgufFileType::kF16, "F16", GgmlType::kF16},
    {GgufFileType::kBF16, "BF16", GgmlType::kBF16},
    {GgufFileType::kQ8_0, "Q8_0", GgmlType::kQ8_0},
    {GgufFileType::kQ4_0, "Q4_0", GgmlType::kQ4_0},
    {GgufFileType::kQ4_1, "Q4_1", GgmlType::kQ4_1},
    {GgufFileType::kQ5_0, "Q5_0", GgmlType::kQ5_0},
    {GgufFileType::kQ5_1, "Q5_1", GgmlType::kQ5_1},
    {GgufFileType::kQ2_K, "Q2_K", GgmlType::kQ2_K},
    {GgufFileType::kQ3_K_S, "Q3_K_S", GgmlType::kQ3_K},
    {GgufFileType::kQ3_K_M, "Q3_K_M", GgmlType::kQ3_K},
    {GgufFileType::kQ3_K_L, "Q3_K_L", GgmlType::kQ3_K},
    {GgufFileType::kQ4_K_S, "Q4_K_S", GgmlType::kQ4_K},
    {GgufFileType::kQ4_K_M, "Q4_K_M", GgmlType::kQ4_K},
    {GgufFileType::kQ5_K_S, "Q5_K_S", GgmlType::kQ5_K},
    {GgufFileType::kQ5_K_M, "Q5_K_M", GgmlType::kQ5_K},
    {GgufFileType::kQ6_K, "Q6_K", GgmlType::kQ6_K},
};

const FileTypeRow& RowOf(GgufFileType t) {
  for (const auto& r : kFileTypes)
    if (r.type == t) return r;
  return kFileTypes[0];  // unreachable for the enum's values
}

bool IsBlockType(GgmlType t) { return GetGgmlTypeTraits(t).block_size > 1; }

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool Contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

enum class Category {
  kTokenEmbd,
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnQkv,
  kAttnOutput,
  kFfnUp,
  kFfnGate,
  kFfnDown,
  kOutput,
  kOther
};

// tensor_get_category: broad roles by name.
Category CategoryOf(const std::string& name) {
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight") return Category::kTokenEmbd;
  if (Contains(name, "attn_qkv.weight")) return Category::kAttnQkv;
  if (Contains(name, "attn_v.weight")) return Category::kAttnV;
  if (Contains(name, "attn_k.weight")) return Category::kAttnK;
  if (Contains(name, "attn_q.weight")) return Category::kAttnQ;
  if (Contains(name, "attn_output.weight")) return Category::kAttnOutput;
  if (Contains(name, "ffn_up")) return Category::kFfnUp;
  if (Contains(name, "ffn_gate")) return Category::kFfnGate;
  if (Contains(name, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

bool IsAttnVLike(Category c) { return c == Category::kAttnV || c == Category::kAttnQkv; }

// tensor_allows_quantization, for the tensors quantd's architectures have.
bool AllowsQuantization(const RecipeTensor& t) {
  if (t.n_dims < 2) return false;
  if (!EndsWith(t.name, "weight")) return false;
  if (Contains(t.name, "_norm.weight")) return false;
  if (Contains(t.name, "ffn_gate_inp.weight")) return false;
  return t.name != "position_embd.weight" && t.name != "token_types.weight";
}

// The layer of "blk.N.*"; -1 for other names.
int LayerOf(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return -1;
  return layer;
}

// The first and last eighth of the layers, and every third one between.
bool UseMoreBits(int64_t i, int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

struct Counters {
  int64_t n_attention_wv = 0;
  int64_t i_attention_wv = 0;
  int64_t i_ffn_down = 0;
};

// llama_tensor_get_type_impl for the file types above.
GgmlType RuleType(GgufFileType ftype, const RecipeModel& m, const RecipeTensor& t, Category cat,
                  bool tied, Counters& k) {
  GgmlType type = DefaultTensorType(ftype);
  // llama.cpp's Falcon-only, Q2_K_S and IQ rules are left out: quantd writes
  // neither.
  const bool is_70b = m.arch == "llama" && m.n_layer == 80 && m.n_head != m.n_head_kv;
  const int64_t n_gqa = m.n_head_kv > 0 ? m.n_head / m.n_head_kv : 0;
  using F = GgufFileType;
  if (cat == Category::kOutput || (tied && cat == Category::kTokenEmbd)) {
    const int64_t qk = GetGgmlTypeTraits(type).block_size;
    if (t.ne0 % qk != 0) {
      type = GgmlType::kQ8_0;
    } else if (type != GgmlType::kQ8_0) {
      type = GgmlType::kQ6_K;
    }
  } else if (cat == Category::kTokenEmbd) {
    // Untied embeddings keep the default type for these file types.
  } else if (IsAttnVLike(cat)) {
    if (ftype == F::kQ2_K) {
      type = n_gqa >= 4 ? GgmlType::kQ4_K : GgmlType::kQ3_K;
    } else if (ftype == F::kQ3_K_M) {
      type = k.i_attention_wv < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    } else if (ftype == F::kQ3_K_L) {
      type = GgmlType::kQ5_K;
    } else if ((ftype == F::kQ4_K_M || ftype == F::kQ5_K_M) &&
               UseMoreBits(k.i_attention_wv, k.n_attention_wv)) {
      type = GgmlType::kQ6_K;
    } else if (ftype == F::kQ4_K_S && k.i_attention_wv < 4) {
      type = GgmlType::kQ5_K;
    }
    if (is_70b && (type == GgmlType::kQ3_K || type == GgmlType::kQ4_K)) type = GgmlType::kQ5_K;
    if (m.n_expert == 8) type = GgmlType::kQ8_0;
    ++k.i_attention_wv;
  } else if (cat == Category::kAttnK) {
    if (m.n_expert == 8) type = GgmlType::kQ8_0;
  } else if (cat == Category::kFfnDown) {
    int64_t i_layer = k.i_ffn_down;
    if (m.n_expert > 1) i_layer = LayerOf(t.name);
    const int64_t n_layer = m.n_layer;
    if (ftype == F::kQ2_K) {
      type = GgmlType::kQ3_K;
    } else if (ftype == F::kQ3_K_M) {
      type = i_layer < n_layer / 16 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    } else if (ftype == F::kQ3_K_L) {
      type = GgmlType::kQ5_K;
    } else if (ftype == F::kQ4_K_M) {
      if (UseMoreBits(i_layer, n_layer)) type = GgmlType::kQ6_K;
    } else if (ftype == F::kQ5_K_M && UseMoreBits(i_layer, n_layer)) {
      type = GgmlType::kQ6_K;
    } else if (ftype == F::kQ4_K_S && i_layer < n_layer / 8) {
      type = GgmlType::kQ5_K;
    } else if ((ftype == F::kQ4_0 || ftype == F::kQ5_0) && m.has_imatrix && i_layer < n_layer / 8) {
      type = ftype == F::kQ4_0 ? GgmlType::kQ4_1 : GgmlType::kQ5_1;
    }
    ++k.i_ffn_down;
  } else if (cat == Category::kAttnOutput) {
    if (m.n_expert == 8) {
      if (ftype == F::kQ2_K || ftype == F::kQ3_K_S || ftype == F::kQ3_K_M || ftype == F::kQ4_K_S ||
          ftype == F::kQ4_K_M)
        type = GgmlType::kQ5_K;
    } else if (ftype == F::kQ2_K) {
      type = GgmlType::kQ3_K;
    } else if (ftype == F::kQ3_K_M) {
      type = GgmlType::kQ4_K;
    } else if (ftype == F::kQ3_K_L) {
      type = GgmlType::kQ5_K;
    }
  }
  return type;
}

// tensor_type_fallback: nullopt when no type fits the rows.
std::optional<GgmlType> Fallback(GgmlType type, int64_t ne0) {
  if (ne0 % GetGgmlTypeTraits(type).block_size == 0) return type;
  GgmlType next;
  switch (type) {
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
      next = GgmlType::kQ4_0;
      break;
    case GgmlType::kQ4_K:
      next = GgmlType::kQ5_0;
      break;
    case GgmlType::kQ5_K:
      next = GgmlType::kQ5_1;
      break;
    case GgmlType::kQ6_K:
      next = GgmlType::kQ8_0;
      break;
    default:
      return std::nullopt;
  }
  if (ne0 % GetGgmlTypeTraits(next).block_size != 0) return GgmlType::kF16;
  return next;
}

}  // namespace

std::optional<GgufFileType> GgufFileTypeFromName(std::string_view name) {
  std::string upper(name);
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  for (const auto& r : kFileTypes)
    if (upper == r.name) return r.type;
  return std::nullopt;
}

std::string_view GgufFileTypeName(GgufFileType t) { return RowOf(t).name; }

std::string AllGgufFileTypeNames() {
  std::string out;
  for (const auto& r : kFileTypes) out += std::string(out.empty() ? "" : ", ") + r.name;
  return out;
}

GgmlType DefaultTensorType(GgufFileType t) { return RowOf(t).default_type; }

StatusOr<std::vector<RecipeChoice>> ChooseRecipeTypes(GgufFileType ftype, const RecipeModel& model,
                                                      const std::vector<RecipeTensor>& tensors) {
  // llama.cpp visits tensors by layer number, then by name, and counts the
  // attn_v and ffn_down tensors it has seen.
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int la = LayerOf(tensors[a].name), lb = LayerOf(tensors[b].name);
    if (la != lb) return la < lb;
    return tensors[a].name < tensors[b].name;
  });
  Counters k;
  bool tied = true;
  for (const auto& t : tensors) {
    const Category cat = CategoryOf(t.name);
    if (IsAttnVLike(cat)) ++k.n_attention_wv;
    if (cat == Category::kOutput) tied = false;
  }
  std::vector<RecipeChoice> out(tensors.size());
  Status bad(StatusCode::kFailedPrecondition, "", "GGUF_RECIPE_UNSUPPORTED_SHAPE");
  std::string first;
  const GgmlType default_type = DefaultTensorType(ftype);
  for (size_t i : order) {
    const RecipeTensor& t = tensors[i];
    if (!AllowsQuantization(t)) continue;
    if (!IsBlockType(default_type)) {
      out[i].type = default_type;
      continue;
    }
    const GgmlType wanted = RuleType(ftype, model, t, CategoryOf(t.name), tied, k);
    const std::optional<GgmlType> got = Fallback(wanted, t.ne0);
    if (!got) {
      const std::string msg = t.name + ": rows of " + std::to_string(t.ne0) + " are not whole " +
                              GetGgmlTypeTraits(wanted).name + " blocks of " +
                              std::to_string(GetGgmlTypeTraits(wanted).block_size) +
                              " and llama.cpp defines no fallback for " +
                              GetGgmlTypeTraits(wanted).name;
      if (first.empty()) first = msg;
      bad.AddViolation(t.name, msg);
      continue;
    }
    out[i].type = *got;
    if (*got != wanted) out[i].wanted = wanted;
  }
  if (!bad.violations().empty()) {
    std::string msg = "GGUF " + std::string(GgufFileTypeName(ftype)) + ": " + first;
    if (bad.violations().size() > 1)
      msg += " (and " + std::to_string(bad.violations().size() - 1) + " more tensors)";
    msg += "; a K recipe (Q4_K_M, Q5_K_M, Q6_K, ...) falls back to F16 for such rows";
    Status s(StatusCode::kFailedPrecondition, msg, "GGUF_RECIPE_UNSUPPORTED_SHAPE");
    for (const auto& v : bad.violations()) s.AddViolation(v.field, v.description);
    return s;
  }
  return out;
}

}  // namespace quantd::gguf
