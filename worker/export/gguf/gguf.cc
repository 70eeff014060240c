#include "worker/export/gguf/gguf.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "worker/common/cancellation.h"
#include "worker/export/export_support.h"
#include "worker/export/gguf/gguf_chat_metadata.h"
#include "worker/export/gguf/gguf_export.h"
#include "worker/export/gguf/gguf_imatrix.h"
#include "worker/export/hf/hf_files.h"
#include "worker/export/quantized_values_source.h"
#include "worker/io/tokenizer/gguf_tokenizer.h"
#include "worker/io/tokenizer/load_tokenizer.h"
#include "worker/models/layer_shapes.h"
#include "worker/quant/fake_quant.h"

namespace quantd::exporter {

namespace fs = std::filesystem;
using gguf::GgmlType;
using quant::QScheme;
using quant::QuantSpec;

namespace {

constexpr int64_t kBlock = 32;

const char* TypeName(GgmlType t) { return gguf::GetGgmlTypeTraits(t).name; }

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Scale or zero point of every 32-element block, [out, in / 32] float32.
at::Tensor PerBlock(const at::Tensor& p, const QuantSpec& spec, int64_t out, int64_t in) {
  const int64_t nb = in / kBlock;
  at::Tensor f = p.to(at::kFloat);
  switch (spec.qscheme) {
    case QScheme::kPerTensor:
      return f.reshape({1, 1}).expand({out, nb}).contiguous();
    case QScheme::kPerChannel:
      return f.reshape({out, 1}).expand({out, nb}).contiguous();
    case QScheme::kPerGroup:
      break;
  }
  const int64_t per_group = quant::EffectiveGroupSize(spec) / kBlock;
  return f.reshape({out, in / quant::EffectiveGroupSize(spec)})
      .repeat_interleave(per_group, 1)
      .contiguous();
}

// The importance sums the recipe's weights were quantized with, gathered as
// the tensors are encoded, for the imatrix file beside the GGUF.
struct ImatrixBook {
  std::mutex mu;
  std::map<std::string, gguf::ImatrixEntry> entries;
  void Add(const std::string& tensor, const QuantizedModel::ImportanceSums& sums) {
    at::Tensor s = sums.sum2.to(at::kFloat).contiguous();
    gguf::ImatrixEntry e{tensor,
                         std::vector<float>(s.data_ptr<float>(), s.data_ptr<float>() + s.numel()),
                         sums.count};
    std::lock_guard<std::mutex> lock(mu);
    entries[tensor] = std::move(e);
  }
  std::vector<gguf::ImatrixEntry> Sorted() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<gguf::ImatrixEntry> out;
    for (auto& [name, e] : entries) out.push_back(e);
    return out;
  }
};

struct NoteBook {
  std::mutex mu;
  std::map<std::string, std::vector<std::string>> tensors;  // note -> module names
  void Add(const std::string& note, const std::string& module) {
    std::lock_guard<std::mutex> lock(mu);
    tensors[note].push_back(module);
  }
};

// What kind of tensor went to a type, for the export's type summary.
enum class TensorKind { kQuantized, kFallback, kFloat, kVector };

struct TypeBook {
  std::mutex mu;
  std::map<std::string, GgmlType> type_of;
  std::map<std::string, TensorKind> kind_of;
  void Add(const std::string& name, GgmlType type, TensorKind kind) {
    std::lock_guard<std::mutex> lock(mu);
    type_of[name] = type;
    kind_of[name] = kind;
  }
};

// "gguf F32: 2 float weights (model.embed_tokens.weight, ...), 11 norms and
// biases": per type, how many tensors of each kind; float weights and
// fallbacks are named (the first 8), since a user may not expect them.
std::vector<std::string> DescribeTypes(const TypeBook& book) {
  std::map<GgmlType, std::map<TensorKind, std::vector<std::string>>> by_type;
  for (const auto& [name, type] : book.type_of) by_type[type][book.kind_of.at(name)].push_back(name);
  std::vector<std::string> lines;
  for (const auto& [type, kinds] : by_type) {
    std::string line = std::string("gguf ") + TypeName(type) + ":";
    bool first = true;
    for (const auto& [kind, names] : kinds) {
      const size_t n = names.size();
      const char* what = kind == TensorKind::kQuantized ? (n == 1 ? "quantized weight"
                                                                  : "quantized weights")
                         : kind == TensorKind::kFallback
                             ? (n == 1 ? "quantized weight whose rows are not whole blocks of 32"
                                       : "quantized weights whose rows are not whole blocks of 32")
                         : kind == TensorKind::kFloat ? (n == 1 ? "float weight" : "float weights")
                                                      : (n == 1 ? "norm or bias" : "norms and biases");
      line += std::string(first ? " " : ", ") + std::to_string(n) + " " + what;
      first = false;
      if (kind == TensorKind::kFloat || kind == TensorKind::kFallback) {
        line += " (";
        for (size_t i = 0; i < n && i < 8; ++i) line += (i ? ", " : "") + names[i];
        line += n > 8 ? ", ...)" : ")";
      }
    }
    lines.push_back(line);
  }
  return lines;
}

bool Fp16Exact(float v) { return gguf::Fp16ToFp32(gguf::Fp32ToFp16(v)) == v; }

// The job's MXFP4 codes and E8M0 block exponents as ggml's MXFP4 blocks:
// the same values (ggml scales its doubled e2m1 table by 2^(e-128)).
Status EncodeMxfp4(const std::string& module, const quant::QuantizedTensor& q,
                   const gguf::GgufLayoutFn& to_gguf, std::vector<uint8_t>* bytes) {
  const int64_t out = q.codes.size(0), in = q.codes.size(1), nb = in / kBlock;
  QD_ASSIGN_OR_RETURN(at::Tensor codes, to_gguf(q.codes.to(at::kInt)));
  QD_ASSIGN_OR_RETURN(at::Tensor e8m0, to_gguf(q.e8m0.to(at::kInt).reshape({out, nb})));
  codes = codes.to(at::kByte).contiguous();
  e8m0 = e8m0.contiguous();
  if (e8m0.eq(255).any().item<bool>())
    return InternalError(module +
                         ": an E8M0 block exponent is 255 (NaN), which MXFP4 GGUF cannot hold");
  QD_ASSIGN_OR_RETURN(uint64_t size, gguf::GgmlRowBytes(GgmlType::kMXFP4, out * in));
  bytes->assign(size, 0);
  const size_t block_bytes = gguf::GetGgmlTypeTraits(GgmlType::kMXFP4).type_size;
  const uint8_t* c = codes.data_ptr<uint8_t>();
  const int32_t* e = e8m0.data_ptr<int32_t>();
  for (int64_t i = 0; i < out * nb; ++i)
    gguf::WriteBlockMXFP4(c + i * kBlock, static_cast<uint8_t>(e[i]),
                          bytes->data() + i * block_bytes);
  return OkStatus();
}

// Blocks an algorithm wrote ([out, row bytes], rows along the module's
// output features) in the tensor's GGUF row order: the q/k RoPE permutation
// moves whole rows, and GPT-2's transposed weights are already GGUF rows.
Status StoredBlocks(const at::Tensor& blocks, bool transposed, const gguf::GgufLayoutFn& to_gguf,
                    std::vector<uint8_t>* bytes) {
  at::Tensor rows = blocks.contiguous();
  if (!transposed) {
    QD_ASSIGN_OR_RETURN(rows, to_gguf(blocks.to(at::kInt)));
    rows = rows.to(at::kByte).contiguous();
  }
  if (rows.sizes() != blocks.sizes())
    return InternalError("the GGUF layout changed the blocks' shape");
  bytes->assign(rows.data_ptr<uint8_t>(), rows.data_ptr<uint8_t>() + rows.numel());
  return OkStatus();
}

// Writes the job's own codes of `module` as `type` blocks.
Status EncodeCodes(const QuantizedModel& model, const std::string& module, const QuantSpec& spec,
                   GgmlType type, const gguf::GgufLayoutFn& to_gguf, std::vector<uint8_t>* bytes,
                   NoteBook* notes) {
  QD_ASSIGN_OR_RETURN(at::Tensor value, model.Load(module + ".weight"));
  QD_ASSIGN_OR_RETURN(quant::QParams qp, model.WeightQParams(module));
  QD_ASSIGN_OR_RETURN(quant::QuantizedTensor q, quant::RealQuantize(value, spec, qp));
  if (type == GgmlType::kMXFP4) return EncodeMxfp4(module, q, to_gguf, bytes);
  const int64_t out = value.size(0), in = value.size(1), nb = in / kBlock;
  at::Tensor zp_src = q.qparams.zero_point.defined() ? q.qparams.zero_point
                                                     : at::zeros(q.qparams.scale.sizes(), at::kInt);
  QD_ASSIGN_OR_RETURN(at::Tensor codes, to_gguf(q.codes.to(at::kInt)));
  QD_ASSIGN_OR_RETURN(at::Tensor scale, to_gguf(PerBlock(q.qparams.scale, spec, out, in)));
  QD_ASSIGN_OR_RETURN(at::Tensor zp, to_gguf(PerBlock(zp_src, spec, out, in)));
  QD_ASSIGN_OR_RETURN(uint64_t size, gguf::GgmlRowBytes(type, out * in));
  bytes->assign(size, 0);
  const size_t block_bytes = gguf::GetGgmlTypeTraits(type).type_size;
  const int qmin = quant::IntRangeOf(spec.dtype).qmin;
  const int32_t* c = codes.data_ptr<int32_t>();
  const float* s = scale.data_ptr<float>();
  const float* z = zp.data_ptr<float>();
  bool inexact = false;
  for (int64_t r = 0; r < out; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const int32_t* cb = c + r * in + b * kBlock;
      const float d = s[r * nb + b];
      const int zero = static_cast<int>(z[r * nb + b]);
      uint8_t* dst = bytes->data() + (r * nb + b) * block_bytes;
      if (type == GgmlType::kQ8_0) {
        int8_t v[kBlock];
        for (int j = 0; j < kBlock; ++j) {
          const int x = cb[j] - zero;
          if (x < -128 || x > 127)
            return InternalError(module + ": code minus zero point " + std::to_string(x) +
                                 " does not fit Q8_0");
          v[j] = static_cast<int8_t>(x);
        }
        gguf::WriteBlockQ8_0(v, d, dst);
        inexact |= !Fp16Exact(d);
      } else if (type == GgmlType::kQ4_0) {
        uint8_t v[kBlock];
        for (int j = 0; j < kBlock; ++j) v[j] = static_cast<uint8_t>(cb[j] - zero + 8);
        gguf::WriteBlockQ4_0(v, d, dst);
        inexact |= !Fp16Exact(d);
      } else {
        uint8_t v[kBlock];
        for (int j = 0; j < kBlock; ++j) v[j] = static_cast<uint8_t>(cb[j] - qmin);
        const float m = static_cast<float>(qmin - zero) * d;
        gguf::WriteBlockQ4_1(v, d, m, dst);
        inexact |= !Fp16Exact(d) || !Fp16Exact(m);
      }
    }
  }
  if (inexact)
    notes->Add(std::string("GGUF ") + TypeName(type) +
                   ": the job's codes are kept but block scales were rounded to fp16 "
                   "(the job's scale_type is not float16)",
               module);
  return OkStatus();
}

