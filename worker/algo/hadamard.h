// Orthogonal rotations built from Hadamard matrices, for QuaRot-style
// rotation of a model's hidden states (rotation.h).
//
// A Rotation of size n is R = diag(s) K with K = kron(A, B):
//  - A = H_a / sqrt(a), a Sylvester Hadamard matrix (a a power of two),
//    applied with the fast Walsh-Hadamard transform;
//  - B = H_b / sqrt(b), a Paley Hadamard matrix of order b (b = q + 1 with q
//    a prime = 3 mod 4, or b = 2 (q + 1) with q a prime = 1 mod 4), when
//    n = a b has such a factor; n = 5120 is 256 x H_20, n = 14336 is
//    512 x H_28. Otherwise (no construction here for the odd part, e.g.
//    n = 172 = 4 x 43) B is a seeded random orthogonal matrix of the odd
//    part's order, so R is still orthogonal, only not a Hadamard matrix;
//  - s are random signs (random Hadamard, QuaRot's R1 and R2) or all ones
//    (the plain Hadamard of the online R4).
// x R costs O(n log a + n b) per row instead of O(n^2). Random draws come
// from a 64-bit Mersenne Twister with a portable Gaussian, so a seed gives
// the same rotation everywhere.
#ifndef QUANTD_WORKER_ALGO_HADAMARD_H_
#define QUANTD_WORKER_ALGO_HADAMARD_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "worker/common/status.h"

namespace quantd::algo {

class Rotation {
 public:
  // INVALID_ARGUMENT for n < 1.
  static StatusOr<Rotation> Create(int64_t n, bool random_signs, uint64_t seed);

  int64_t size() const { return n_; }
  // True when R is a (signed, normalised) Hadamard matrix.
  bool hadamard() const { return hadamard_; }
  // e.g. "random Hadamard 4096 (Sylvester)", "Hadamard 172 (4 x random
  // orthogonal 43)".
  const std::string& description() const { return description_; }

  // x R along the last dimension (size n), in x's dtype (float64 for
  // weights, float32 for online activations). May throw c10::Error.
  at::Tensor Apply(const at::Tensor& x) const;
  // x R^T along the last dimension.
  at::Tensor ApplyTransposed(const at::Tensor& x) const;
  // The dense matrix R, float64 [n, n].
  at::Tensor Matrix() const;

 private:
  at::Tensor Kron(const at::Tensor& x, bool transpose_b) const;

  int64_t n_ = 0;
  int64_t a_ = 1;     // Sylvester order
  at::Tensor b_;      // float64 [b, b], orthogonal
  at::Tensor signs_;  // float64 [n], or undefined for all ones
  bool hadamard_ = true;
  std::string description_;
};

// The normalised Hadamard matrix H_b / sqrt(b) of a Paley order (see
// above), float64; undefined when b is not one.
at::Tensor PaleyHadamard(int64_t b);

}  // namespace quantd::algo

#endif  // QUANTD_WORKER_ALGO_HADAMARD_H_
