#include "worker/algo/hadamard.h"

#include <c10/util/Exception.h>

#include <cmath>
#include <random>
#include <tuple>

namespace quantd::algo {
namespace {

bool IsPrime(int64_t q) {
  if (q < 2) return false;
  for (int64_t d = 2; d * d <= q; ++d)
    if (q % d == 0) return false;
  return true;
}

// The quadratic character of a modulo the prime q (Euler's criterion).
int Chi(int64_t a, int64_t q) {
  a %= q;
  if (a < 0) a += q;
  if (a == 0) return 0;
  int64_t r = 1, b = a, e = (q - 1) / 2;
  while (e > 0) {
    if (e & 1) r = r * b % q;
    b = b * b % q;
    e >>= 1;
  }
  return r == 1 ? 1 : -1;
}

// Paley construction I: q prime, q = 3 (mod 4); order q + 1.
at::Tensor PaleyI(int64_t q) {
  const int64_t n = q + 1;
  at::Tensor h = at::zeros({n, n}, at::kDouble);
  auto a = h.accessor<double, 2>();
  for (int64_t j = 0; j < n; ++j) a[0][j] = 1;
  for (int64_t i = 1; i < n; ++i) {
    a[i][0] = -1;
    for (int64_t j = 1; j < n; ++j) a[i][j] = i == j ? 1 : Chi(j - i, q);
  }
  return h;
}

// Paley construction II: q prime, q = 1 (mod 4); order 2 (q + 1).
at::Tensor PaleyII(int64_t q) {
  const int64_t m = q + 1;
  at::Tensor c = at::zeros({m, m}, at::kDouble);
  auto a = c.accessor<double, 2>();
  for (int64_t j = 1; j < m; ++j) a[0][j] = a[j][0] = 1;
  for (int64_t i = 1; i < m; ++i)
    for (int64_t j = 1; j < m; ++j) a[i][j] = Chi(j - i, q);
  at::Tensor plus = at::tensor({1.0, 1.0, 1.0, -1.0}, at::kDouble).view({2, 2});
  at::Tensor minus = at::tensor({1.0, -1.0, -1.0, -1.0}, at::kDouble).view({2, 2});
  return at::kron(c, plus) + at::kron(at::eye(m, at::kDouble), minus);
}

// Uniform in [0, 1) from 53 random bits, so the stream is the same on every
// standard library (std::*_distribution are implementation-defined).
double Uniform(std::mt19937_64& gen) {
  return static_cast<double>(gen() >> 11) * (1.0 / 9007199254740992.0);
}

double Gaussian(std::mt19937_64& gen) {
  const double u1 = 1.0 - Uniform(gen);  // (0, 1]
  const double u2 = Uniform(gen);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// A random orthogonal matrix: QR of a Gaussian matrix, signs fixed so the
// distribution is uniform (Haar).
at::Tensor RandomOrthogonal(int64_t m, uint64_t seed) {
  std::mt19937_64 gen(seed);
  at::Tensor g = at::empty({m, m}, at::kDouble);
  double* p = g.data_ptr<double>();
  for (int64_t i = 0; i < m * m; ++i) p[i] = Gaussian(gen);
  auto [q, r] = at::linalg_qr(g);
  return q * at::sign(r.diagonal()).unsqueeze(0);
}

// x [N, a, m]: the fast Walsh-Hadamard transform along dim 1, normalised.
at::Tensor Fwht(at::Tensor y, int64_t a) {
  const int64_t n = y.size(0), m = y.size(2);
  for (int64_t h = 1; h < a; h *= 2) {
    at::Tensor v = y.reshape({n, a / (2 * h), 2, h, m});
    at::Tensor x0 = v.select(2, 0), x1 = v.select(2, 1);
    y = at::stack({x0 + x1, x0 - x1}, 2).reshape({n, a, m});
  }
  return y * (1.0 / std::sqrt(static_cast<double>(a)));
}

}  // namespace

at::Tensor PaleyHadamard(int64_t b) {
  if (b < 4 || b % 4 != 0) return at::Tensor();
  at::Tensor h;
  if (IsPrime(b - 1) && (b - 1) % 4 == 3) {
    h = PaleyI(b - 1);
  } else if (IsPrime(b / 2 - 1) && (b / 2 - 1) % 4 == 1) {
    h = PaleyII(b / 2 - 1);
  } else {
    return at::Tensor();
  }
  // Integers: H H^T == b I holds exactly when the construction is right.
  if (!at::equal(h.matmul(h.t()), at::eye(b, at::kDouble) * static_cast<double>(b))) {
    return at::Tensor();
  }
  return h / std::sqrt(static_cast<double>(b));
}

StatusOr<Rotation> Rotation::Create(int64_t n, bool random_signs, uint64_t seed) {
  if (n < 1) return InvalidArgumentError("a rotation needs a positive size");
  try {
    Rotation r;
    r.n_ = n;
    int64_t twos = 0;
    while (((n >> twos) & 1) == 0) ++twos;
    const int64_t odd = n >> twos;
    std::string how;
    if (odd == 1) {
      r.a_ = n;
      r.b_ = at::ones({1, 1}, at::kDouble);
      how = "Sylvester";
    } else {
      for (int64_t j = 2; j <= twos && !r.b_.defined(); ++j) {
        at::Tensor p = PaleyHadamard(odd << j);
        if (!p.defined()) continue;
        r.b_ = p;
        r.a_ = n / (odd << j);
        how = std::to_string(r.a_) + " x Paley " + std::to_string(odd << j);
      }
      if (!r.b_.defined()) {
        // No Hadamard construction for this order here: a random orthogonal
        // factor keeps R orthogonal.
        r.a_ = int64_t{1} << twos;
        r.b_ = RandomOrthogonal(odd, seed ^ 0x9e3779b97f4a7c15ULL);
        r.hadamard_ = false;
        how = std::to_string(r.a_) + " x random orthogonal " + std::to_string(odd);
      }
    }
    if (random_signs) {
      std::mt19937_64 gen(seed);
      r.signs_ = at::empty({n}, at::kDouble);
      double* s = r.signs_.data_ptr<double>();
      for (int64_t i = 0; i < n; ++i) s[i] = (gen() >> 63) ? -1.0 : 1.0;
    }
    r.description_ = std::string(random_signs ? "random " : "") +
                     (r.hadamard_ ? "Hadamard " : "orthogonal ") + std::to_string(n) + " (" + how +
                     ")";
    return r;
  } catch (const c10::Error& e) {
    return InternalError(std::string("building a rotation: ") + e.what_without_backtrace());
  }
}

at::Tensor Rotation::Kron(const at::Tensor& x, bool transpose_b) const {
  const int64_t m = b_.size(0);
  std::vector<int64_t> sizes = x.sizes().vec();
  at::Tensor y = x.reshape({-1, a_, m});
  if (m > 1) {
    at::Tensor b = b_.to(x.device(), x.scalar_type());
    y = at::matmul(y, transpose_b ? b.t() : b);
  }
  if (a_ > 1) y = Fwht(y, a_);
  return y.reshape(sizes);
}

at::Tensor Rotation::Apply(const at::Tensor& x) const {
  TORCH_CHECK(x.size(-1) == n_, "rotation of size ", n_, " applied to a last dimension of ",
              x.size(-1));
  at::Tensor y = signs_.defined() ? x * signs_.to(x.device(), x.scalar_type()) : x;
  return Kron(y, /*transpose_b=*/false);
}

at::Tensor Rotation::ApplyTransposed(const at::Tensor& x) const {
  TORCH_CHECK(x.size(-1) == n_, "rotation of size ", n_, " applied to a last dimension of ",
              x.size(-1));
  at::Tensor y = Kron(x, /*transpose_b=*/true);
  return signs_.defined() ? y * signs_.to(x.device(), x.scalar_type()) : y;
}

at::Tensor Rotation::Matrix() const { return Apply(at::eye(n_, at::kDouble)); }

}  // namespace quantd::algo
