// Freezing: a quantized linear's weight kept as real-quantized codes (int8 /
// uint8 integer codes, FP8 bit patterns, MX element codes with E8M0 block
// scales, or fp16/bf16) plus its scale and zero point, dequantized on the fly
// at every forward. The float copy is dropped, so a frozen block really
// holds less memory, and its outputs are identical to the fake-quantized
// block's (the dequantized codes are exactly the fake-quantized weights).
#ifndef QUANTD_WORKER_PIPELINE_FREEZE_H_
#define QUANTD_WORKER_PIPELINE_FREEZE_H_

#include <ATen/ATen.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "worker/common/status.h"
#include "worker/models/causal_lm.h"
#include "worker/models/decoder_block.h"
#include "worker/models/linear.h"
#include "worker/pipeline/layer_plan.h"
#include "worker/quant/fake_quant.h"

namespace quantd::pipeline {

// A weight held as its real-quantized codes and parameters; 4-bit codes
// (int4, uint4, MXFP4 elements) are packed two per byte, even element in the
// low nibble. Dequantize gives back the fake-quantized weight.
class FrozenWeight {
 public:
  // `shape`: the float weight's (empty: the codes').
  FrozenWeight(quant::QuantizedTensor weight, quant::QuantSpec spec,
               std::vector<int64_t> shape = {});
  StatusOr<at::Tensor> Dequantize(at::ScalarType dtype = at::kFloat) const;
  // Bytes held: codes, scales, zero points, E8M0 block scales. Codes of
  // 2, 3, 5 and 6 bits are held one per byte.
  int64_t bytes() const;
  // Bytes at the codes' real bit width, as model sizes count them
  // (QuantizedStorageBytes): what a packed file of the weight takes.
  int64_t packed_bytes() const;
  const quant::QuantSpec& spec() const { return spec_; }

 private:
  quant::QuantizedTensor Unpacked() const;

  quant::QuantizedTensor weight_;  // codes packed when packed_
  quant::QuantSpec spec_;
  bool packed_ = false;
  std::vector<int64_t> code_shape_;
  at::ScalarType code_dtype_ = at::kByte;
  std::vector<int64_t> shape_;  // the float weight's
};

// The frozen form of `weight` with parameters `qp` (computed from the weight
// when empty) when its codes dequantize to the weight bit for bit; nullopt
// when they do not (the weight then stays float). Errors name `name`.
StatusOr<std::optional<FrozenWeight>> FreezeWeight(const at::Tensor& weight,
                                                   const quant::QuantSpec& spec,
                                                   const quant::QParams& qp,
                                                   const std::string& name);

class FrozenLinearKernel final : public models::LinearKernel {
 public:
  explicit FrozenLinearKernel(FrozenWeight weight) : weight_(std::move(weight)) {}
  at::Tensor Forward(const models::Linear& layer, const at::Tensor& x) const override;
  int64_t bytes() const { return weight_.bytes(); }
  int64_t packed_bytes() const { return weight_.packed_bytes(); }

 private:
  FrozenWeight weight_;
};

// Two 4-bit codes per byte (even element in the low nibble); an odd count is
// padded with a zero nibble. UnpackNibbles sign-extends for signed dtypes.
at::Tensor PackNibbles(const at::Tensor& codes);
at::Tensor UnpackNibbles(const at::Tensor& packed, int64_t numel, bool is_signed);

struct FreezeReport {
  int layers = 0;            // linears frozen
  int64_t float_bytes = 0;   // their weights before
  int64_t frozen_bytes = 0;  // their weights after, as held in memory
  int64_t packed_bytes = 0;  // their weights at the codes' bit widths
  // Layers left in float because their codes would not dequantize to the
  // current weight bit for bit (e.g. GPTQ's act-order groups, whose
  // parameters follow a permutation the codes cannot express).
  std::vector<std::string> kept_float;

  FreezeReport& operator+=(const FreezeReport& o);
};

// Freezes every linear of `block` whose plan quantizes the weight, with the
// weight's exact parameters from `weight_qparams` (by module name) when
// given, else parameters computed from the weight. Errors name the layer.
// Only layers whose codes dequantize exactly to the current weight are
// frozen (so the block's outputs cannot change); the others are listed in
// kept_float.
StatusOr<FreezeReport> FreezeBlock(
    models::DecoderBlock& block, const std::map<std::string, LayerPlan>& plans,
    const std::map<std::string, quant::QParams>& weight_qparams = {});

// A frozen embedding table: its codes (4-bit ones two per byte when the row
// length is even, so rows stay byte-aligned) and parameters; a lookup
// gathers the rows' codes and parameters and dequantizes only those rows.
class FrozenEmbeddingLookup final : public models::EmbeddingLookup {
 public:
  FrozenEmbeddingLookup(quant::QuantizedTensor table, quant::QuantSpec spec, at::ScalarType dtype);
  at::Tensor Forward(const models::Embedding& embedding, const at::Tensor& ids) const override;
  // Bytes held: codes, scales, zero points, E8M0 block scales.
  int64_t bytes() const;

 private:
  quant::QuantizedTensor table_;  // codes [num, dim], or [num, dim / 2] packed
  quant::QuantSpec spec_;
  at::ScalarType dtype_;  // the float table's dtype, what lookups return
  int64_t num_ = 0;
  int64_t dim_ = 0;
  bool packed_ = false;
  at::ScalarType code_dtype_ = at::kByte;
  // How the parameters index: one set for all rows, one per row (gathered
  // with the rows), or groups that run along the rows (then the table is
  // dequantized whole).
  enum class Params { kShared, kPerRow, kAcrossRows } params_ = Params::kShared;
};

// Freezes a quantized embedding with its exact parameters `qparams`
// (computed from the table when empty): the float table is dropped when the
// codes dequantize to it bit for bit; otherwise it is kept (kept_float).
StatusOr<FreezeReport> FreezeEmbedding(models::Embedding& embedding, const quant::QuantSpec& spec,
                                       const quant::QParams& qparams = {});

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_FREEZE_H_
