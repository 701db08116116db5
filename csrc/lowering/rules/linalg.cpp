// Linear-algebra family: mm, bmm, addmm, baddbmm, addbmm, mv, addmv, dot, _addmm_activation, addr, linalg_cross,
// Cholesky and triangular solves, LU (factor, solve, det, slogdet, inverse, unpack), QR, the Hermitian
// eigendecomposition (_linalg_eigh) and the SVD (_linalg_svd), both through Builder::eigh.
//
// matmul/linear are CompositeImplicit in PyTorch and reach these through views. bf16/f16 products accumulate in f32
// (dot_general with an f32 result) and the whole epilogue (beta*self + alpha*product) runs in f32 before one
// rounding, as PyTorch CPU's gemm does.
#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

using shlo::Cmp;

// Contracts lhs dim lc with rhs dim rc, batching over the leading `nbatch` dims; result in accType(lhs dtype).
Value product(Builder& b, Value lhs, Value rhs, int64_t nbatch, int64_t lc, int64_t rc, DType acc) {
  std::vector<int64_t> batch;
  for (int64_t k = 0; k < nbatch; ++k) batch.push_back(k);
  if (rhs.dtype() != lhs.dtype()) rhs = b.convert(rhs, lhs.dtype());
  if (shlo::isFloat8(lhs.dtype())) {  // float8 products: exact widening to f32, then an f32 product
    lhs = b.convert(lhs, DType::F32);
    rhs = b.convert(rhs, DType::F32);
  }
  if (lhs.dtype() == DType::Pred) {  // no boolean dot: compute in s64
    lhs = b.convert(lhs, DType::S64);
    rhs = b.convert(rhs, DType::S64);
    acc = DType::S64;
  }
  return b.dotGeneral(lhs, rhs, batch, batch, {lc}, {rc}, acc);
}

// beta * self + alpha * prod in prod's dtype; beta == 0 ignores self (NaN/inf in self are not propagated).
Value epilogue(Context& ctx, Value prod, size_t self_i, size_t beta_i, size_t alpha_i) {
  Builder& b = ctx.b;
  DType c = prod.dtype();
  const Shape& shape = prod.shape();
  Value res = prod;
  if (ctx.has(alpha_i)) res = b.mul(res, operand(ctx, alpha_i, c, shape));
  Value self = operand(ctx, self_i, c, shape);
  if (ctx.has(beta_i)) {
    Value beta = scalarArg(ctx, beta_i, c);
    Value scaled = b.mul(self, b.broadcastTo(beta, shape));
    Value is_zero = b.compare(beta, b.constant(0, c), Cmp::EQ);
    self = b.select(is_zero, b.zerosLike(scaled), scaled);
  }
  return c == DType::Pred ? b.orOp(res, self) : b.add(res, self);
}

// Matrix products take operands of one dtype (and a bias tensor of that dtype): the CPU kernels reject others.
void sameDTypes(const Context& ctx, std::initializer_list<size_t> operands, int self_i = -1) {
  DType t = ctx.tensor(*operands.begin()).dtype();
  for (size_t i : operands)
    if (ctx.tensor(i).dtype() != t) throw InvalidCall(ctx.op(), "operands of different dtypes");
  if (self_i >= 0 && ctx.arg(size_t(self_i)).kind == Arg::Kind::Tensor && !ctx.arg(size_t(self_i)).wrapped_number &&
      ctx.tensor(size_t(self_i)).dtype() != t)
    throw InvalidCall(ctx.op(), "operands of different dtypes");
}

std::vector<Value> mmLike(Context& ctx, size_t lhs_i, size_t rhs_i, int64_t nbatch, int64_t lc, int64_t rc,
                          int self_i = -1, size_t beta_i = 0, size_t alpha_i = 0) {
  Builder& b = ctx.b;
  Value lhs = ctx.tensor(lhs_i), rhs = ctx.tensor(rhs_i);
  sameDTypes(ctx, {lhs_i, rhs_i}, self_i);
  DType out = lhs.dtype();
  DType acc = accType(out);
  Value p = product(b, lhs, rhs, nbatch, lc, rc, acc);
  if (self_i >= 0) p = epilogue(ctx, p, size_t(self_i), beta_i, alpha_i);
  return {b.convert(p, out)};
}


// ---- triangular solves and Cholesky (stablehlo.triangular_solve / stablehlo.cholesky) ----

// op(a) of a triangular solve: a, its transpose, or its conjugate transpose (the transpose for real matrices).
enum class OpA { None, Transpose, Adjoint };

// Solves op(a) x = rhs (left) or x op(a) = rhs (right); a [..., m, m], rhs with the same batch dims. Real and
// complex matrices alike.
Value triSolve(Builder& b, Value a, Value rhs, bool left, bool lower, bool unit, OpA op) {
  const char* t = op == OpA::None ? "NO_TRANSPOSE" : op == OpA::Transpose ? "TRANSPOSE" : "ADJOINT";
  if (op == OpA::Adjoint && !shlo::isComplex(a.dtype())) t = "TRANSPOSE";
  std::string text = "\"stablehlo.triangular_solve\"(" + b.ref(a) + ", " + b.ref(rhs) + ") {left_side = " +
                     (left ? "true" : "false") + ", lower = " + (lower ? "true" : "false") +
                     ", unit_diagonal = " + (unit ? "true" : "false") + ", transpose_a = #stablehlo<transpose " + t +
                     ">}";
  return b.raw(text, "(" + a.type.str() + ", " + rhs.type.str() + ") -> " + rhs.type.str(), rhs.type);
}

Value mH(Builder& b, Value x);

Value lowerMask(Builder& b, const Shape& shape, bool lower) {
  int64_t r = int64_t(shape.size());
  Value row = b.iota({DType::S64, shape}, r - 2), col = b.iota({DType::S64, shape}, r - 1);
  return b.compare(col, row, lower ? Cmp::LE : Cmp::GE);
}

// Lower Cholesky factor (the other triangle zeroed): a = L L^H, read from a's lower triangle (upper: from its upper
// triangle, L = U^H), and of a complex diagonal only the real part, as LAPACK's potrf.
Value choleskyLower(Builder& b, Value a, bool upper) {
  if (upper) a = mH(b, a);
  auto realDiagonal = [&](Value x) {  // complex: the imaginary part of the diagonal dropped
    if (!shlo::isComplex(x.dtype())) return x;
    int64_t r = x.rank();
    Value diag = b.compare(b.iota({DType::S64, x.shape()}, r - 2), b.iota({DType::S64, x.shape()}, r - 1), Cmp::EQ);
    Value re = b.realPart(x);
    return b.select(diag, b.complex(re, b.zerosLike(re)), x);
  };
  a = realDiagonal(a);
  std::string text = "\"stablehlo.cholesky\"(" + b.ref(a) + ") {lower = true}";
  Value l = realDiagonal(b.raw(text, "(" + a.type.str() + ") -> " + a.type.str(), a.type));
  return b.select(lowerMask(b, a.shape(), true), l, b.zerosLike(l));
}

Value mT(Builder& b, Value x) {
  std::vector<int64_t> perm;
  for (int64_t k = 0; k < x.rank(); ++k) perm.push_back(k);
  std::swap(perm[x.rank() - 1], perm[x.rank() - 2]);
  return b.transpose(x, perm);
}

// Conjugate transpose of the last two dims (the transpose for real matrices).
Value mH(Builder& b, Value x) { return b.conj(mT(b, x)); }

// The real number LAPACK's pivot search compares: |x|, for complex |re| + |im| (BLAS i?amax).
Value pivotMagnitude(Builder& b, Value x) {
  if (!shlo::isComplex(x.dtype())) return b.abs(x);
  return b.add(b.abs(b.realPart(x)), b.abs(b.imagPart(x)));
}

// 1 on the diagonal of the last two dims, 0 elsewhere, in dtype t (real or complex).
Value identity(Builder& b, const Shape& s, DType t) {
  int64_t r = int64_t(s.size());
  Value diag = b.compare(b.iota({DType::S64, s}, r - 2), b.iota({DType::S64, s}, r - 1), Cmp::EQ);
  return b.select(diag, b.constantF(1, t, s), b.constantF(0, t, s));
}

bool floatOrComplex(DType t) { return shlo::isFloat(t) || shlo::isComplex(t); }

