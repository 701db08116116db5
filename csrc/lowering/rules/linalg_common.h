// Matrix helpers shared by the linear-algebra rule files (linalg.cpp, linalg_solve.cpp, linalg_decomp.cpp).
#pragma once

#include <algorithm>

#include "lowering/helpers.h"

namespace torch_tpu::lowering::linalg {

inline Value mT(Builder& b, Value x) {
  std::vector<int64_t> perm;
  for (int64_t k = 0; k < x.rank(); ++k) perm.push_back(k);
  std::swap(perm[x.rank() - 1], perm[x.rank() - 2]);
  return b.transpose(x, perm);
}

// Conjugate transpose of the last two dims (the transpose for real matrices).
inline Value mH(Builder& b, Value x) { return b.conj(mT(b, x)); }

// 1 on the diagonal of the last two dims, 0 elsewhere, in dtype t (real or complex).
inline Value identity(Builder& b, const Shape& s, DType t) {
  int64_t r = int64_t(s.size());
  Value diag = b.compare(b.iota({DType::S64, s}, r - 2), b.iota({DType::S64, s}, r - 1), shlo::Cmp::EQ);
  return b.select(diag, b.constantF(1, t, s), b.constantF(0, t, s));
}

inline bool floatOrComplex(DType t) { return shlo::isFloat(t) || shlo::isComplex(t); }

inline bool floatMatrices(const Context& ctx) {
  if (!realDTypes(ctx)) return false;
  for (const Arg& a : ctx.args)
    if (a.kind == Arg::Kind::Tensor && a.tensor.valid() && !floatOrComplex(a.tensor.dtype())) return false;
  return true;
}

// The LU and QR rules unroll over the columns: larger matrices decline (the program grows with n).
constexpr int64_t kMaxLU = 64;

// Sum over dim `d` of select(mask, x, 0): picks one row/column per batch when mask is one-hot along d.
inline Value pick(Builder& b, Value mask, Value x, int64_t d) {
  return b.reduce(b.select(mask, x, b.zerosLike(x)), {d}, ReduceKind::Sum);
}

// Argument i a float or complex (batch of) matrix whose smaller side is at most kMaxLU.
inline bool squareSmall(const Context& ctx, size_t i) {
  if (!realDTypes(ctx)) return false;
  Value a = ctx.tensor(i);
  if (!floatOrComplex(a.dtype())) return false;
  return a.rank() >= 2 && std::min(a.shape()[a.rank() - 1], a.shape()[a.rank() - 2]) <= kMaxLU;
}

}  // namespace torch_tpu::lowering::linalg
