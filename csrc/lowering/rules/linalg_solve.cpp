// Linear-algebra family, solves: Cholesky and triangular solves (stablehlo.cholesky / stablehlo.triangular_solve),
// LU with partial pivoting (factor, solve, det, slogdet, inverse, unpack).
#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>

#include "lowering/families.h"
#include "lowering/helpers.h"
#include "lowering/rules/linalg_common.h"

namespace torch_tpu::lowering {
namespace {

using shlo::Cmp;
using namespace linalg;

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

// The real number LAPACK's pivot search compares: |x|, for complex |re| + |im| (BLAS i?amax).
Value pivotMagnitude(Builder& b, Value x) {
  if (!shlo::isComplex(x.dtype())) return b.abs(x);
  return b.add(b.abs(b.realPart(x)), b.abs(b.imagPart(x)));
}

// Broadcasts the batch dims (all but the last two) of x and y to each other.
std::pair<Value, Value> broadcastBatch(Builder& b, Value x, Value y) {
  Shape bx(x.shape().begin(), x.shape().end() - 2), by(y.shape().begin(), y.shape().end() - 2);
  Shape bb = broadcastShapes({bx, by});
  Shape sx = bb, sy = bb;
  sx.insert(sx.end(), x.shape().end() - 2, x.shape().end());
  sy.insert(sy.end(), y.shape().end() - 2, y.shape().end());
  return {b.broadcastTo(x, sx), b.broadcastTo(y, sy)};
}

// ---- LU with partial pivoting (LAPACK getrf's choices), unrolled over the columns ----

struct LU {
  Value lu;      // [..., m, n] in the compute dtype
  Value pivots;  // [..., k] int32, 1-based (LAPACK)
  Value info;    // [...] int32
};

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

// The LU-based rules: argument 0 a float (batch of) matrix whose smaller side is at most kMaxLU.
bool luAccepts(const Context& ctx) { return squareSmall(ctx, 0); }

}  // namespace

void populateLinalgSolve(Registry& r) {
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
}

}  // namespace torch_tpu::lowering