// Broadcasts the batch dims (all but the last two) of x and y to each other.
std::pair<Value, Value> broadcastBatch(Builder& b, Value x, Value y) {
  Shape bx(x.shape().begin(), x.shape().end() - 2), by(y.shape().begin(), y.shape().end() - 2);
  Shape bb = broadcastShapes({bx, by});
  Shape sx = bb, sy = bb;
  sx.insert(sx.end(), x.shape().end() - 2, x.shape().end());
  sy.insert(sy.end(), y.shape().end() - 2, y.shape().end());
  return {b.broadcastTo(x, sx), b.broadcastTo(y, sy)};
}

bool floatMatrices(const Context& ctx) {
  if (!realDTypes(ctx)) return false;
  for (const Arg& a : ctx.args)
    if (a.kind == Arg::Kind::Tensor && a.tensor.valid() && !floatOrComplex(a.tensor.dtype())) return false;
  return true;
}

// ---- LU with partial pivoting (LAPACK getrf's choices), unrolled over the columns ----

constexpr int64_t kMaxLU = 64;  // larger matrices decline (the program grows with n)

struct LU {
  Value lu;      // [..., m, n] in the compute dtype
  Value pivots;  // [..., k] int32, 1-based (LAPACK)
  Value info;    // [...] int32
};

// Sum over dim `d` of select(mask, x, 0): picks one row/column per batch when mask is one-hot along d.
Value pick(Builder& b, Value mask, Value x, int64_t d) {
  return b.reduce(b.select(mask, x, b.zerosLike(x)), {d}, ReduceKind::Sum);
}

LU luFactor(Builder& b, Value a) {
  int64_t r = a.rank(), m = a.shape()[r - 2], n = a.shape()[r - 1], k = std::min(m, n);
  const Shape s = a.shape();
  Shape batch(s.begin(), s.end() - 2);
  std::vector<int64_t> bdims;
  for (int64_t d = 0; d < r - 2; ++d) bdims.push_back(d);
  Value rows = b.iota({DType::S64, s}, r - 2), cols = b.iota({DType::S64, s}, r - 1);
  Shape col_shape = batch;
  col_shape.push_back(m);  // [..., m]
  Value rows1 = b.iota({DType::S64, col_shape}, r - 2);
  std::vector<Value> pivs;
  Value info = b.zeros({DType::S32, batch});
  auto bcastRow = [&](Value v) {  // [..., n] -> [..., m, n]
    std::vector<int64_t> map = bdims;
    map.push_back(r - 1);
    return b.broadcastInDim(v, s, map);
  };
  auto bcastCol = [&](Value v) {  // [..., m] -> [..., m, n]
    std::vector<int64_t> map = bdims;
    map.push_back(r - 2);
    return b.broadcastInDim(v, s, map);
  };
  auto bcastBatch = [&](Value v, const Shape& to, int64_t extra) {  // [...] -> to (extra trailing dims)
    (void)extra;
    return b.broadcastInDim(v, to, bdims);
  };
  for (int64_t j = 0; j < k; ++j) {
    Value jcol = b.compare(cols, b.constantF(double(j), DType::S64, s), Cmp::EQ);
    Value col = pick(b, jcol, a, r - 1);  // [..., m]
    Value mag = pivotMagnitude(b, col);
    Value cand = b.select(b.compare(rows1, b.constantF(double(j), DType::S64, col_shape), Cmp::GE), mag,
                          b.constantF(-1, mag.dtype(), col_shape));
    Value p = b.argReduce(cand, rows1, r - 2, true)[1];  // [...] int64
    pivs.push_back(b.convert(p, DType::S32));
    Value pb = bcastBatch(p, s, 2);
    Value is_p = b.compare(rows, pb, Cmp::EQ);
    Value is_j = b.compare(rows, b.constantF(double(j), DType::S64, s), Cmp::EQ);
    Value row_p = bcastRow(pick(b, is_p, a, r - 2)), row_j = bcastRow(pick(b, is_j, a, r - 2));
    Value piv = pick(b, b.compare(rows1, bcastBatch(p, col_shape, 1), Cmp::EQ), col, r - 2);  // [...]
    Value nonzero = b.compare(piv, b.zerosLike(piv), Cmp::NE);
    info = b.select(b.andOp(b.notOp(nonzero), b.compare(info, b.zerosLike(info), Cmp::EQ)),
                    b.constantF(double(j + 1), DType::S32, batch), info);
    Value swapped = b.select(is_j, row_p, b.select(is_p, row_j, a));
    a = b.select(bcastBatch(nonzero, s, 2), swapped, a);
    // multipliers below the pivot, then the trailing update
    Value pivb = bcastBatch(b.select(nonzero, piv, b.onesLike(piv)), s, 2);
    Value below = b.compare(rows, b.constantF(double(j), DType::S64, s), Cmp::GT);
    Value colj = bcastCol(pick(b, jcol, a, r - 1));
    Value l = b.div(colj, pivb);
    Value nzb = bcastBatch(nonzero, s, 2);
    a = b.select(b.andOp(b.andOp(below, jcol), nzb), l, a);
    Value rowj = bcastRow(pick(b, is_j, a, r - 2));
    Value right = b.compare(cols, b.constantF(double(j), DType::S64, s), Cmp::GT);
    Value upd = b.sub(a, b.mul(l, rowj));
    a = b.select(b.andOp(b.andOp(below, right), nzb), upd, a);
  }
  Shape ps = batch;
  ps.push_back(k);
  Value pv;
  if (k == 0) {
    pv = b.zeros({DType::S32, ps});
  } else {
    std::vector<Value> parts;
    Shape one = batch;
    one.push_back(1);
    for (auto& v : pivs) parts.push_back(b.reshape(v, one));
    pv = parts.size() == 1 ? parts[0] : b.concatenate(parts, r - 2);
    pv = b.add(pv, b.constantF(1, DType::S32, ps));
  }
  return {a, pv, info};
}

// Applies the row interchanges of `pivots` (1-based) to rhs [..., m, nrhs], forward or in reverse order.
Value applyPivots(Builder& b, Value rhs, Value pivots, bool reverse) {
  int64_t r = rhs.rank(), k = pivots.shape().back();
  const Shape s = rhs.shape();
  std::vector<int64_t> bdims;
  for (int64_t d = 0; d < r - 2; ++d) bdims.push_back(d);
  Value rows = b.iota({DType::S64, s}, r - 2);
  for (int64_t t = 0; t < k; ++t) {
    int64_t j = reverse ? k - 1 - t : t;
    Value pj = b.sub(b.convert(b.reshape(b.sliceInDim(pivots, j, j + 1, 1, r - 2), Shape(s.begin(), s.end() - 2)),
                               DType::S64),
                     b.constantF(1, DType::S64, Shape(s.begin(), s.end() - 2)));
    Value is_p = b.compare(rows, b.broadcastInDim(pj, s, bdims), Cmp::EQ);
    Value is_j = b.compare(rows, b.constantF(double(j), DType::S64, s), Cmp::EQ);
    std::vector<int64_t> map = bdims;
    map.push_back(r - 1);
    Value row_p = b.broadcastInDim(pick(b, is_p, rhs, r - 2), s, map);
    Value row_j = b.broadcastInDim(pick(b, is_j, rhs, r - 2), s, map);
    rhs = b.select(is_j, row_p, b.select(is_p, row_j, rhs));
  }
  return rhs;
}

// Solves A X = B (adjoint: A^H X = B) from A's LU factors; lu [..., n, n], rhs [..., n, nrhs] (same batch).
Value luSolve(Builder& b, Value lu, Value pivots, Value rhs, bool adjoint) {
  if (!adjoint) {
    Value y = triSolve(b, lu, applyPivots(b, rhs, pivots, false), true, true, true, OpA::None);
    return triSolve(b, lu, y, true, false, false, OpA::None);
  }
  Value y = triSolve(b, lu, rhs, true, false, false, OpA::Adjoint);
  Value z = triSolve(b, lu, y, true, true, true, OpA::Adjoint);
  return applyPivots(b, z, pivots, true);
}

// sgn: x / |x| for complex (0 at 0), -1/0/1 for real.
Value signOf(Builder& b, Value x) {
  if (shlo::isComplex(x.dtype())) {
    Value mag = b.abs(x);
    Value zero = b.zerosLike(mag);
    Value is0 = b.compare(mag, zero, Cmp::EQ);
    Value safe = b.select(is0, b.onesLike(mag), mag);
    Value q = b.div(x, b.complex(safe, zero));
    return b.select(is0, b.zerosLike(x), q);
  }
  Value zero = b.zerosLike(x);
  return b.select(b.compare(x, zero, Cmp::GT), b.onesLike(x),
                  b.select(b.compare(x, zero, Cmp::LT), b.neg(b.onesLike(x)), zero));
}

