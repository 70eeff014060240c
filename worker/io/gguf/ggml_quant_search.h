// The searches ggml's quantizers share (ggml-quants.c), for the reference
// quantizers (ggml_kquants.cc) and the importance-weighted ones
// (ggml_weighted_quants.cc). Internal to //worker/io/gguf:ggml_types.
#ifndef QUANTD_WORKER_IO_GGUF_GGML_QUANT_SEARCH_H_
#define QUANTD_WORKER_IO_GGUF_GGML_QUANT_SEARCH_H_

#include <cstdint>

namespace quantd::gguf::search {

inline constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS

// ggml's nearest_int: round half to even through the float mantissa.
int NearestInt(float f);

// The element of largest magnitude (the first on ties); `amax` receives
// its magnitude.
float LargestMagnitude(int n, const float* x, float* amax);

// ggml's make_qkx2_quants (and make_qkx3_quants with weights and use_mad
// false, the same search): codes in [0, nmax] with a scale and a (negated)
// min fitted by weighted least squares over trial scales
// (rmin + rdelta * is + nmax) / (max - min), is = 0..nstep. Returns the
// scale; `neg_min` receives -min. `trial` is n bytes of scratch.
// With `use_mad` the error is the weighted absolute difference (Q2_K's
// reference quantizer), else the weighted squared one.
float FitScaleAndMin(int n, int nmax, const float* x, const float* weights, uint8_t* codes,
                     float* neg_min, uint8_t* trial, float rmin, float rdelta, int nstep,
                     bool use_mad = false);

// ggml's make_qx_quants with rmse_type 1: signed codes in [-nmax, nmax - 1]
// stored + nmax, and the scale the best of 19 trial scales gives, weighting
// each element by qw (x^2 when qw is null).
float FitSymmetricScale(int n, int nmax, const float* x, const float* qw, int8_t* codes);

// ggml's make_qp_quants: codes in [0, nmax] for non-negative x (the
// sub-block scales and mins of a K-quant super-block) and the scale that
// minimises the qw-weighted error, refined by moving single codes.
float FitPositiveScale(int n, int nmax, const float* x, uint8_t* codes, const float* qw);

}  // namespace quantd::gguf::search

#endif  // QUANTD_WORKER_IO_GGUF_GGML_QUANT_SEARCH_H_
