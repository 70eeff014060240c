#include "worker/models/matmul_dtype.h"

namespace quantd::models {
namespace {

thread_local std::optional<at::ScalarType> g_matmul_dtype;

}  // namespace

std::optional<at::ScalarType> MatmulDtype() { return g_matmul_dtype; }

MatmulDtypeScope::MatmulDtypeScope(std::optional<at::ScalarType> dtype)
    : previous_(g_matmul_dtype) {
  if (dtype) g_matmul_dtype = dtype;
}

MatmulDtypeScope::~MatmulDtypeScope() { g_matmul_dtype = previous_; }

at::Tensor Matmul(const at::Tensor& a, const at::Tensor& b) {
  const std::optional<at::ScalarType> t = g_matmul_dtype;
  if (!t || *t == a.scalar_type()) return at::matmul(a, b);
  return at::matmul(a.to(*t), b.to(*t)).to(a.scalar_type());
}

}  // namespace quantd::models