Value diagOf(Builder& b, Value x) {  // [..., n, n] -> [..., n]
  int64_t r = x.rank();
  Value eye = b.compare(b.iota({DType::S64, x.shape()}, r - 2), b.iota({DType::S64, x.shape()}, r - 1), Cmp::EQ);
  return pick(b, eye, x, r - 1);
}

// Sign of the permutation: (-1)^(number of pivots that swap).
Value pivotSign(Builder& b, Value pivots, DType t) {
  int64_t r = pivots.rank(), k = pivots.shape().back();
  Value idx = b.add(b.iota({DType::S32, pivots.shape()}, r - 1), b.constantF(1, DType::S32, pivots.shape()));
  Value swaps = b.reduce(b.convert(b.compare(pivots, idx, Cmp::NE), DType::S32), {r - 1}, ReduceKind::Sum);
  (void)k;
  Value odd = b.compare(b.rem(swaps, b.constantF(2, DType::S32, swaps.shape())), b.zerosLike(swaps), Cmp::NE);
  return b.select(odd, b.constantF(-1, t, swaps.shape()), b.constantF(1, t, swaps.shape()));
}

bool squareSmall(const Context& ctx, size_t i) {
  if (!realDTypes(ctx)) return false;
  Value a = ctx.tensor(i);
  if (!floatOrComplex(a.dtype())) return false;
  return a.rank() >= 2 && std::min(a.shape()[a.rank() - 1], a.shape()[a.rank() - 2]) <= kMaxLU;
}

// The LU-based rules: argument 0 a float (batch of) matrix whose smaller side is at most kMaxLU.
bool luAccepts(const Context& ctx) { return squareSmall(ctx, 0); }

// ---- QR by Householder reflections (LAPACK geqrf/orgqr's choices), unrolled over the columns ----

struct QR {
  Value a;    // R on and above the diagonal, the reflectors' vectors below it (their leading 1 implied)
  Value tau;  // [..., min(m, n)]
};

// Column j of a [..., m, n] as [..., m].
Value columnOf(Builder& b, Value a, int64_t j) {
  int64_t r = a.rank();
  Value cols = b.iota({DType::S64, a.shape()}, r - 1);
  return pick(b, b.compare(cols, b.constantF(double(j), DType::S64, a.shape()), Cmp::EQ), a, r - 1);
}

// v [..., m] broadcast along the columns of shape s [..., m, n] (to_cols: w [..., n] along the rows).
Value alongRows(Builder& b, Value v, const Shape& s, bool to_cols) {
  int64_t r = int64_t(s.size());
  std::vector<int64_t> map;
  for (int64_t d = 0; d < r - 2; ++d) map.push_back(d);
  map.push_back(to_cols ? r - 1 : r - 2);
  return b.broadcastInDim(v, s, map);
}

// x := x - t * v (v^H x): one reflector H = I - t v v^H applied from the left to x [..., m, c]; v [..., m], t [...].
Value reflect(Builder& b, Value x, Value v, Value t) {
  int64_t r = x.rank();
  Value vb = alongRows(b, v, x.shape(), false);
  Value w = b.reduce(b.mul(b.conj(vb), x), {r - 2}, ReduceKind::Sum);  // [..., c]
  std::vector<int64_t> bdims;
  for (int64_t d = 0; d < r - 2; ++d) bdims.push_back(d);
  Value tb = b.broadcastInDim(t, x.shape(), bdims);
  return b.sub(x, b.mul(tb, b.mul(vb, alongRows(b, w, x.shape(), true))));
}

// geqrf: for each column, LAPACK's larfg (beta = -sign(alpha_re) * ||(alpha, x)||, tau = (beta - alpha) / beta,
// v = x / (alpha - beta); tau = 0 when x = 0 and alpha is real), then H^H applied to the columns on its right.
QR householderQR(Builder& b, Value a) {
  int64_t r = a.rank(), m = a.shape()[r - 2], n = a.shape()[r - 1], k = std::min(m, n);
  const Shape s = a.shape();
  Shape batch(s.begin(), s.end() - 2), col_shape = batch;
  col_shape.push_back(m);
  const bool cplx = shlo::isComplex(a.dtype());
  const DType rt = shlo::componentType(a.dtype());
  Value rows = b.iota({DType::S64, s}, r - 2), cols = b.iota({DType::S64, s}, r - 1);
  Value rows1 = b.iota({DType::S64, col_shape}, r - 2);
  auto toT = [&](Value re) { return cplx ? b.complex(re, b.zerosLike(re)) : re; };
  std::vector<Value> taus;
  Shape one = batch;
  one.push_back(1);
  for (int64_t j = 0; j < k; ++j) {
    Value col = columnOf(b, a, j);  // [..., m]
    Value at_j = b.compare(rows1, b.constantF(double(j), DType::S64, col_shape), Cmp::EQ);
    Value below = b.compare(rows1, b.constantF(double(j), DType::S64, col_shape), Cmp::GT);
    Value alpha = pick(b, at_j, col, r - 2);  // [...]
    Value x = b.select(below, col, b.zerosLike(col));
    Value xre = cplx ? b.realPart(x) : x, xim = cplx ? b.imagPart(x) : Value();
    Value sq = b.mul(xre, xre);
    if (cplx) sq = b.add(sq, b.mul(xim, xim));
    Value xnorm2 = b.reduce(sq, {r - 2}, ReduceKind::Sum);  // [...]
    Value ar = cplx ? b.realPart(alpha) : alpha, ai = cplx ? b.imagPart(alpha) : b.zerosLike(alpha);
    Value norm = b.sqrt(b.add(b.add(b.mul(ar, ar), b.mul(ai, ai)), xnorm2));
    Value beta = b.select(b.compare(ar, b.zerosLike(ar), Cmp::GE), b.neg(norm), norm);
    Value skip = b.andOp(b.compare(xnorm2, b.zerosLike(xnorm2), Cmp::EQ), b.compare(ai, b.zerosLike(ai), Cmp::EQ));
    Value safe_beta = b.select(skip, b.onesLike(beta), beta);
    Value tre = b.div(b.sub(safe_beta, ar), safe_beta);
    Value tau = cplx ? b.complex(tre, b.div(b.neg(ai), safe_beta)) : tre;
    tau = b.select(skip, b.zerosLike(tau), tau);
    Value denom = b.sub(alpha, toT(safe_beta));
    denom = b.select(skip, b.onesLike(denom), denom);
    std::vector<int64_t> bdims;
    for (int64_t d = 0; d < r - 2; ++d) bdims.push_back(d);
    Value vbelow = b.div(x, b.broadcastInDim(denom, col_shape, bdims));
    vbelow = b.select(b.broadcastInDim(skip, col_shape, bdims), x, vbelow);
    Value v = b.select(at_j, b.onesLike(col), vbelow);  // [..., m]; zero above j
    Value diag = b.select(skip, alpha, toT(beta));
    // trailing columns: H^H = I - conj(tau) v v^H from the left
    Value right = b.compare(cols, b.constantF(double(j), DType::S64, s), Cmp::GT);
    a = b.select(right, reflect(b, a, v, b.conj(tau)), a);
    Value is_col = b.compare(cols, b.constantF(double(j), DType::S64, s), Cmp::EQ);
    Value is_row = b.compare(rows, b.constantF(double(j), DType::S64, s), Cmp::EQ);
    Value below2 = b.compare(rows, b.constantF(double(j), DType::S64, s), Cmp::GT);
    Value newcol = b.select(is_row, b.broadcastInDim(diag, s, bdims), alongRows(b, vbelow, s, false));
    a = b.select(b.andOp(is_col, b.orOp(is_row, below2)), newcol, a);
    taus.push_back(b.reshape(tau, one));
  }
  Shape ts = batch;
  ts.push_back(k);
  Value tau = k == 0 ? b.zeros({a.dtype(), ts}) : taus.size() == 1 ? taus[0] : b.concatenate(taus, r - 2);
  (void)rt;
  return {a, tau};
}

