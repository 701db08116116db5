// Linear-algebra family, decompositions: QR by Householder reflections (geqrf, orgqr/householder_product, ormqr,
// linalg_qr), the Hermitian eigendecomposition (_linalg_eigh) and the SVD (_linalg_svd), both through Builder::eigh.
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

// QR rules: a float or complex (batch of) matrix whose smaller side is at most kMaxLU.

bool qrAccepts(const Context& ctx) {
  if (!floatMatrices(ctx)) return false;
  Value a = ctx.tensor(0);
  return a.rank() >= 2 && std::min(a.shape()[a.rank() - 1], a.shape()[a.rank() - 2]) <= kMaxLU;
}

}  // namespace

void populateLinalgDecomp(Registry& r) {
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
  // geqrf(A [..., m, n]) -> (a, tau): LAPACK's compact QR (R on and above the diagonal, the reflectors below it).
  r.add("aten::geqrf", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value a0 = ctx.tensor(0);
    const DType t = a0.dtype();
    if (a0.type.numel() == 0) return {a0, b.zeros(ctx.outputs.at(1))};
    QR f = householderQR(b, b.convert(a0, accType(t)));
    return {b.convert(f.a, t), b.convert(f.tau, t)};
  }).accepts(qrAccepts).complex();
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
}

}  // namespace torch_tpu::lowering