// Float values (after quantization) through ggml's QuantizeRow.
Status EncodeValues(const QuantizedModel& model, const std::string& name, GgmlType type,
                    const gguf::GgufLayoutFn& to_gguf, std::vector<uint8_t>* bytes) {
  QD_ASSIGN_OR_RETURN(at::Tensor t, model.Load(name));
  QD_ASSIGN_OR_RETURN(t, to_gguf(t.to(at::kFloat)));
  QD_ASSIGN_OR_RETURN(uint64_t size, gguf::GgmlRowBytes(type, t.numel()));
  bytes->resize(size);
  return gguf::QuantizeRow(type, t.data_ptr<float>(), bytes->data(), t.numel());
}

Status CheckType(GgmlType t, std::initializer_list<GgmlType> allowed, const char* what) {
  for (GgmlType a : allowed)
    if (a == t) return OkStatus();
  std::string names;
  for (GgmlType a : allowed) names += std::string(names.empty() ? "" : ", ") + TypeName(a);
  return InvalidArgumentError(std::string("gguf: ") + what + " " + TypeName(t) +
                              " is not supported (supported: " + names + ")");
}

}  // namespace

StatusOr<GgufExportResult> ExportGguf(const QuantizedModel& model,
                                      const GgufModelExportOptions& opt,
                                      const ExportProgress& progress) {
  QD_RETURN_IF_ERROR(
      CheckType(opt.weight_type,
                {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                 GgmlType::kMXFP4},
                "weight type"));
  QD_RETURN_IF_ERROR(
      CheckType(opt.fallback_type, {GgmlType::kF32, GgmlType::kF16}, "fallback type"));
  QD_RETURN_IF_ERROR(
      CheckType(opt.float_type, {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}, "float type"));
  QD_RETURN_IF_ERROR(CheckExportSupport(ExportFormat::kGguf, ExportLayerSpecsOf(model)));
  QD_ASSIGN_OR_RETURN(std::string config_json,
                      ReadTextFile((fs::path(model.model_dir()) / "config.json").string()));
  QD_ASSIGN_OR_RETURN(auto tokenizer, io::LoadTokenizerFromDir(model.model_dir()));

  gguf::GgufExportOptions g;
  g.weight_type = opt.weight_type;
  if (opt.recipe) g.file_type = static_cast<uint32_t>(opt.recipe->file_type());
  g.model_name = opt.model_name.empty()
                     ? fs::path(model.model_dir()).lexically_normal().filename().string()
                     : opt.model_name;
  if (g.model_name.empty()) g.model_name = "quantd";
  QD_ASSIGN_OR_RETURN(g.extra_metadata, io::TokenizerGgufMetadata(*tokenizer));
  QD_ASSIGN_OR_RETURN(GgufChatMetadata chat, HfChatMetadata(model.model_dir(), *tokenizer));
  for (auto& kv : chat.kv) g.extra_metadata.push_back(std::move(kv));

  std::set<std::string> transposed;
  for (const auto& l : models::ListLinearLayers(model.config()))
    if (l.transposed_in_checkpoint) transposed.insert(l.name);
  auto notes = std::make_shared<NoteBook>();
  auto types = std::make_shared<TypeBook>();
  int exact = 0;
  const int total = static_cast<int>(model.original().Names().size());
  auto done = std::make_shared<std::atomic<int>>(0);
  auto tick = [progress, done, total]() {
    if (progress) progress(++*done, total);
  };
  const QuantizedModel* m = &model;
  const GgmlType target = opt.weight_type;
  auto imatrix = std::make_shared<ImatrixBook>();
  // Recipe weights written as the blocks GPTQ chose.
  auto gptq_weights = std::make_shared<std::atomic<int>>(0);
  g.tensor_encoding =
      [&, m, target, notes, types, imatrix, tick](
          const std::string& name,
          const std::vector<int64_t>& shape) -> StatusOr<std::optional<gguf::GgufTensorEncoding>> {
    gguf::GgufTensorEncoding enc;
    auto values = [m, name, tick](GgmlType t) {
      return [m, name, tick, t](const gguf::GgufLayoutFn& f, std::vector<uint8_t>* b) {
        // Tensors are encoded one by one as the file is written: a cancel
        // stops between them, and the staging directory goes with `staged`.
        if (StopRequested()) return CancelledStatus("exporting " + name);
        Status s = EncodeValues(*m, name, t, f, b);
        tick();
        return s;
      };
    };
    if (const gguf::RecipeTensorPlan* p = opt.recipe ? opt.recipe->PlanOf(name) : nullptr) {
      enc.type = p->type;
      types->Add(name, enc.type, TensorKind::kQuantized);
      std::shared_ptr<const gguf::GgufRecipeWeights> recipe = opt.recipe;
      const std::string module = EndsWith(name, ".weight") ? name.substr(0, name.size() - 7) : name;
      const std::string gguf_name = p->gguf_name;
      const bool transposed = p->transposed;
      enc.encode = [m, recipe, name, module, gguf_name, transposed, imatrix, gptq_weights, tick](
                       const gguf::GgufLayoutFn& f, std::vector<uint8_t>* b) -> Status {
        if (StopRequested()) return CancelledStatus("exporting " + name);
        // The blocks the job evaluated: with the importance it gathered.
        QD_ASSIGN_OR_RETURN(QuantizedModel::ImportanceSums sums, m->WeightImportance(module));
        at::Tensor importance;
        if (sums.sum2.defined()) {
          importance = gguf::ImportanceFromSums(sums.sum2, sums.count);
          imatrix->Add(gguf_name, sums);
        }
        QD_ASSIGN_OR_RETURN(at::Tensor blocks, m->GgmlBlocks(module));
        if (blocks.defined()) ++*gptq_weights;
        Status s = blocks.defined() ? StoredBlocks(blocks, transposed, f, b)
                                    : recipe->Encode(name, f, importance, b);
        tick();
        return s;
      };
      return std::optional<gguf::GgufTensorEncoding>(enc);
    }
    if (shape.size() != 2) {
      enc.type = GgmlType::kF32;
      enc.encode = values(enc.type);
      types->Add(name, enc.type, TensorKind::kVector);
      return std::optional<gguf::GgufTensorEncoding>(enc);
    }
    const std::string module = EndsWith(name, ".weight") ? name.substr(0, name.size() - 7) : "";
    const QuantizedLayer* layer = module.empty() ? nullptr : m->FindLayer(module);
    if (layer == nullptr || !layer->weight) {
      enc.type = opt.float_type;
      enc.encode = values(enc.type);
      types->Add(name, enc.type, TensorKind::kFloat);
      return std::optional<gguf::GgufTensorEncoding>(enc);
    }
    const bool is_transposed = transposed.count(module) > 0;
    const int64_t row = is_transposed ? shape[0] : shape[1];
    // MX FP4 weights keep their codes as ggml's MXFP4 blocks in any file
    // whose weights are blocks; integer weights take the file's type.
    const GgmlType type =
        quant::IsMxType(layer->weight->dtype) && target != GgmlType::kF32 &&
                target != GgmlType::kF16
            ? GgmlType::kMXFP4
            : target;
    if (type == GgmlType::kF32 || type == GgmlType::kF16) {
      enc.type = type;
      enc.encode = values(enc.type);
      types->Add(name, enc.type, TensorKind::kQuantized);
    } else if (row % kBlock != 0) {
      notes->Add(std::string("GGUF ") + TypeName(type) + ": rows of " + std::to_string(row) +
                     " are not whole blocks of 32; written as " + TypeName(opt.fallback_type) +
                     " values",
                 module);
      enc.type = opt.fallback_type;
      enc.encode = values(enc.type);
      types->Add(name, enc.type, TensorKind::kFallback);
    } else {
      enc.type = type;
      types->Add(name, enc.type, TensorKind::kQuantized);
      const std::string why =
          is_transposed ? std::string("Conv1D layout") : GgufCodesMismatch(*layer->weight, type);
      if (why.empty()) {
        ++exact;
        const QuantSpec spec = *layer->weight;
        enc.encode = [m, module, spec, type, notes, tick](const gguf::GgufLayoutFn& f,
                                                          std::vector<uint8_t>* b) {
          if (StopRequested()) return CancelledStatus("exporting " + module);
          Status s = EncodeCodes(*m, module, spec, type, f, b, notes.get());
          tick();
          return s;
        };
      } else {
        notes->Add(std::string("GGUF ") + TypeName(type) +
                       ": requantized from the job's values with ggml's reference quantizer (" +
                       quant::DescribeSpec(*layer->weight) + ": " + why + ")",
                   module);
        enc.encode = values(enc.type);
      }
    }
    return std::optional<gguf::GgufTensorEncoding>(enc);
  };

  QD_ASSIGN_OR_RETURN(StagedDirectory staged,
                      StagedDirectory::Create(opt.output_dir, opt.overwrite, opt.output_owner));
  QuantizedValuesSource source(&model);
  QD_RETURN_IF_ERROR(gguf::WriteGgufFromHf(
      config_json, source, g, (fs::path(staged.staging_path()) / opt.file_name).string()));
  std::vector<gguf::ImatrixEntry> imatrix_entries = imatrix->Sorted();
  if (!imatrix_entries.empty()) {
    QD_RETURN_IF_ERROR(
        gguf::WriteImatrixGguf(imatrix_entries, opt.imatrix_info,
                               (fs::path(staged.staging_path()) / kImatrixFileName).string()));
  }
  QD_RETURN_IF_ERROR(staged.Commit());
  GgufExportResult result;
  QD_ASSIGN_OR_RETURN(result.artifact,
                      DescribeArtifact(ExportFormat::kGguf, staged, opt.file_name));
  result.exact_code_tensors = exact;
  result.tensor_types = DescribeTypes(*types);
  if (*gptq_weights > 0)
    result.tensor_types.push_back(std::string("gguf: ") + std::to_string(gptq_weights->load()) +
                                  " weights quantized by GPTQ on the recipe's block types; "
                                  "llama.cpp's imatrix of the " +
                                  std::to_string(opt.imatrix_info.chunk_count) +
                                  " calibration samples in " + kImatrixFileName);
  else if (!imatrix_entries.empty())
    result.tensor_types.push_back(std::string("gguf: ") + std::to_string(imatrix_entries.size()) +
                                  " weights quantized with the importance of " +
                                  std::to_string(opt.imatrix_info.chunk_count) +
                                  " calibration samples; llama.cpp's imatrix of them in " +
                                  kImatrixFileName);
  result.type_of = types->type_of;
  result.notes = chat.notes;
  if (opt.recipe) {
    for (const std::string& line : opt.recipe->DescribeFallbacks())
      result.notes.push_back("GGUF " +
                             std::string(gguf::GgufFileTypeName(opt.recipe->file_type())) +
                             ", llama.cpp's fallback: " + line);
  }
  for (const auto& [note, modules] : notes->tensors) {
    std::string line = note + ": " + std::to_string(modules.size()) + " weight" +
                       (modules.size() == 1 ? "" : "s") + " (";
    for (size_t i = 0; i < modules.size() && i < 3; ++i) line += (i ? ", " : "") + modules[i];
    if (modules.size() > 3) line += ", ...";
    result.notes.push_back(line + ")");
  }
  return result;
}

}  // namespace quantd::exporter