// Q = H_0 H_1 ... H_{t-1} applied to the first `qcols` columns of the m x m identity (orgqr's backward
// accumulation); the reflectors' vectors are a's columns below the diagonal, tau [..., t].
Value householderProduct(Builder& b, Value a, Value tau, int64_t qcols) {
  int64_t r = a.rank(), m = a.shape()[r - 2], t = tau.shape().back();
  Shape qs(a.shape().begin(), a.shape().end() - 2);
  Shape batch = qs;
  qs.push_back(m);
  qs.push_back(qcols);
  Value q = identity(b, qs, a.dtype());
  Shape col_shape = batch;
  col_shape.push_back(m);
  Value rows1 = b.iota({DType::S64, col_shape}, r - 2);
  for (int64_t i = t - 1; i >= 0; --i) {
    Value col = columnOf(b, a, i);
    Value at_i = b.compare(rows1, b.constantF(double(i), DType::S64, col_shape), Cmp::EQ);
    Value below = b.compare(rows1, b.constantF(double(i), DType::S64, col_shape), Cmp::GT);
    Value v = b.select(at_i, b.onesLike(col), b.select(below, col, b.zerosLike(col)));
    Value ti = b.reshape(b.sliceInDim(tau, i, i + 1, 1, r - 2), batch);
    q = reflect(b, q, v, ti);
  }
  return q;
}

// op(Q) x for Q = H_0 ... H_{t-1} (adjoint: Q^H x = H_{t-1}^H ... H_0^H x); x [..., m, c] with a's batch dims.
Value applyQ(Builder& b, Value a, Value tau, Value x, bool adjoint) {
  int64_t r = a.rank(), m = a.shape()[r - 2], t = tau.shape().back();
  Shape batch(a.shape().begin(), a.shape().end() - 2), col_shape = batch;
  col_shape.push_back(m);
  Value rows1 = b.iota({DType::S64, col_shape}, r - 2);
  for (int64_t s = 0; s < t; ++s) {
    int64_t i = adjoint ? s : t - 1 - s;
    Value col = columnOf(b, a, i);
    Value at_i = b.compare(rows1, b.constantF(double(i), DType::S64, col_shape), Cmp::EQ);
    Value below = b.compare(rows1, b.constantF(double(i), DType::S64, col_shape), Cmp::GT);
    Value v = b.select(at_i, b.onesLike(col), b.select(below, col, b.zerosLike(col)));
    Value ti = b.reshape(b.sliceInDim(tau, i, i + 1, 1, r - 2), batch);
    x = reflect(b, x, v, adjoint ? b.conj(ti) : ti);
  }
  return x;
}

// QR rules: a float or complex (batch of) matrix whose smaller side is at most kMaxLU.
// ---- Hermitian eigendecomposition and SVD (Builder::eigh: XLA's Jacobi eigensolver) ----

// The Hermitian matrix LAPACK's heevd reads from a's lower triangle (upper: from its upper triangle): the other
// triangle is the conjugate transpose, of the diagonal only the real part counts.
Value hermitianFromTriangle(Builder& b, Value a, bool upper) {
  const int64_t r = a.rank();
  Value row = b.iota({DType::S64, a.shape()}, r - 2), col = b.iota({DType::S64, a.shape()}, r - 1);
  Value mine = b.compare(row, col, upper ? Cmp::LT : Cmp::GT), mirrored = b.compare(row, col, upper ? Cmp::GT : Cmp::LT);
  Value diag = a;
  if (shlo::isComplex(a.dtype())) {
    Value re = b.realPart(a);
    diag = b.complex(re, b.zerosLike(re));
  }
  return b.select(mine, a, b.select(mirrored, mH(b, a), diag));
}

// The solver's tolerance suits single precision only: float32 and complex64 (double precision declines to the
// CPU's LAPACK).
bool eighAccepts(const Context& ctx) {
  if (!realDTypes(ctx)) return false;
  Value a = ctx.tensor(0);
  return (a.dtype() == DType::F32 || a.dtype() == DType::C64) && a.rank() >= 2;
}

// Columns `cols` (ascending list start..start+count-1, taken in reverse when `reversed`) of v [..., p, q], rows
// [r0, r1), each column scaled to unit norm (a zero column stays zero).
Value unitColumns(Builder& b, Value v, int64_t r0, int64_t r1, int64_t start, int64_t count, bool reversed) {
  const int64_t r = v.rank();
  Value x = b.sliceInDim(b.sliceInDim(v, r0, r1, 1, r - 2), start, start + count, 1, r - 1);
  if (reversed) x = b.reverse(x, {r - 1});
  Value mag = b.abs(x);
  Value norm = b.sqrt(b.reduce(b.mul(mag, mag), {r - 2}, ReduceKind::Sum));  // [..., count]
  Value safe = b.select(b.compare(norm, b.zerosLike(norm), Cmp::GT), norm, b.onesLike(norm));
  Value scale = alongRows(b, safe, x.shape(), true);
  if (shlo::isComplex(x.dtype())) scale = b.complex(scale, b.zerosLike(scale));
  return b.div(x, scale);
}

bool qrAccepts(const Context& ctx) {
  if (!floatMatrices(ctx)) return false;
  Value a = ctx.tensor(0);
  return a.rank() >= 2 && std::min(a.shape()[a.rank() - 1], a.shape()[a.rank() - 2]) <= kMaxLU;
}

// Matrix products: PyTorch CPU requires one dtype for every operand (self included) and has no bool kernels; other
// calls decline, and the CPU kernel raises PyTorch's error.
bool matmulAccepts(const Context& ctx) {
  if (!realDTypes(ctx)) return false;
  DType t = DType::Invalid;
  for (const Arg& a : ctx.args) {
    if (a.kind != Arg::Kind::Tensor || !a.tensor.valid()) continue;
    if (t != DType::Invalid && a.tensor.dtype() != t) return false;
    t = a.tensor.dtype();
  }
  return t != DType::Pred;
}
}  // namespace

namespace {

// The out_dtype forms (mm.dtype, bmm.dtype, addmm.dtype, baddbmm.dtype: float16/bfloat16 operands with a float32
// result, or the operands' dtype): the product accumulates in float32 and the epilogue runs there, one rounding to
// out_dtype. `self` (the added tensor) may be either dtype.
std::vector<Value> mmOutDType(Context& ctx, size_t lhs_i, size_t rhs_i, int64_t nbatch, int64_t lc, int64_t rc,
                              int self_i = -1, size_t beta_i = 0, size_t alpha_i = 0) {
  Builder& b = ctx.b;
  sameDTypes(ctx, {lhs_i, rhs_i});
  Value lhs = ctx.tensor(lhs_i), rhs = ctx.tensor(rhs_i);
  const DType out = ctx.outputs.at(0).dtype;
  Value p = product(b, lhs, rhs, nbatch, lc, rc, accType(lhs.dtype()));
  if (self_i >= 0) p = epilogue(ctx, p, size_t(self_i), beta_i, alpha_i);
  return {b.convert(p, out)};
}

// _int_mm: int8 x int8 -> int32, accumulated in int32.
std::vector<Value> intMm(Context& ctx) {
  sameDTypes(ctx, {0, 1});
  return {ctx.b.dotGeneral(ctx.tensor(0), ctx.tensor(1), {}, {}, {1}, {0}, DType::S32)};
}

bool floatOrSameOut(const Context& ctx) {
  return realDTypes(ctx) && ctx.outputs.size() == 1 && ctx.outputs[0].dtype != DType::Pred;
}

// _scaled_mm(self, mat2, scale_a, scale_b, bias?, scale_result?, out_dtype?, use_fast_accum): float8 operands
// widened to float32 (exactly) and scaled (a tensor-wise scale, or row-wise [M, 1] and [1, N] scales), one float32
// product, plus bias, divided by scale_result for a float8 result, rounded once to out_dtype: PyTorch CPU's steps.
// _scaled_mm_v2 names the same two recipes per operand (TensorWise, RowWise; no swizzle): the same product.
std::vector<Value> scaledProduct(Context& ctx, Value sa, Value sb, int bias, int scale_result) {
  Builder& b = ctx.b;
  Value x = b.convert(ctx.tensor(0), DType::F32), y = b.convert(ctx.tensor(1), DType::F32);
  const int64_t M = x.shape()[0], N = y.shape()[1];
  auto scaled = [&](Value v, Value scale, bool rows) {
    Value s = b.convert(scale, DType::F32);
    if (s.type.numel() == 1) return b.mul(v, b.broadcastInDim(b.reshape(s, {}), v.shape(), {}));
    if (rows) return b.mul(v, b.broadcastInDim(b.reshape(s, {M}), v.shape(), {0}));
    return b.mul(v, b.broadcastInDim(b.reshape(s, {N}), v.shape(), {1}));
  };
  const bool tensorwise = sa.type.numel() == 1 && sb.type.numel() == 1;
  Value p;
  if (tensorwise) {
    p = b.dotGeneral(scaled(x, sa, true), scaled(y, sb, false), {}, {}, {1}, {0}, DType::F32);
  } else {  // row-wise: the scales multiply the product's rows and columns
    p = scaled(scaled(b.dotGeneral(x, y, {}, {}, {1}, {0}, DType::F32), sa, true), sb, false);
  }
  if (bias >= 0 && ctx.has(bias)) p = b.add(p, b.broadcastTo(b.convert(ctx.tensor(bias), DType::F32), p.shape()));
  const DType out = ctx.outputs.at(0).dtype;
  if (scale_result >= 0 && ctx.has(scale_result) && (out == DType::F8E4M3FN || out == DType::F8E5M2)) {
    Value inv = b.div(b.constant(1.0, DType::F32), b.reshape(b.convert(ctx.tensor(scale_result), DType::F32), {}));
    p = b.mul(p, b.broadcastInDim(inv, p.shape(), {}));
  }
  return {b.convert(p, out)};
}

// Float8 (not e8m0) matrices, float32 scales, tensor-wise (one element each) or row-wise ([M, 1] and [1, N]).
bool scaledOperandsOk(const Context& ctx, Value sa, Value sb) {
  const Value x = ctx.tensor(0), y = ctx.tensor(1);
  if (!shlo::isFloat8(x.dtype()) || x.dtype() == DType::F8E8M0FNU || !shlo::isFloat8(y.dtype()) ||
      y.dtype() == DType::F8E8M0FNU || x.rank() != 2 || y.rank() != 2)
    return false;
  if (sa.dtype() != DType::F32 || sb.dtype() != DType::F32) return false;
  const bool tensorwise = sa.type.numel() == 1 && sb.type.numel() == 1;
  const bool rowwise = sa.shape() == Shape{x.shape()[0], 1} && sb.shape() == Shape{1, y.shape()[1]};
  return tensorwise || rowwise;
}

// _scaled_mm_v2's per-operand scale list, recipe and swizzle: one scale, TensorWise (0) or RowWise (1), no swizzle.
constexpr int64_t kTensorWise = 0, kRowWise = 1;
bool v2ScaleOk(const Context& ctx, size_t scales, int64_t* recipe) {
  const Arg& s = ctx.args.at(scales);
  if (s.kind != Arg::Kind::TensorList || s.tensors.size() != 1 || !s.tensors[0].valid()) return false;
  const auto& r = ctx.toInts(scales + 1);
  const auto& sw = ctx.toInts(scales + 2);
  if (r.size() != 1 || (r[0] != kTensorWise && r[0] != kRowWise)) return false;
  for (int64_t v : sw)
    if (v != 0) return false;
  *recipe = r[0];
  return true;
}

bool scaledMmV2Accepts(const Context& ctx) {
  int64_t ra = -1, rb = -1;
  if (!v2ScaleOk(ctx, 2, &ra) || !v2ScaleOk(ctx, 5, &rb) || ra != rb) return false;
  if (ctx.has(10) && !ctx.toInts(10).empty()) return false;  // contraction_dim: the default layout only
  return scaledOperandsOk(ctx, ctx.args[2].tensors[0], ctx.args[5].tensors[0]);
}

}  // namespace

void populateLinalg(Registry& r) {
  r.add("aten::mm.dtype", [](Context& ctx) { return mmOutDType(ctx, 0, 1, 0, 1, 0); }).accepts(floatOrSameOut);
  r.add("aten::bmm.dtype", [](Context& ctx) { return mmOutDType(ctx, 0, 1, 1, 2, 1); }).accepts(floatOrSameOut);
  r.add("aten::addmm.dtype", [](Context& ctx) { return mmOutDType(ctx, 1, 2, 0, 1, 0, 0, 4, 5); })
      .accepts(floatOrSameOut);
  r.add("aten::baddbmm.dtype", [](Context& ctx) { return mmOutDType(ctx, 1, 2, 1, 2, 1, 0, 4, 5); })
      .accepts(floatOrSameOut);
  r.add("aten::_int_mm", intMm).accepts([](const Context& ctx) {
    return ctx.tensor(0).dtype() == DType::S8 && ctx.tensor(1).dtype() == DType::S8;
  });
  r.add("aten::_scaled_mm", [](Context& ctx) { return scaledProduct(ctx, ctx.tensor(2), ctx.tensor(3), 4, 5); })
      .accepts([](const Context& ctx) { return scaledOperandsOk(ctx, ctx.tensor(2), ctx.tensor(3)); })
      .dtypes(kFloat8);
  r.add("aten::_scaled_mm_v2", [](Context& ctx) {
    return scaledProduct(ctx, ctx.args[2].tensors[0], ctx.args[5].tensors[0], 8, -1);
  }).accepts(scaledMmV2Accepts).dtypes(kFloat8);
  r.add("aten::mm", [](Context& ctx) { return mmLike(ctx, 0, 1, 0, 1, 0); })
      .accepts(matmulAccepts).dtypes(kFloat8 | kComplex).packedOperand(1);
  r.add("aten::bmm", [](Context& ctx) { return mmLike(ctx, 0, 1, 1, 2, 1); }).accepts(matmulAccepts).complex();
  r.add("aten::mv", [](Context& ctx) { return mmLike(ctx, 0, 1, 0, 1, 0); }).accepts(matmulAccepts).complex();
  r.add("aten::dot", [](Context& ctx) { return mmLike(ctx, 0, 1, 0, 0, 0); }).accepts(matmulAccepts).complex();
  // vdot conjugates its first operand.
  r.add("aten::vdot", [](Context& ctx) {
    if (shlo::isComplex(ctx.tensor(0).dtype())) ctx.args[0].tensor = ctx.b.conj(ctx.args[0].tensor);
    return mmLike(ctx, 0, 1, 0, 0, 0);
  }).accepts(matmulAccepts).complex();
  // addmm(self, mat1, mat2, *, beta=1, alpha=1)
  r.add("aten::addmm", [](Context& ctx) { return mmLike(ctx, 1, 2, 0, 1, 0, 0, 3, 4); })
      .accepts(matmulAccepts).complex().packedOperand(2);
  r.add("aten::baddbmm", [](Context& ctx) { return mmLike(ctx, 1, 2, 1, 2, 1, 0, 3, 4); }).accepts(matmulAccepts).complex();
  r.add("aten::addmv", [](Context& ctx) { return mmLike(ctx, 1, 2, 0, 1, 0, 0, 3, 4); }).accepts(matmulAccepts).complex();
  // addbmm(self, batch1, batch2, beta, alpha): sum over the batch of batch1[i] @ batch2[i]
  r.add("aten::addbmm", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value lhs = ctx.tensor(1), rhs = ctx.tensor(2);
    sameDTypes(ctx, {1, 2}, 0);
    DType out = lhs.dtype();
    DType acc = accType(out);
    Value l = lhs, rr = rhs;
    if (l.dtype() == DType::Pred) {
      l = b.convert(l, DType::S64);
      rr = b.convert(rr, DType::S64);
      acc = DType::S64;
    }
    if ((out == DType::BF16 || out == DType::F16) && lhs.shape()[0] > 0 && lhs.shape()[0] <= 64) {
      // PyTorch CPU runs one addmm_ per batch, rounding the running result to the half type after each.
      int64_t nb = lhs.shape()[0];
      Value res;
      for (int64_t i = 0; i < nb; ++i) {
        Value li = b.reshape(b.sliceInDim(l, i, i + 1, 1, 0), {l.shape()[1], l.shape()[2]});
        Value ri = b.reshape(b.sliceInDim(rr, i, i + 1, 1, 0), {rr.shape()[1], rr.shape()[2]});
        Value p = b.dotGeneral(li, b.convert(ri, li.dtype()), {}, {}, {1}, {0}, acc);
        if (i == 0) {
          res = b.convert(epilogue(ctx, p, 0, 3, 4), out);
        } else {
          if (ctx.has(4)) p = b.mul(p, operand(ctx, 4, acc, p.shape()));
          res = b.convert(b.add(b.convert(res, acc), p), out);
        }
      }
      return {res};
    }
    Value p = b.dotGeneral(l, b.convert(rr, l.dtype()), {}, {}, {0, 2}, {0, 1}, acc);
    return {b.convert(epilogue(ctx, p, 0, 3, 4), out)};
  }).accepts(matmulAccepts).complex();
  // linalg_cholesky_ex(self, *, upper=False, check_errors=False) -> (L, info): info is 1 + the first row whose
  // factor is not finite (the input is not positive-definite there), else 0.
  r.add("aten::linalg_cholesky_ex", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value a = ctx.tensor(0);
    DType t = a.dtype(), c = accType(t);
    bool upper = ctx.has(1) && ctx.toBool(1);
    Value l = choleskyLower(b, b.convert(a, c), upper);
    int64_t n = a.shape().back(), r = a.rank();
    Value finite = shlo::isComplex(c) ? b.andOp(b.isFinite(b.realPart(l)), b.isFinite(b.imagPart(l))) : b.isFinite(l);
    Value bad_row = b.reduce(b.notOp(finite), {r - 1}, ReduceKind::Or);  // [..., n]
    Shape rs = bad_row.shape();
    Value pos = b.add(b.iota({DType::S32, rs}, r - 2), b.constantF(1, DType::S32, rs));
    Value big = b.constantF(double(n + 1), DType::S32, rs);
    Value first = b.reduce(b.select(bad_row, pos, big), {r - 2}, ReduceKind::Min);
    Value info = b.select(b.compare(first, b.constantF(double(n), DType::S32, first.shape()), Cmp::GT),
                          b.zerosLike(first), first);
    return {b.convert(upper ? mH(b, l) : l, t), info};
  }).accepts(floatMatrices).complex();
  r.add("aten::cholesky", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value a = ctx.tensor(0);
    bool upper = ctx.has(1) && ctx.toBool(1);
    Value l = choleskyLower(b, b.convert(a, accType(a.dtype())), upper);
    return {b.convert(upper ? mH(b, l) : l, a.dtype())};
  }).accepts(floatMatrices).complex();
  // linalg_solve_triangular(self=A, B, *, upper, left=True, unitriangular=False)
  r.add("aten::linalg_solve_triangular", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = promote(ctx.tensor(0).dtype(), ctx.tensor(1).dtype()), c = accType(t);
    auto [a, rhs] = broadcastBatch(b, b.convert(ctx.tensor(0), c), b.convert(ctx.tensor(1), c));
    bool upper = ctx.toBool(2), left = !ctx.has(3) || ctx.toBool(3), unit = ctx.has(4) && ctx.toBool(4);
    if (rhs.type.numel() == 0 || a.type.numel() == 0) return {b.zeros({t, ctx.outputs.at(0).shape})};
    return {b.convert(triSolve(b, a, rhs, left, !upper, unit, OpA::None), t)};
  }).accepts(floatMatrices).complex();
  // triangular_solve(self=B, A, upper=True, transpose=False, unitriangular=False) -> (solution, cloned_coefficient);
  // `transpose` is the plain transpose for complex matrices too.
  r.add("aten::triangular_solve", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = ctx.tensor(0).dtype(), c = accType(t);
    auto [rhs, a] = broadcastBatch(b, b.convert(ctx.tensor(0), c), b.convert(ctx.tensor(1), c));
    bool upper = !ctx.has(2) || ctx.toBool(2), trans = ctx.has(3) && ctx.toBool(3), unit = ctx.has(4) && ctx.toBool(4);
    Value sol = rhs.type.numel() == 0 || a.type.numel() == 0
                    ? rhs
                    : triSolve(b, a, rhs, true, !upper, unit, trans ? OpA::Transpose : OpA::None);
    return {b.convert(sol, t), b.convert(a, t)};
  }).accepts(floatMatrices).complex();
  // _cholesky_solve_helper(self=B, A=factor, upper): solves (L L^H) X = B (upper: the factor is U = L^H).
  r.add("aten::_cholesky_solve_helper", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = ctx.tensor(0).dtype(), c = accType(t);
    auto [rhs, f] = broadcastBatch(b, b.convert(ctx.tensor(0), c), b.convert(ctx.tensor(1), c));
    bool upper = ctx.toBool(2);
    if (rhs.type.numel() == 0) return {b.convert(rhs, t)};
    Value l = upper ? mH(b, f) : f;
    Value y = triSolve(b, l, rhs, true, true, false, OpA::None);
    return {b.convert(triSolve(b, l, y, true, true, false, OpA::Adjoint), t)};
  }).accepts(floatMatrices).complex();
  // cholesky_inverse(self=factor, upper=False): (L L^H)^-1.
  r.add("aten::cholesky_inverse", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value f0 = ctx.tensor(0);
    DType t = f0.dtype(), c = accType(t);
    Value f = b.convert(f0, c);
    if (f.type.numel() == 0) return {f0};
    Value l = ctx.has(1) && ctx.toBool(1) ? mH(b, f) : f;
    Value y = triSolve(b, l, identity(b, f.shape(), c), true, true, false, OpA::None);
    return {b.convert(triSolve(b, l, y, true, true, false, OpA::Adjoint), t)};
  }).accepts(floatMatrices).complex();
  // addr(self, vec1, vec2, *, beta=1, alpha=1): beta*self + (alpha*vec1)*vec2 with PyTorch CPU's per-operation
  // rounding for half types; beta == 0 ignores self.
  r.add("aten::addr", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    const TensorType& ot = ctx.outputs.at(0);
    DType t = ot.dtype;
    Shape shape = ot.shape;
    Value v1 = b.broadcastInDim(b.convert(ctx.tensor(1), t), shape, {0});
    Value v2 = b.broadcastInDim(b.convert(ctx.tensor(2), t), shape, {1});
    Value self = b.broadcastTo(b.convert(ctx.tensor(0), t), shape);
    if (t == DType::Pred) {
      Value prod = b.andOp(v1, v2);
      if (ctx.has(4)) prod = b.andOp(prod, b.broadcastTo(scalarArg(ctx, 4, t), shape));
      Value sb = ctx.has(3) ? b.andOp(self, b.broadcastTo(scalarArg(ctx, 3, t), shape)) : self;
      return {b.orOp(sb, prod)};
    }
    DType c = accType(t);
    auto R = [&](Value v) { return b.convert(b.convert(v, t), c); };  // round to t
    Value a1 = b.convert(v1, c), a2 = b.convert(v2, c), sf = b.convert(self, c);
    Value alpha = ctx.has(4) ? b.broadcastTo(scalarArg(ctx, 4, c), shape) : b.onesLike(a1);
    Value prod = R(b.mul(R(b.mul(alpha, a1)), a2));
    if (!ctx.has(3)) return {b.convert(b.add(sf, prod), t)};
    Value beta = scalarArg(ctx, 3, c);
    Value scaled = R(b.mul(b.broadcastTo(beta, shape), sf));
    Value res = b.convert(b.add(scaled, prod), t);
    return {b.select(b.compare(beta, b.constant(0, c), Cmp::EQ), b.convert(prod, t), res)};
  }).accepts(realDTypes).complex();
  // ---- LU family ----
  // linalg_lu_factor_ex(A, *, pivot=True, check_errors=False) -> (LU, pivots, info)
  r.add("aten::linalg_lu_factor_ex", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value a = ctx.tensor(0);
    LU f = luFactor(b, b.convert(a, accType(a.dtype())));
    return {b.convert(f.lu, a.dtype()), f.pivots, f.info};
  }).accepts([](const Context& ctx) { return luAccepts(ctx) && (!ctx.has(1) || ctx.toBool(1)); }).complex();
  // _linalg_det(A) -> (det, LU, pivots). Like PyTorch for a contiguous real A, the LU is A^T's (det A^T = det A);
  // the backward formulas expect exactly that. A complex A is factored itself, as PyTorch does.
  r.add("aten::_linalg_det", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value a = ctx.tensor(0);
    DType t = a.dtype(), c = accType(t);
    Value ac = b.convert(a, c);
    LU f = luFactor(b, shlo::isComplex(c) ? ac : mT(b, ac));
    int64_t rk = a.rank();
    Value det = b.reduce(diagOf(b, f.lu), {rk - 2}, ReduceKind::Prod);
    det = b.mul(det, pivotSign(b, f.pivots, c));
    return {b.convert(det, t), b.convert(f.lu, t), f.pivots};
  }).accepts(luAccepts).complex();
  // _linalg_slogdet(A) -> (sign, logabsdet, LU, pivots); complex: sign is the phase prod(U_ii / |U_ii|) (times the
  // permutation's sign) and logabsdet is real.
  r.add("aten::_linalg_slogdet", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value a = ctx.tensor(0);
    DType t = a.dtype(), c = accType(t);
    Value ac = b.convert(a, c);
    LU f = luFactor(b, shlo::isComplex(c) ? ac : mT(b, ac));  // real: A^T's LU, as PyTorch (see _linalg_det)
    int64_t rk = a.rank();
    Value d = diagOf(b, f.lu);
    Value sign = b.mul(b.reduce(signOf(b, d), {rk - 2}, ReduceKind::Prod), pivotSign(b, f.pivots, c));
    Value logabs = b.reduce(b.log(b.abs(d)), {rk - 2}, ReduceKind::Sum);
    return {b.convert(sign, t), b.convert(logabs, ctx.outputs.at(1).dtype), b.convert(f.lu, t), f.pivots};
  }).accepts(luAccepts).complex();
  // linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False)
  r.add("aten::linalg_lu_solve", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = ctx.outputs.at(0).dtype, c = accType(t);
    bool left = !ctx.has(3) || ctx.toBool(3), adjoint = ctx.has(4) && ctx.toBool(4);
    Value lu = b.convert(ctx.tensor(0), c), rhs = b.convert(ctx.tensor(2), c);
    if (!left) rhs = mH(b, rhs);  // X op(A) = B  <=>  op(A)^H X^H = B^H
    auto [lub, rb] = broadcastBatch(b, lu, rhs);
    Shape pshape(lub.shape().begin(), lub.shape().end() - 2);
    pshape.push_back(ctx.tensor(1).shape().back());
    Value piv = b.broadcastTo(ctx.tensor(1), pshape);
    if (rb.type.numel() == 0) return {b.zeros(ctx.outputs.at(0))};
    Value x = luSolve(b, lub, piv, rb, left ? adjoint : !adjoint);
    if (!left) x = mH(b, x);
    return {b.convert(x, t)};
  }).accepts(luAccepts).complex();
  // _linalg_solve_ex(A, B, *, left=True, check_errors=False) -> (result, LU, pivots, info); B may be a vector.
  r.add("aten::_linalg_solve_ex", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = ctx.outputs.at(0).dtype, c = accType(t);
    Value a = b.convert(ctx.tensor(0), c), rhs = b.convert(ctx.tensor(1), c);
    bool left = !ctx.has(2) || ctx.toBool(2);
    const Shape& out_shape = ctx.outputs.at(0).shape;
    bool vec = rhs.rank() == a.rank() - 1 || (rhs.rank() == 1);
    if (vec) {
      Shape s = rhs.shape();
      s.push_back(1);
      rhs = b.reshape(rhs, s);
    }
    if (!left) rhs = mH(b, rhs);  // X A = B  <=>  A^H X^H = B^H
    Shape lu_shape = ctx.outputs.at(1).shape;
    a = b.broadcastTo(a, lu_shape);
    LU f = luFactor(b, a);
    auto [lub, rb] = broadcastBatch(b, f.lu, rhs);
    Shape pshape(lub.shape().begin(), lub.shape().end() - 2);
    pshape.push_back(f.pivots.shape().back());
    Value x = rb.type.numel() == 0 ? rb : luSolve(b, lub, b.broadcastTo(f.pivots, pshape), rb, !left);
    if (!left) x = mH(b, x);
    x = b.reshape(x, out_shape);
    return {b.convert(x, t), b.convert(f.lu, t), f.pivots, f.info};
  }).accepts([](const Context& ctx) { return luAccepts(ctx) && ctx.tensor(1).rank() >= 1; }).complex();
  // linalg_inv_ex(A, *, check_errors=False) -> (inverse, info)
  r.add("aten::linalg_inv_ex", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value a0 = ctx.tensor(0);
    DType t = a0.dtype(), c = accType(t);
    Value a = b.convert(a0, c);
    LU f = luFactor(b, a);
    if (a.type.numel() == 0) return {a0, f.info};
    return {b.convert(luSolve(b, f.lu, f.pivots, identity(b, a.shape(), c), false), t), f.info};
  }).accepts(luAccepts).complex();
  // lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True) -> (P, L, U); linalg_lu(A, *, pivot=True)
  // -> (P, L, U) factors and unpacks.
  for (bool factor : {false, true}) {
    r.add(factor ? "aten::linalg_lu" : "aten::lu_unpack", [factor](Context& ctx) -> std::vector<Value> {
      Builder& b = ctx.b;
      Value lu = ctx.tensor(0), piv;
      DType t = lu.dtype();
      if (factor) {
        LU f = luFactor(b, b.convert(lu, accType(t)));
        lu = b.convert(f.lu, t);
        piv = f.pivots;
      } else {
        piv = ctx.tensor(1);
      }
      int64_t rk = lu.rank(), m = lu.shape()[rk - 2], n = lu.shape()[rk - 1], k = std::min(m, n);
      bool data = factor || !ctx.has(2) || ctx.toBool(2), pivots = factor || !ctx.has(3) || ctx.toBool(3);
      std::vector<Value> out(3);
      if (data) {
        Shape ls = lu.shape();
        ls[rk - 1] = k;
        Value lpart = b.sliceInDim(lu, 0, k, 1, rk - 1);
        Value rows = b.iota({DType::S64, ls}, rk - 2), cols = b.iota({DType::S64, ls}, rk - 1);
        Value l = b.select(b.compare(rows, cols, Cmp::GT), lpart,
                           b.select(b.compare(rows, cols, Cmp::EQ), b.onesLike(lpart), b.zerosLike(lpart)));
        Value upart = b.sliceInDim(lu, 0, k, 1, rk - 2);
        Value urows = b.iota({DType::S64, upart.shape()}, rk - 2), ucols = b.iota({DType::S64, upart.shape()}, rk - 1);
        out[1] = l;
        out[2] = b.select(b.compare(ucols, urows, Cmp::GE), upart, b.zerosLike(upart));
      }
      if (pivots) {
        // P = the identity with the recorded row swaps applied, transposed (A = P L U).
        Shape ps(lu.shape().begin(), lu.shape().end() - 2);
        ps.push_back(m);
        ps.push_back(m);
        Value eye = identity(b, ps, t);
        Shape pvs(ps.begin(), ps.end() - 2);
        pvs.push_back(piv.shape().back());
        Value perm = applyPivots(b, eye, b.broadcastTo(piv, pvs), false);
        out[0] = mT(b, perm);
      }
      for (size_t i = 0; i < 3; ++i)
        if (!out[i].valid() || ctx.outputs[i].dtype == DType::Invalid || out[i].shape() != ctx.outputs[i].shape)
          out[i] = b.zeros(ctx.outputs[i].dtype == DType::Invalid ? TensorType{t, {0}} : ctx.outputs[i]);
      return out;
    }).accepts([factor](const Context& ctx) {
      return squareSmall(ctx, 0) && (!factor || !ctx.has(1) || ctx.toBool(1));
    }).complex();
  }
  // ---- QR family (Householder, LAPACK's conventions, so Q and R equal PyTorch CPU's) ----
  // linalg_householder_product(A [m, n], tau [k]) -> the first n columns of H_0 ... H_{k-1}
  r.add("aten::linalg_householder_product", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value a = ctx.tensor(0), tau = ctx.tensor(1);
    DType t = a.dtype(), c = accType(t);
    return {b.convert(householderProduct(b, b.convert(a, c), b.convert(tau, c), a.shape().back()), t)};
  }).accepts([](const Context& ctx) {
    return qrAccepts(ctx) && ctx.tensor(1).dtype() == ctx.tensor(0).dtype() &&
           ctx.tensor(1).rank() == ctx.tensor(0).rank() - 1 &&
           ctx.tensor(1).shape().back() <= ctx.tensor(0).shape().back();
  }).complex();
  // ormqr(A, tau, C, left=True, transpose=False): op(Q) C (left) or C op(Q), op(Q) = Q or Q^H, Q = H_0 ... H_{k-1}
  // from geqrf's output; C op(Q) = (op(Q)^H C^H)^H.
  r.add("aten::ormqr", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = ctx.tensor(2).dtype(), c = accType(t);
    Value a = b.convert(ctx.tensor(0), c), tau = b.convert(ctx.tensor(1), c), x = b.convert(ctx.tensor(2), c);
    bool left = !ctx.has(3) || ctx.toBool(3), trans = ctx.has(4) && ctx.toBool(4);
    if (x.type.numel() == 0 || a.type.numel() == 0) return {b.convert(x, t)};
    if (left) return {b.convert(applyQ(b, a, tau, x, trans), t)};
    return {b.convert(mH(b, applyQ(b, a, tau, mH(b, x), !trans)), t)};
  }).accepts([](const Context& ctx) {
    if (!qrAccepts(ctx)) return false;
    Value a = ctx.tensor(0), tau = ctx.tensor(1), x = ctx.tensor(2);
    if (a.dtype() != x.dtype() || tau.dtype() != x.dtype() || x.rank() != a.rank() || tau.rank() != a.rank() - 1)
      return false;
    if (!std::equal(a.shape().begin(), a.shape().end() - 2, x.shape().begin())) return false;
    bool left = !ctx.has(3) || ctx.toBool(3);
    int64_t m = left ? x.shape()[size_t(x.rank() - 2)] : x.shape().back();
    return a.shape()[size_t(a.rank() - 2)] == m && tau.shape().back() <= std::min(m, a.shape().back());
  }).complex();
  // linalg_qr(A, mode='reduced') -> (Q, R); 'complete' gives Q m x m, 'r' an empty Q.
  r.add("aten::linalg_qr", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value a0 = ctx.tensor(0);
    DType t = a0.dtype();
    const TensorType &qt = ctx.outputs.at(0), &rt = ctx.outputs.at(1);
    int64_t rk = a0.rank();
    if (a0.type.numel() == 0)  // no reflectors: Q is the identity (empty unless 'complete' of an m x 0 matrix)
      return {qt.numel() == 0 ? b.zeros(qt) : identity(b, qt.shape, t), b.zeros(rt)};
    QR f = householderQR(b, b.convert(a0, accType(t)));
    int64_t rrows = rt.shape[size_t(rk - 2)];
    Value rpart = b.sliceInDim(f.a, 0, rrows, 1, rk - 2);
    Value up = b.compare(b.iota({DType::S64, rpart.shape()}, rk - 1), b.iota({DType::S64, rpart.shape()}, rk - 2),
                         Cmp::GE);
    Value R = b.select(up, rpart, b.zerosLike(rpart));
    Value Q = qt.numel() == 0 ? b.zeros(qt) : householderProduct(b, f.a, f.tau, qt.shape.back());
    return {b.convert(Q, t), b.convert(R, t)};
  }).accepts([](const Context& ctx) {
    if (!qrAccepts(ctx)) return false;
    const std::string mode = ctx.has(1) ? ctx.arg(1).s : "reduced";
    return mode == "reduced" || mode == "complete" || mode == "r";
  }).complex();
  // ---- Hermitian eigendecomposition and SVD ----
  // _linalg_eigh(A, UPLO="L", compute_v=True) -> (eigenvalues ascending, eigenvectors as columns)
  r.add("aten::_linalg_eigh", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value a = ctx.tensor(0);
    const TensorType &wt = ctx.outputs.at(0), &vt = ctx.outputs.at(1);
    auto unasked = [&](const TensorType& t) { return b.zeros(t.dtype == DType::Invalid ? TensorType{a.dtype(), {0}} : t); };
    if (a.type.numel() == 0) return {b.zeros(wt), unasked(vt)};
    const bool upper = ctx.has(1) && ctx.arg(1).s == "U", vectors = !ctx.has(2) || ctx.toBool(2);
    std::vector<Value> ev = b.eigh(hermitianFromTriangle(b, a, upper));
    return {ev[1], vectors ? ev[0] : unasked(vt)};
  }).accepts(eighAccepts).complex();
  // _linalg_svd(A, full_matrices=False, compute_uv=True, *, driver=None) -> (U, S descending, Vh), from the
  // eigendecomposition of the Hermitian [[0, A], [A^H, 0]] ((m + n) x (m + n)): its eigenvalues are +-S and
  // |m - n| zeros, the eigenvector of +s is [u; v] / sqrt(2) (A v = s u, A^H u = s v), so S is as accurate as the
  // eigensolver (no squared condition number as through A^H A). The eigenvectors of the |m - n| zero eigenvalues are
  // [u; 0] (m > n) or [0; v] (m < n): the rest of U or V that full_matrices asks for.
  r.add("aten::_linalg_svd", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value a = ctx.tensor(0);
    const DType t = a.dtype();
    const int64_t rk = a.rank(), m = a.shape()[size_t(rk - 2)], n = a.shape()[size_t(rk - 1)], k = std::min(m, n);
    const TensorType &ut = ctx.outputs.at(0), &st = ctx.outputs.at(1), &vht = ctx.outputs.at(2);
    const bool full = ctx.has(1) && ctx.toBool(1), uv = !ctx.has(2) || ctx.toBool(2);
    auto unasked = [&](const TensorType& tt) { return b.zeros(tt.dtype == DType::Invalid ? TensorType{t, {0}} : tt); };
    if (a.type.numel() == 0) {  // as PyTorch: S empty, a U / Vh that has rows and columns is the identity
      auto eye = [&](const TensorType& tt) { return tt.dtype == DType::Invalid || tt.numel() == 0 ? unasked(tt) : identity(b, tt.shape, t); };
      return {uv ? eye(ut) : unasked(ut), b.zeros(st), uv ? eye(vht) : unasked(vht)};
    }
    Shape batch(a.shape().begin(), a.shape().end() - 2);
    auto zeros = [&](int64_t rows, int64_t cols) {
      Shape s = batch;
      s.push_back(rows);
      s.push_back(cols);
      return b.zeros({t, s});
    };
    Value top = b.concatenate({zeros(m, m), a}, rk - 1), bottom = b.concatenate({mH(b, a), zeros(n, n)}, rk - 1);
    std::vector<Value> ev = b.eigh(b.concatenate({top, bottom}, rk - 2));
    const int64_t p = m + n;
    Value s = b.reverse(b.sliceInDim(ev[1], p - k, p, 1, rk - 2), {rk - 2});  // eigenvalues: [..., p]
    s = b.select(b.compare(s, b.zerosLike(s), Cmp::GT), s, b.zerosLike(s));  // a zero singular value: never -0.0 or -eps
    if (!uv) return {unasked(ut), s, unasked(vht)};
    Value u = unitColumns(b, ev[0], 0, m, p - k, k, true), v = unitColumns(b, ev[0], m, p, p - k, k, true);
    if (full && m > n) u = b.concatenate({u, unitColumns(b, ev[0], 0, m, k, m - n, false)}, rk - 1);
    if (full && n > m) v = b.concatenate({v, unitColumns(b, ev[0], m, p, k, n - m, false)}, rk - 1);
    return {u, s, mH(b, v)};
  }).accepts([](const Context& ctx) { return eighAccepts(ctx) && !ctx.has(3); }).complex();
  // _addmm_activation(self, mat1, mat2, *, beta=1, alpha=1, bool use_gelu=False)
  r.add("aten::_addmm_activation", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value lhs = ctx.tensor(1), rhs = ctx.tensor(2);
    DType out = lhs.dtype();
    Value p = epilogue(ctx, product(b, lhs, rhs, 0, 1, 0, accType(out)), 0, 3, 4);
    bool gelu = ctx.has(5) && ctx.toBool(5);
    if (gelu) {  // tanh approximation, as PyTorch's fused kernel
      const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
      Value cube = b.mul(b.mul(p, p), p);
      Value inner = b.mul(cst(b, kBeta, p), b.add(p, b.mul(cst(b, kKappa, p), cube)));
      p = b.mul(b.mul(cst(b, 0.5, p), p), b.add(cst(b, 1, p), b.tanh(inner)));
    } else if (shlo::isSigned(p.dtype())) {
      p = b.select(b.compare(p, b.zerosLike(p), Cmp::LT), b.zerosLike(p), p);
    }
    return {b.convert(p, out)};
  }).accepts(realDTypes);
  // linalg_cross(self, other, *, dim=-1): both broadcast; dim has size 3.
  r.add("aten::linalg_cross", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0), y = ctx.tensor(1);
    DType t = promote(x.dtype(), y.dtype());
    Shape shape = broadcastShapes({x.shape(), y.shape()});
    x = b.broadcastTo(b.convert(x, t), shape);
    y = b.broadcastTo(b.convert(y, t), shape);
    int64_t d = normDim(ctx, ctx.has(2) ? ctx.toInt(2) : -1, int64_t(shape.size()));
    auto at = [&](Value v, int64_t i) { return b.sliceInDim(v, i, i + 1, 1, d); };
    auto part = [&](int64_t i, int64_t j) { return b.sub(b.mul(at(x, i), at(y, j)), b.mul(at(x, j), at(y, i))); };
    return {b.concatenate({part(1, 2), part(2, 0), part(0, 1)}, d)};
  }).accepts(realDTypes).complex();
}

}  // namespace torch_tpu::lowering
